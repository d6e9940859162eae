#!/usr/bin/env python3
"""The true largest batch of zoo models on this GPU: the largest batch whose
training step (the truth protocol: Adam, float32, three iterations of
zero_grad, forward, y.float().mean(), backward, step) runs without
torch.cuda.OutOfMemoryError: from a start (memest's answer, given as
MODEL:START, else --start) the search gallops up while batches run or down
while they do not, in steps of start / 64 that double, then bisects. The evidence
for memest's --max-batch (docs/capacity.md).

usage (on a GPU machine): max_batch.py OUT.json [--start N] [--limit SECONDS] [MODEL[:START] ...]

Each trial builds the model on the GPU afresh, runs the step, and frees
everything (gc, empty_cache), so trials do not see each other's segments.
OUT.json has the machine (device name, torch, total memory as
torch.cuda.mem_get_info reports it, and what the process held before the
first trial) and per model: largest (the largest batch that ran), smallest
failing, the trials (batch, ran, max_memory_allocated, max_memory_reserved),
and the seconds it took. A model that runs past --limit seconds (default
240) stops searching and says so ("unfinished").
"""
import argparse
import copy
import gc
import json
import sys
import time

import torch

import zoo

DEFAULT_MODELS = ["resnet18", "resnet50", "mobilenet_v2", "vit_b_16", "convnext_tiny", "bert_base", "gpt2_6l",
                  "llama_4l", "unet", "lstm_tagger"]


def settle():
    gc.collect()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()


def trial(cpu_model, name, batch):
    """(ran, peak allocated, peak reserved) of one training step at `batch`."""
    settle()
    torch.cuda.reset_peak_memory_stats()
    model = opt = x = y = loss = None
    try:
        model = copy.deepcopy(cpu_model).cuda().train()
        opt = torch.optim.Adam(model.parameters(), lr=1e-4)
        x = zoo.make_input(name, batch).cuda()
        for _ in range(3):
            opt.zero_grad(set_to_none=True)
            y = model(x)
            loss = y.float().mean()
            loss.backward()
            opt.step()
            y = loss = None
        torch.cuda.synchronize()
        ran = True
    except torch.cuda.OutOfMemoryError:
        ran = False
    peak, reserved = torch.cuda.max_memory_allocated(), torch.cuda.max_memory_reserved()
    del model, opt, x, y, loss
    settle()
    return ran, peak, reserved


def search(name, start, limit):
    """The largest batch that runs, by galloping from `start` and bisecting."""
    cpu_model = zoo.build(name)
    t0 = time.time()
    trials, lo, hi = [], 0, None

    def run(b):
        ran, peak, reserved = trial(cpu_model, name, b)
        trials.append({"batch": b, "ran": ran, "max_memory_allocated": peak, "max_memory_reserved": reserved})
        print(f"{name} batch {b}: {'ran' if ran else 'out of memory'}, allocated {peak / 2**30:.2f} GiB, "
              f"reserved {reserved / 2**30:.2f} GiB", flush=True)
        return ran

    # gallop from the start, up while batches run, down while they do not,
    # in steps of start / 64 doubling, then bisect the bracket
    step = max(1, start // 64)
    if run(start):
        lo = start
        while hi is None and time.time() - t0 < limit:
            b = lo + step
            if run(b):
                lo, step = b, step * 2
            else:
                hi = b
    else:
        hi = start
        while lo == 0 and time.time() - t0 < limit:
            b = max(1, hi - step)
            if run(b):
                lo = b
            elif b == 1:
                hi = 1
                break
            else:
                hi, step = b, step * 2
    while hi is not None and hi - lo > 1 and time.time() - t0 < limit:  # bisection
        mid = (lo + hi) // 2
        if run(mid):
            lo = mid
        else:
            hi = mid
    done = hi is not None and hi - lo <= 1
    return {"largest": lo, "smallest_failing": hi, "unfinished": not done, "trials": trials,
            "seconds": round(time.time() - t0, 1)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--start", type=int, default=32)
    ap.add_argument("--limit", type=float, default=240)
    ap.add_argument("models", nargs="*")
    a = ap.parse_intermixed_args()
    torch.backends.cudnn.benchmark = False
    settle()
    free, total = torch.cuda.mem_get_info()
    result = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
              "cudnn": torch.backends.cudnn.version(), "date": time.strftime("%Y-%m-%d"),
              "total_bytes": total, "free_bytes_before": free, "models": {}}
    for arg in a.models or DEFAULT_MODELS:
        name, _, start = arg.partition(":")
        try:
            result["models"][name] = search(name, int(start) if start else a.start, a.limit)
        except Exception as e:  # one model's failure must not lose the rest
            result["models"][name] = {"error": f"{type(e).__name__}: {e}"}
        with open(a.out, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
