#!/usr/bin/env python3
"""Held-out check of the Conv weight-gradient workspace rule (layers/conv.c,
split_k_partials): the transient memory of one conv's backward for shapes
and batches the rule was not written from, in float32, and in float16 and
bfloat16 for a few (what dtype the split-K partial sums take).

usage: probe_splitk.py OUT.json
Each row: [cin, cout, k, pad, stride, hw, batch, dtype, spatial rank,
transient bytes, left bytes]; transient as in probe_conv.py (peak during
the call minus what was allocated before it and what it left).
"""
import itertools
import json
import sys

import torch
import torch.nn.functional as F

from probe_conv import transient

SHAPES_2D = [  # cin, cout, k, pad, stride, hw: none of them in probe_wgrad.py or probe_conv.py
    (3, 16, 5, 2, 1, 32), (10, 20, 5, 0, 1, 12), (24, 48, 3, 1, 1, 28), (48, 96, 3, 1, 1, 14),
    (96, 96, 3, 1, 1, 28), (192, 192, 3, 1, 1, 14), (320, 320, 3, 1, 1, 7), (64, 192, 3, 1, 1, 28),
    (32, 64, 5, 2, 1, 28), (16, 32, 3, 1, 1, 56), (128, 256, 3, 1, 2, 28), (256, 512, 3, 1, 1, 14),
]
SHAPES_1D = [(64, 64, 3, 1, 1, 512), (128, 128, 5, 2, 1, 256), (32, 64, 7, 3, 1, 1024)]
BATCHES = (1, 8, 32, 64, 128)
HALF = [(6, 16, 5, 0, 1, 14), (64, 64, 3, 1, 1, 56), (128, 128, 3, 1, 1, 28), (256, 256, 3, 1, 1, 14),
        (24, 48, 3, 1, 1, 28)]
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def measure(cin, cout, k, pad, stride, hw, batch, dtype, rank):
    conv = F.conv2d if rank == 2 else F.conv1d
    size = (batch, cin) + (hw,) * rank
    w = torch.randn((cout, cin) + (k,) * rank, device="cuda", dtype=DTYPES[dtype], requires_grad=True)
    x = torch.randn(size, device="cuda", dtype=DTYPES[dtype], requires_grad=True)
    y = conv(x, w, None, stride, pad)
    g = torch.randn_like(y)
    _, t, left = transient(lambda: torch.autograd.grad(y, (x, w), g))
    del x, w, y, g
    torch.cuda.empty_cache()
    return [cin, cout, k, pad, stride, hw, batch, dtype, rank, t, left]


def main():
    rows = []
    for shape, batch in itertools.product(SHAPES_2D, BATCHES):
        rows.append(measure(*shape, batch, "float32", 2))
    for shape, batch in itertools.product(SHAPES_1D, BATCHES):
        rows.append(measure(*shape, batch, "float32", 1))
    for shape, batch, dtype in itertools.product(HALF, (8, 64), ("float16", "bfloat16", "float32")):
        rows.append(measure(*shape, batch, dtype, 2))
    with open(sys.argv[1], "w") as f:
        json.dump({"torch": torch.__version__, "device": torch.cuda.get_device_name(),
                   "cudnn": torch.backends.cudnn.version(), "rows": rows}, f)
    for r in rows:
        print(*r)


if __name__ == "__main__":
    main()
