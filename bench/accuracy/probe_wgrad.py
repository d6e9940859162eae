#!/usr/bin/env python3
"""Transient memory of small convolutions' backward over a batch sweep: how
cuDNN's weight-gradient workspace (cudnn.benchmark off, heuristics) grows
with the batch when the weight is small and the reduction (batch x output
pixels) is long. The evidence for the small-conv case of the Conv
backward-workspace rule in layers/conv.c (lenet's 6->16 5x5 conv asks for
none at batch 8 and 1.7 MB at batch 64).

usage: probe_wgrad.py OUT.json
Each row: [cin, cout, k, pad, hw, batch, pass, transient bytes, left bytes]
for pass in forward, backward (input and weight need gradients) and
backward_weight_only; transient as in probe_conv.py.
"""
import itertools
import json
import sys

import torch
import torch.nn.functional as F

from probe_conv import transient

SHAPES = [  # cin, cout, k, pad, hw
    (6, 16, 5, 0, 14), (1, 6, 5, 2, 28), (3, 16, 3, 1, 32), (3, 32, 3, 1, 32), (8, 16, 3, 1, 28),
    (16, 16, 3, 1, 28), (16, 32, 5, 2, 14), (6, 16, 3, 1, 14), (12, 24, 5, 0, 14), (32, 32, 3, 1, 16),
    (32, 64, 3, 1, 8), (16, 64, 3, 1, 54), (64, 64, 3, 1, 56), (128, 128, 3, 1, 28),
]
BATCHES = (1, 8, 16, 32, 64, 128, 256, 512)


def main():
    rows = []
    for (cin, cout, k, pad, hw), batch in itertools.product(SHAPES, BATCHES):
        if batch * cin * hw * hw * 4 > 2**30:
            continue
        w = torch.randn(cout, cin, k, k, device="cuda", requires_grad=True)
        x = torch.randn(batch, cin, hw, hw, device="cuda", requires_grad=True)
        y, t, left = transient(lambda: F.conv2d(x, w, None, 1, pad))
        rows.append([cin, cout, k, pad, hw, batch, "forward", t, left])
        g = torch.randn_like(y)
        _, t, left = transient(lambda: torch.autograd.grad(y, (x, w), g))
        rows.append([cin, cout, k, pad, hw, batch, "backward", t, left])
        y = F.conv2d(x.detach(), w, None, 1, pad)
        _, t, left = transient(lambda: torch.autograd.grad(y, (w,), g))
        rows.append([cin, cout, k, pad, hw, batch, "backward_weight_only", t, left])
        del x, w, y, g
        torch.cuda.empty_cache()
    with open(sys.argv[1], "w") as f:
        json.dump({"torch": torch.__version__, "device": torch.cuda.get_device_name(),
                   "cudnn": torch.backends.cudnn.version(), "rows": rows}, f)
    for r in rows:
        if r[6] != "forward":
            print(*r)


if __name__ == "__main__":
    main()
