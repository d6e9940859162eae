#!/usr/bin/env python3
"""Time one training step of a truth-protocol model in PyTorch, for the
comparison with `memest verify`'s measured step time (docs/verify.md).

usage: time_step.py [MODEL[,MODEL...]] [BATCH[,BATCH...]] [OPTIMIZER]   (default: resnet18 32 adam)

The step is the truth protocol's (zero_grad(set_to_none=True), forward,
y.float().mean(), backward, step), float32, cudnn.benchmark left off. Three
warm-up steps, then the median of 20 timed steps, each synchronised.
Prints one JSON line per model and batch (a model that fails to run prints
its error instead of the times).
"""
import json
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zoo  # noqa: E402
from measure import optimizer  # noqa: E402


def protocol_step(model, x, opt):
    """The truth protocol's step, as a function of no arguments."""
    def step():
        opt.zero_grad(set_to_none=True)
        y = model(x)
        loss = y.float().mean()
        loss.backward()
        opt.step()
    return step


def timed_steps(step, warm=3, timed=20):
    """Seconds of each of `timed` synchronised steps, after `warm` of them."""
    for _ in range(warm):
        step()
    torch.cuda.synchronize()
    times = []
    for _ in range(timed):
        t0 = time.perf_counter()
        step()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return times


def time_one(name, batch, kind):
    model = zoo.build(name).cuda().train()
    x = zoo.make_input(name, batch).cuda()
    opt = optimizer(kind, model.parameters())
    times = timed_steps(protocol_step(model, x, opt))
    return {"median_ms": 1000 * statistics.median(times), "min_ms": 1000 * min(times)}


def main():
    names = (sys.argv[1] if len(sys.argv) > 1 else "resnet18").split(",")
    batches = [int(b) for b in (sys.argv[2] if len(sys.argv) > 2 else "32").split(",")]
    kind = sys.argv[3] if len(sys.argv) > 3 else "adam"
    for name in names:
        for batch in batches:
            row = {"model": name, "batch": batch, "optimizer": kind, "device": torch.cuda.get_device_name(),
                   "torch": torch.__version__}
            try:
                row.update(time_one(name, batch, kind))
            except Exception as e:  # recorded; the other models still run
                row["error"] = repr(e)[:200]
            print(json.dumps(row), flush=True)
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
