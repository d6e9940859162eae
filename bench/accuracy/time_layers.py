#!/usr/bin/env python3
"""Measure the truth protocol's training step (Adam, float32) of zoo models
on a GPU, per module and pass, for memest's time estimate (docs/accuracy.md,
"Step time").

usage: time_layers.py OUT.json [--batches 8,32] [--cpu] [MODEL ...]
       (default models: time_zoo.TIMED)

Per model and batch:
- `step_s`: the median of 10 synchronised steps after 3 warm-up steps, no
  profiler and no hooks (time_step.timed_steps);
- one more step under the PyTorch profiler, every module's forward wrapped
  in a `mod::NAME` range by hooks. Each op's own CUDA time
  (self_device_time_total) goes to the innermost range above it: a
  module's forward, or, on autograd's thread, the backward node
  (`autograd::engine::evaluate_function: XBackward0`) whose sequence
  number a forward op of that module made; `modules` holds per module
  `fwd_s`, `bwd_s`; `optimizer_s` the optimizer's step, `other_s` the rest
  (the loss, AccumulateGrad), `families` conv/matmul/other as time_zoo.py
  sums them, and `kernels`.
The top level holds the probes memest's time model is calibrated on, none of
them a zoo model: `launch_s` and `eager` (time_zoo.py), `eager_noparam`
(the same chain without parameters: 400 ReLUs on an input that needs a
gradient), `kernel_s` (the median CUDA time of a 1-element add) and
`roofline`: achieved rates of large kernels, against which the datasheet
peaks are compared (fp32 and bf16 matmul, a TF32 cuDNN convolution, a
copy).
cudnn.benchmark off, TF32 as PyTorch defaults (convolutions on, matmuls
off). --cpu runs it all on the CPU (CPU times): a dry run of the
attribution.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import torch
from torch.profiler import ProfilerActivity, profile, record_function

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zoo  # noqa: E402
from time_step import protocol_step  # noqa: E402
from time_zoo import TIMED, eager_probe, family, launch_floor  # noqa: E402

BACKWARD = "autograd::engine::evaluate_function: "
DEV = "cuda"


def sync():
    if DEV == "cuda":
        torch.cuda.synchronize()


def own_time(ev):
    """Seconds of the kernels this event launched itself (CPU time on --cpu)."""
    if DEV == "cpu":
        return ev.self_cpu_time_total / 1e6
    t = getattr(ev, "self_device_time_total", None)
    if t is None:
        t = getattr(ev, "self_cuda_time_total", 0)
    return t / 1e6


def module_ranges(model):
    """Hooks that wrap each module's forward in a `mod::NAME` profiler range;
    returns their handles."""
    handles = []
    for name, mod in model.named_modules():
        stack = []

        def pre(_m, _a, name=name, stack=stack):
            rf = record_function("mod::" + name)
            rf.__enter__()
            stack.append(rf)

        def post(_m, _a, _o, stack=stack):
            stack.pop().__exit__(None, None, None)

        handles.append(mod.register_forward_pre_hook(pre))
        handles.append(mod.register_forward_hook(post))
    return handles


def ancestors(ev):
    while ev is not None:
        yield ev
        ev = ev.cpu_parent


def innermost_module(ev):
    for a in ancestors(ev):
        if a.name.startswith("mod::"):
            return a.name[5:]
    return None


def attribute(events):
    """Each op's own time to a module's forward or backward, the optimizer,
    or other; families as time_zoo.py sums them."""
    seq_module = {}
    for ev in events:
        seq = getattr(ev, "sequence_nr", -1)
        if seq is not None and seq >= 0 and not ev.name.startswith(BACKWARD):
            mod = innermost_module(ev)
            if mod is not None and seq not in seq_module:
                seq_module[seq] = mod
    modules, fam = {}, {"conv": 0.0, "matmul": 0.0, "other": 0.0}
    optimizer = other = 0.0
    for ev in events:
        if ev.device_type != torch.autograd.DeviceType.CPU:
            continue  # a kernel's time is its launching op's own time
        t = own_time(ev)
        if t <= 0 or ev.name.startswith("mod::"):
            continue
        if ev.name.startswith("aten") or ev.name.startswith("cudnn"):
            fam[family(ev.name)] += t
        where = None
        for a in ancestors(ev):
            if a.name.startswith(BACKWARD):
                mod = seq_module.get(getattr(a, "sequence_nr", -1))
                where = ("bwd_s", mod) if mod is not None else ("other", None)
                break
            if a.name.startswith("mod::"):
                where = ("fwd_s", a.name[5:])
                break
            if a.name.startswith("Optimizer.step"):
                where = ("optimizer", None)
                break
        if where is None or where[0] == "other":
            other += t
        elif where[0] == "optimizer":
            optimizer += t
        else:
            m = modules.setdefault(where[1], {"fwd_s": 0.0, "bwd_s": 0.0})
            m[where[0]] += t
    return modules, fam, optimizer, other


def time_model(name, batch):
    model = zoo.build(name).to(DEV).train()
    x = zoo.make_input(name, batch).to(DEV)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    step = protocol_step(model, x, opt)
    for _ in range(3):
        step()
    sync()
    times = []
    for _ in range(10):
        t0 = time.perf_counter()
        step()
        sync()
        times.append(time.perf_counter() - t0)
    handles = module_ranges(model)
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if DEV == "cuda" else [])
    with profile(activities=acts) as prof:
        step()
        sync()
    for h in handles:
        h.remove()
    events = prof.events()
    modules, fam, optimizer, other = attribute(events)
    kernels = sum(1 for ev in events if ev.device_type == torch.autograd.DeviceType.CUDA
                  and not getattr(ev, "is_user_annotation", False))
    del model, x, opt
    if DEV == "cuda":
        torch.cuda.empty_cache()
    device_total = sum(m["fwd_s"] + m["bwd_s"] for m in modules.values()) + optimizer + other
    return {"step_s": statistics.median(times), "steps_s": times, "device_total_s": device_total,
            "optimizer_s": optimizer, "other_s": other, "families": fam, "kernels": kernels, "modules": modules}


def eager_noparam(ops=400, repeat=20):
    """Host cost per forward and backward op without parameters: a chain of
    `ops` ReLUs on a 1x8 input that needs a gradient."""
    x = torch.randn(1, 8, device=DEV, requires_grad=True)
    fwd, bwd = [], []
    for i in range(repeat + 3):
        sync()
        t0 = time.perf_counter()
        y = x
        for _ in range(ops):
            y = torch.relu(y)
        loss = y.mean()
        sync()
        t1 = time.perf_counter()
        loss.backward()
        sync()
        t2 = time.perf_counter()
        x.grad = None
        if i >= 3:
            fwd.append(t1 - t0)
            bwd.append(t2 - t1)
    return {"ops": ops, "forward_op_s": statistics.median(fwd) / ops, "backward_op_s": statistics.median(bwd) / ops}


def kernel_floor():
    """Median CUDA time of the kernel of a 1-element add."""
    a = torch.ones(1, device=DEV)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(200):
            a = a + 1
        sync()
    ts = [ev.device_time_total / 1e6 for ev in prof.events() if ev.device_type == torch.autograd.DeviceType.CUDA]
    return statistics.median(ts) if ts else None


def rate(fn, work, repeat=10):
    """work / seconds of fn, the median of `repeat` timed calls after 3."""
    for _ in range(3):
        fn()
    sync()
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        sync()
        ts.append(time.perf_counter() - t0)
    return work / statistics.median(ts)


def roofline_probe():
    """Achieved FLOP/s and bytes/s of large kernels, as PyTorch runs them by
    default: an fp32 matmul (no TF32), a bf16 matmul, a cuDNN convolution
    (TF32 allowed), a copy."""
    n = 8192 if DEV == "cuda" else 512
    a = torch.randn(n, n, device=DEV)
    b = torch.randn(n, n, device=DEV)
    ah, bh = a.bfloat16(), b.bfloat16()
    x = torch.randn(64 if DEV == "cuda" else 2, 256, 56, 56, device=DEV)
    w = torch.randn(256, 256, 3, 3, device=DEV)
    conv_flops = 2 * x.shape[0] * 256 * 56 * 56 * 256 * 9
    big = torch.empty((1 << 28) if DEV == "cuda" else (1 << 20), device=DEV)
    res = {"matmul_fp32_flops": rate(lambda: a @ b, 2 * n ** 3),
           "matmul_bf16_flops": rate(lambda: ah @ bh, 2 * n ** 3),
           "conv_tf32_flops": rate(lambda: torch.nn.functional.conv2d(x, w, padding=1), conv_flops),
           "copy_bytes_s": rate(lambda: big.clone(), 2 * big.numel() * 4)}
    del a, b, ah, bh, x, w, big
    return res


def commit():
    if os.environ.get("COMMIT"):  # the device's copy of the tree has no .git
        return os.environ["COMMIT"]
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              cwd=os.path.dirname(os.path.abspath(__file__))).stdout.strip() or None
    except OSError:
        return None


def probes():
    res = {"eager_noparam": eager_noparam(), "roofline": roofline_probe()}
    if DEV == "cuda":
        res.update({"launch_s": launch_floor(), "eager": eager_probe(), "kernel_s": kernel_floor()})
    return res


def main():
    global DEV
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("models", nargs="*")
    ap.add_argument("--batches", default="8,32")
    ap.add_argument("--cpu", action="store_true")
    args = ap.parse_intermixed_args()
    DEV = "cpu" if args.cpu else "cuda"
    torch.backends.cudnn.benchmark = False
    res = {"device": torch.cuda.get_device_name(0) if DEV == "cuda" else "cpu", "torch": torch.__version__,
           "cudnn": torch.backends.cudnn.version(), "date": time.strftime("%Y-%m-%d"), "commit": commit(),
           "allow_tf32": {"matmul": torch.backends.cuda.matmul.allow_tf32, "cudnn": torch.backends.cudnn.allow_tf32}}
    res.update(probes())
    print(json.dumps({k: v for k, v in res.items()}, default=str), flush=True)
    res["models"] = {}
    for name in args.models or TIMED:
        res["models"][name] = {}
        for b in [int(v) for v in args.batches.split(",")]:
            try:
                r = time_model(name, b)
            except Exception as e:  # recorded; the others still run
                r = {"error": repr(e)[:300]}
            res["models"][name][str(b)] = r
            if "error" in r:
                print(f"{name:16} b{b:<3} ERROR {r['error'][:100]}", flush=True)
            else:
                fwd = sum(m["fwd_s"] for m in r["modules"].values())
                bwd = sum(m["bwd_s"] for m in r["modules"].values())
                print(f"{name:16} b{b:<3} step {r['step_s'] * 1e3:8.2f} ms  device {r['device_total_s'] * 1e3:7.2f}"
                      f" (fwd {fwd * 1e3:.2f}, bwd {bwd * 1e3:.2f}, optimizer {r['optimizer_s'] * 1e3:.2f}, other "
                      f"{r['other_s'] * 1e3:.2f}) ms  {len(r['modules'])} modules  {r['kernels']} kernels", flush=True)
    with open(args.out, "w") as f:
        json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
