#!/usr/bin/env python3
"""Measure PyTorch's peak memory on a CUDA GPU with the protocol of
../shared/truth/README.md, for the models of zoo.py.

usage: measure.py OUT.json [--probe DIR] [MODEL ...]

OUT.json has truth.json's layout (models -> batches, n_params, n_buffers,
infer, train, memtracker_adam_b<batch>), so compare.py reads either.

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
    torch.cuda.reset_peak_memory_stats()
    model = copy.deepcopy(cpu_model).cuda().eval()
    x = zoo.make_input(name, batch).cuda()
    held = torch.cuda.memory_allocated() - base
    with torch.no_grad():
        y = model(x)
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated() - base
    del y, x, model
    return {"weights_and_input": held, "peak": peak, "act_peak": peak - held}


def train_step(model, opt, x):
    """One iteration of the protocol, for probes; measure_train inlines it so
    that y and loss are rebound exactly as in the truth's loop."""
    opt.zero_grad(set_to_none=True)
    y = model(x)
    loss = y.float().mean()
    loss.backward()
    opt.step()
    return y


def measure_train(cpu_model, name, batch, kind):
    settle()
    base = torch.cuda.memory_allocated()
    model = copy.deepcopy(cpu_model).cuda().train()
    opt = optimizer(kind, model.parameters())
    x = zoo.make_input(name, batch).cuda()
    peaks = []
    for _ in range(ITERATIONS):  # the previous y and loss live until rebound, as in the truth
        torch.cuda.reset_peak_memory_stats()
        opt.zero_grad(set_to_none=True)
        y = model(x)
        loss = y.float().mean()
        loss.backward()
        opt.step()
        torch.cuda.synchronize()
        peaks.append(torch.cuda.max_memory_allocated() - base)
    steady = torch.cuda.memory_allocated() - base
    params = sum(p.numel() * p.element_size() for p in model.parameters())
    buffers = sum(b.numel() * b.element_size() for b in model.buffers())
    del y, loss, x, opt, model
    return {"params": params, "buffers": buffers, "peak_iter": peaks, "peak": max(peaks),
            "steady_after_step": steady}


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


def probe(cpu_model, name, batch):
    settle()
    model = copy.deepcopy(cpu_model).cuda().train()
    opt = optimizer("adam", model.parameters())
    x = zoo.make_input(name, batch).cuda()
    train_step(model, opt, x)  # the optimizer state exists from here on
    settle()
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
    train_rows = p.rows
    del y, loss, opt, model
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


def main():
    out_path = sys.argv[1]
    rest = sys.argv[2:]
    probe_dir = None
    if rest[:1] == ["--probe"]:
        probe_dir, rest = rest[1], rest[2:]
    names = rest or list(zoo.MODELS)
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
    result["held_after_warm_up"] = warm_up()
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
            last = m["batches"][-1]
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
            print(f"{name}: {time.time() - t0:.1f} s", flush=True)
        except Exception as e:  # one model's failure must not lose the others
            import traceback
            traceback.print_exc()
            result["models"][name] = {"error": repr(e)[:500]}
        with open(out_path, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
