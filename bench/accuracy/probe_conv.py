#!/usr/bin/env python3
"""Measure the transient memory (cuDNN workspace and friends) of one 2-D
convolution, forward with and without autograd and backward, over a grid of
shapes and batch sizes. The evidence for the Conv workspace rule in
layers/conv.c.

usage: probe_conv.py OUT.json
Each row: [cin, cout, k, stride, groups, hw, batch, pass, transient bytes,
output bytes]. transient = max_memory_allocated during the call minus the
bytes allocated before it and the bytes the call left allocated.
"""
import itertools
import json
import sys

import torch
import torch.nn.functional as F


def transient(fn):
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    out = fn()
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated() - before
    left = torch.cuda.memory_allocated() - before
    return out, peak - left, left


def main():
    rows = []
    shapes = [  # cin, cout, k, stride, groups, hw
        (3, 64, 7, 2, 1, 224), (3, 96, 7, 2, 1, 224), (64, 64, 3, 1, 1, 56), (64, 128, 3, 2, 1, 56),
        (128, 128, 3, 1, 1, 28), (256, 256, 3, 1, 1, 14), (512, 512, 3, 1, 1, 7), (64, 128, 1, 2, 1, 56),
        (96, 16, 1, 1, 1, 54), (16, 64, 1, 1, 1, 54), (16, 64, 3, 1, 1, 54), (64, 256, 1, 1, 1, 56),
        (32, 32, 3, 1, 32, 112), (96, 96, 3, 2, 96, 112), (144, 144, 3, 1, 144, 56), (960, 960, 3, 1, 960, 7),
        (32, 16, 1, 1, 1, 112), (96, 24, 1, 1, 1, 56), (1, 6, 5, 1, 1, 28), (6, 16, 5, 1, 1, 14),
        (48, 48, 3, 1, 2, 56), (128, 128, 3, 1, 8, 28), (96, 96, 7, 1, 96, 56), (3, 32, 3, 2, 1, 224),
    ]
    for (cin, cout, k, stride, groups, hw), batch in itertools.product(shapes, (1, 8, 32)):
        w = torch.randn(cout, cin // groups, k, k, device="cuda", requires_grad=True)
        x = torch.randn(batch, cin, hw, hw, device="cuda", requires_grad=True)
        pad = k // 2
        with torch.no_grad():
            y, t, left = transient(lambda: F.conv2d(x, w, None, stride, pad, 1, groups))
        rows.append([cin, cout, k, stride, groups, hw, batch, "infer", t, left])
        del y
        y, t, left = transient(lambda: F.conv2d(x, w, None, stride, pad, 1, groups))
        rows.append([cin, cout, k, stride, groups, hw, batch, "forward", t, left])
        g = torch.randn_like(y)
        _, t, left = transient(lambda: torch.autograd.grad(y, (x, w), g))
        rows.append([cin, cout, k, stride, groups, hw, batch, "backward", t, left])
        y = F.conv2d(x.detach(), w, None, stride, pad, 1, groups)
        _, t, left = transient(lambda: torch.autograd.grad(y, (w,), g))
        rows.append([cin, cout, k, stride, groups, hw, batch, "backward_weight_only", t, left])
        del x, w, y, g
        torch.cuda.empty_cache()
    with open(sys.argv[1], "w") as f:
        json.dump({"torch": torch.__version__, "device": torch.cuda.get_device_name(),
                   "cudnn": torch.backends.cudnn.version(), "rows": rows}, f)


if __name__ == "__main__":
    main()
