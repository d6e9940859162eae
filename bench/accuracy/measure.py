#!/usr/bin/env python3
"""Measure PyTorch's peak memory on a CUDA GPU with the protocol of
../shared/truth/README.md, for the models of zoo.py.

usage: measure.py OUT.json [--probe DIR] [--no-memtracker] [--no-amp] [MODEL ...]

OUT.json has truth.json's layout (models -> batches, n_params, n_buffers,
infer, train, train_amp_bf16, train_amp_fp16, memtracker_adam_b<batch>), so
compare.py and compare_amp.py read either. Every infer and train entry also
has "reserved" (torch.cuda.max_memory_reserved() over the configuration, as
truth.json) and "reserved_base" (torch.cuda.memory_reserved() after settle(),
before the model exists: the segments that survive empty_cache). The top level
has "held_after_warm_up" and "reserved_after_warm_up".

train_amp_bf16 and train_amp_fp16: Adam, forward and loss under
torch.autocast("cuda", dtype=...), float32 weights, batches from the second
entry of `batches` upwards (../shared/truth/README.md); {"error": ...} for a
model whose autocast pass raised. --no-amp skips them.

--no-memtracker skips the MemTracker snapshot and the --probe pass (faster).

--probe DIR also writes DIR/<model>.json: for one batch, every aten op of a
steady-state Adam training step and of an inference pass, with the bytes
allocated before it, the transient bytes it needed beyond that, and what it
left allocated. That is the evidence for the per-op rules in layers/.
"""
import copy
import gc
import json
import sys
import time

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

import zoo

ITERATIONS = 3


def optimizer(kind, params):
    if kind == "sgd":
        return torch.optim.SGD(params, lr=1e-3)
    if kind == "momentum":
        return torch.optim.SGD(params, lr=1e-3, momentum=0.9)
    return torch.optim.Adam(params, lr=1e-4)


def settle():
    gc.collect()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()


def measure_infer(cpu_model, name, batch):
    settle()
    base = torch.cuda.memory_allocated()
    reserved_base = torch.cuda.memory_reserved()
    torch.cuda.reset_peak_memory_stats()  # after settle(): the peaks start at what survived it
    model = copy.deepcopy(cpu_model).cuda().eval()
    x = zoo.make_input(name, batch).cuda()
    held = torch.cuda.memory_allocated() - base
    with torch.no_grad():
        y = model(x)
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated() - base
    reserved = torch.cuda.max_memory_reserved()
    del y, x, model
    return {"weights_and_input": held, "peak": peak, "act_peak": peak - held, "reserved": reserved,
            "reserved_base": reserved_base}


def train_step(model, opt, x):
    """One iteration of the protocol, for probes; measure_train inlines it so
    that y and loss are rebound exactly as in the truth's loop."""
    opt.zero_grad(set_to_none=True)
    y = model(x)
    loss = y.float().mean()
    loss.backward()
    opt.step()
    return y


AMP_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def measure_train(cpu_model, name, batch, kind, amp=None, prepare=None):
    """The truth's training protocol. amp: None, "bf16" or "fp16" (forward and
    loss under torch.autocast("cuda"), weights and optimizer state float32).
    prepare(model), when given, is applied to the model once it is on the GPU
    and in train mode, before the optimizer exists (measure_checkpoint.py uses
    it to wrap segments in torch.utils.checkpoint); it must not allocate."""
    settle()
    base = torch.cuda.memory_allocated()
    reserved_base = torch.cuda.memory_reserved()
    torch.cuda.reset_peak_memory_stats()
    model = copy.deepcopy(cpu_model).cuda().train()
    if prepare is not None:
        prepare(model)
    opt = optimizer(kind, model.parameters())
    x = zoo.make_input(name, batch).cuda()
    peaks = []
    reserved = []
    for _ in range(ITERATIONS):  # the previous y and loss live until rebound, as in the truth
        torch.cuda.reset_peak_memory_stats()
        opt.zero_grad(set_to_none=True)
        if amp is None:
            y = model(x)
            loss = y.float().mean()
        else:
            with torch.autocast("cuda", dtype=AMP_DTYPES[amp]):
                y = model(x)
                loss = y.float().mean()
        loss.backward()
        opt.step()
        torch.cuda.synchronize()
        peaks.append(torch.cuda.max_memory_allocated() - base)
        reserved.append(torch.cuda.max_memory_reserved())
    steady = torch.cuda.memory_allocated() - base
    params = sum(p.numel() * p.element_size() for p in model.parameters())
    buffers = sum(b.numel() * b.element_size() for b in model.buffers())
    del y, loss, x, opt, model
    return {"params": params, "buffers": buffers, "peak_iter": peaks, "peak": max(peaks),
            "steady_after_step": steady, "reserved": max(reserved), "reserved_base": reserved_base}


def measure_amp(cpu_model, name, amp):
    """train_amp_<amp>: Adam under autocast, batches from the second upward;
    {"error": ...} when the autocast pass raises."""
    out = {}
    for b in zoo.batches(name)[1:]:
        try:
            out[str(b)] = measure_train(cpu_model, name, b, "adam", amp=amp)
        except Exception as e:
            return {"error": repr(e)[:300]}
    return out


def memtracker(cpu_model, name, batch):
    try:
        from torch.distributed._tools.mem_tracker import MemTracker
    except ImportError:
        return None
    settle()
    model = copy.deepcopy(cpu_model).cuda().train()
    opt = optimizer("adam", model.parameters())
    x = zoo.make_input(name, batch).cuda()
    y = train_step(model, opt, x)  # the optimizer state exists from here on
    mt = MemTracker()
    mt.track_external(model, opt)
    with mt:
        y = train_step(model, opt, x)
    snap = mt.get_tracker_snapshot("peak")
    del y, x, opt, model
    return {str(dev): {str(k): v for k, v in cats.items()} for dev, cats in snap.items()}


class OpProbe(TorchDispatchMode):
    """Records, for each aten op: phase, op, input shapes, non-tensor args,
    bytes allocated before, transient bytes above that, bytes left after."""

    def __init__(self):
        super().__init__()
        self.phase = "forward"
        self.rows = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        before = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        out = func(*args, **kwargs)
        peak = torch.cuda.max_memory_allocated()
        after = torch.cuda.memory_allocated()
        leaves = tree_leaves((args, kwargs))
        shapes = [list(a.shape) if isinstance(a, torch.Tensor) else None for a in leaves]
        other = [repr(a)[:40] for a in leaves if not isinstance(a, torch.Tensor)]
        outs = [list(o.shape) for o in tree_leaves(out) if isinstance(o, torch.Tensor)]
        self.rows.append([self.phase, str(func), [s for s in shapes if s is not None], other, outs,
                          before, peak - before, after - before])
        return out


def probed_step(model, opt, x):
    """One iteration of the protocol under OpProbe: its rows."""
    p = OpProbe()
    with p:
        opt.zero_grad(set_to_none=True)
        p.phase = "forward"
        y = model(x)
        p.phase = "loss"
        loss = y.float().mean()
        p.phase = "backward"
        loss.backward()
        p.phase = "step"
        opt.step()
    del y, loss
    return p.rows


def probe(cpu_model, name, batch):
    settle()
    model = copy.deepcopy(cpu_model).cuda().train()
    opt = optimizer("adam", model.parameters())
    x = zoo.make_input(name, batch).cuda()
    train_step(model, opt, x)  # the optimizer state exists from here on
    settle()
    train_rows = probed_step(model, opt, x)
    del opt, model
    settle()
    model = copy.deepcopy(cpu_model).cuda().eval()
    p = OpProbe()
    with torch.no_grad(), p:
        y = model(x)
    del y, model, x
    return {"batch": batch, "train_adam": train_rows, "infer": p.rows}


def warm_up():
    """cuBLAS and cuDNN handles and the cuBLAS workspace exist before any
    baseline is read, as they did in the truth runs."""
    before = torch.cuda.memory_allocated()
    a = torch.randn(256, 256, device="cuda", requires_grad=True)
    (a @ a).sum().backward()
    torch.nn.functional.linear(a, a, a[0]).sum().backward()
    c = torch.nn.Conv2d(3, 8, 3).cuda()
    c(torch.randn(2, 3, 16, 16, device="cuda")).sum().backward()
    torch.bmm(a[None], a[None])
    del a, c
    settle()
    return torch.cuda.memory_allocated() - before


def parse_args(argv):
    """OUT.json [--probe DIR] [--no-memtracker] [--no-amp] [MODEL ...], the
    options anywhere after OUT.json."""
    if not argv or argv[0].startswith("-"):
        sys.exit(__doc__)
    out_path, rest = argv[0], argv[1:]
    probe_dir, memtrack, amp, names = None, True, True, []
    i = 0
    while i < len(rest):
        arg = rest[i]
        if arg == "--probe":
            if i + 1 >= len(rest):
                sys.exit("--probe needs a directory")
            probe_dir = rest[i + 1]
            i += 2
            continue
        if arg == "--no-memtracker":
            memtrack = False
        elif arg == "--no-amp":
            amp = False
        elif arg.startswith("-"):
            sys.exit(f"unknown option {arg}\n{__doc__}")
        else:
            names.append(arg)
        i += 1
    if not memtrack:
        probe_dir = None
    return out_path, probe_dir, memtrack, amp, names or list(zoo.MODELS)


def main():
    out_path, probe_dir, memtrack, amp, names = parse_args(sys.argv[1:])
    import os
    if probe_dir:
        os.makedirs(probe_dir, exist_ok=True)
    result = {"torch": torch.__version__, "device": torch.cuda.get_device_name(),
              "cudnn": torch.backends.cudnn.version(), "cudnn_benchmark": torch.backends.cudnn.benchmark,
              "date": time.strftime("%Y-%m-%d"), "models": {}}
    try:
        import transformers
        result["transformers"] = transformers.__version__
    except ImportError:
        pass
    result["held_after_warm_up"] = warm_up()  # warm_up() ends with settle()
    result["reserved_after_warm_up"] = torch.cuda.memory_reserved()
    t_start = time.time()
    for name in names:
        t0 = time.time()
        try:
            cpu_model = zoo.build(name)
            m = {"batches": zoo.batches(name),
                 "n_params": sum(p.numel() for p in cpu_model.parameters()),
                 "n_buffers": sum(b.numel() for b in cpu_model.buffers()),
                 "infer": {}, "train": {}}
            for b in m["batches"]:
                m["infer"][str(b)] = measure_infer(cpu_model, name, b)
                m["train"][str(b)] = {k: measure_train(cpu_model, name, b, k) for k in ("sgd", "momentum", "adam")}
            t_fp32 = time.time() - t0
            if amp:
                for a in AMP_DTYPES:
                    m[f"train_amp_{a}"] = measure_amp(cpu_model, name, a)
            last = m["batches"][-1]
            if memtrack:
                try:
                    mt = memtracker(cpu_model, name, last)
                except Exception as e:
                    mt = {"error": repr(e)[:300]}
                if mt:
                    m[f"memtracker_adam_b{last}"] = mt
            if probe_dir:
                pb = m["batches"][1] if len(m["batches"]) > 1 else m["batches"][0]
                with open(f"{probe_dir}/{name}.json", "w") as f:
                    json.dump(probe(cpu_model, name, pb), f)
            result["models"][name] = m
            print(f"{name}: {time.time() - t0:.1f} s (fp32 infer+train {t_fp32:.1f} s)", flush=True)
        except Exception as e:  # one model's failure must not lose the others
            import traceback
            traceback.print_exc()
            result["models"][name] = {"error": repr(e)[:500]}
        with open(out_path, "w") as f:
            json.dump(result, f, indent=1)
    print(f"all models: {time.time() - t_start:.1f} s", flush=True)


if __name__ == "__main__":
    main()
