#!/usr/bin/env python3
"""What PyTorch allocates to sum a gradient down to a broadcast operand's
shape: the evidence for the reduction workspace of libestimate's backward
(a Linear's or a broadcast Add's bias gradient, grad.sum(0, keepdim=True)).

usage (on a GPU machine): probe_sum.py OUT.json

For every configuration of a grid (rows R summed, outputs N, dtype, and how
the rows are laid out: [R, N] summed over dim 0, or [R / 8, 8, N] over dims
0 and 1, as the bias gradient of a 3-D activation is taken), a contiguous
x on the GPU, then:

  transient   max_memory_allocated() during x.sum(dims, keepdim=True),
              above memory_allocated() before it, less the output's block
  autograd    the same through autograd: the bias gradient of
              torch.nn.functional.linear(a, w, b) for a of [R, K], K = 64,
              with only b requiring grad; the peak of backward() above the
              level before it, less b.grad's block and the grad_output's

Every figure is in bytes as the caching allocator counts them (blocks of
512). The JSON has the machine and torch versions and one record per
configuration; bench/accuracy/data/reduce/ keeps the runs.
"""
import itertools
import sys

import torch

from probe_util import block, peak_above, write_records


def sum_transient(r, n, dtype, layout):
    shape = (r, n) if layout == "2d" else (r // 8, 8, n)
    dims = (0,) if layout == "2d" else (0, 1)
    x = torch.randn(shape, device="cuda", dtype=dtype)
    peak, y = peak_above(lambda: x.sum(dims, keepdim=True))
    out = block(y.numel() * y.element_size())
    del x, y
    return peak - out


def bias_grad_transient(r, n, dtype):
    a = torch.randn(r, 64, device="cuda", dtype=dtype)
    w = torch.randn(n, 64, device="cuda", dtype=dtype)
    b = torch.zeros(n, device="cuda", dtype=dtype, requires_grad=True)
    y = torch.nn.functional.linear(a, w, b)
    g = torch.randn_like(y)
    peak, _ = peak_above(lambda: y.backward(g))
    grad = block(b.grad.numel() * b.grad.element_size())
    del a, w, b, y, g
    return peak - grad


def main():
    out_path = sys.argv[1]
    rows = [8, 64, 256, 1024, 4096, 16384]
    outs = [32, 64, 96, 120, 128, 160, 192, 256, 512, 1024, 4096, 16000]
    dtypes = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
    records = []
    torch.randn(1, device="cuda").sum()  # the context and the first kernels
    for (r, n, (dname, dtype)) in itertools.product(rows, outs, dtypes.items()):
        rec = {"rows": r, "outputs": n, "dtype": dname,
               "input_bytes": block(r * n * torch.tensor([], dtype=dtype).element_size())}
        for layout in ("2d", "3d"):
            rec["transient_" + layout] = sum_transient(r, n, dtype, layout)
        rec["bias_grad_transient"] = bias_grad_transient(r, n, dtype)
        records.append(rec)
        torch.cuda.empty_cache()
    write_records(out_path, records)


if __name__ == "__main__":
    main()
