#!/usr/bin/env python3
"""Measure what PyTorch needs on the device beyond its tensors: the CUDA
context (device memory used once torch has initialised CUDA and cuBLAS,
before any model) and the caching allocator's slack (max_memory_reserved
minus max_memory_allocated over a training step). The evidence for the
default of `memest --reserve` (docs/capacity.md).

usage: measure_reserve.py [MODEL:BATCH ...]   (default: a few zoo models)
Prints one JSON object.
"""
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zoo  # noqa: E402


def context_bytes():
    free0, total = torch.cuda.mem_get_info()  # initialises the context
    a = torch.ones(1024, 1024, device="cuda")
    (a @ a).sum().item()  # cuBLAS handle and workspace
    free1, _ = torch.cuda.mem_get_info()
    reserved = torch.cuda.memory_reserved()
    del a
    return {"total": total, "used_after_init": total - free0, "used_after_cublas": total - free1,
            "torch_reserved_then": reserved}


def step_slack(name, batch):
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    model = zoo.build(name).cuda().train()
    x = zoo.make_input(name, batch).cuda()
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    for _ in range(3):
        opt.zero_grad(set_to_none=True)
        loss = model(x).float().mean()
        loss.backward()
        opt.step()
    torch.cuda.synchronize()
    alloc, res = torch.cuda.max_memory_allocated(), torch.cuda.max_memory_reserved()
    free, total = torch.cuda.mem_get_info()
    del model, x, opt, loss
    return {"model": name, "batch": batch, "max_allocated": alloc, "max_reserved": res,
            "slack": res - alloc, "slack_fraction": (res - alloc) / alloc, "device_used": total - free}


def main():
    cases = sys.argv[1:] or ["resnet18:32", "resnet18:128", "mobilenet_v2:64", "bert_base:32", "vit_b_16:32",
                             "gpt2_6l:16"]
    out = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "context": context_bytes(),
           "steps": []}
    for c in cases:
        name, b = c.split(":")
        try:
            out["steps"].append(step_slack(name, int(b)))
        except Exception as e:  # a model the zoo lacks, or out of memory
            out["steps"].append({"model": name, "batch": int(b), "error": str(e)[:200]})
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
