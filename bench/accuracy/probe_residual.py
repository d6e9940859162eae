#!/usr/bin/env python3
"""What autograd allocates at a residual Add's backward: whether the two
operands' gradients are one tensor or two (derivatives.yaml: add's "self:
grad", "other: maybe_multiply(grad, alpha)"), and how the second gradient
that reaches the residual input is summed into the first (InputBuffer).
The evidence for the Add rule of libestimate/simulate.c (grad_of_input) and
of verify's binary_bwd.

usage (on a GPU machine): probe_residual.py OUT.json

For each configuration (rows B, width D, float32 or bfloat16, and the
block: y = f(x) + x with f a bias-free Linear, or f = GELU(Linear), or the
Add's operands swapped), x = x0 * 1 (not a leaf, as an activation is),
then a bias-free Linear after the block, z = y W2, and z.sum().backward():
the Add's incoming gradient is then dz W2^T, a tensor of its own, as
inside a network (the sum's gradient alone would be an expanded scalar). Recorded with torch.cuda.memory._record_memory_history:

  events   every allocation and free during backward: (action, bytes),
           in order, so that the Add's and the sum's blocks can be named
  peak     max_memory_allocated() during backward above memory_allocated()
           before it
  act      the bytes of one B x D activation, as the allocator counts them

bench/accuracy/data/reduce/ keeps the runs.
"""
import sys

import torch

from probe_util import block, write_records


def events_of(snapshot, since):
    out = []
    for trace in snapshot["device_traces"]:
        for e in trace[since:]:
            if e["action"] in ("alloc", "free_requested"):
                out.append((e["action"], e["size"]))
    return out


def run(rows, width, dtype, block_kind):
    torch.manual_seed(0)
    lin = torch.nn.Linear(width, width, bias=False, device="cuda", dtype=dtype)
    x0 = torch.randn(rows, width, device="cuda", dtype=dtype, requires_grad=True)
    x = x0 * 1
    f = lin(x) if block_kind != "gelu" else torch.nn.functional.gelu(lin(x))
    y = x + f if block_kind == "swapped" else f + x
    lin2 = torch.nn.Linear(width, width, bias=False, device="cuda", dtype=dtype)
    loss = lin2(y).sum()
    torch.cuda.synchronize()
    torch.cuda.memory._record_memory_history(max_entries=100000)
    before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    start = len(torch.cuda.memory._snapshot()["device_traces"][0])
    loss.backward()
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated() - before
    snap = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    act = block(rows * width * torch.tensor([], dtype=dtype).element_size())
    return {"rows": rows, "width": width, "dtype": str(dtype), "block": block_kind, "act": act,
            "weight": block(width * width * torch.tensor([], dtype=dtype).element_size()),
            "peak": peak, "events": events_of(snap, start)}


def main():
    records = []
    for dtype in (torch.float32, torch.bfloat16):
        for kind in ("linear", "gelu", "swapped"):
            for rows, width in ((4096, 1024), (1024, 4096)):
                r = run(rows, width, dtype, kind)
                acts = [s // r["act"] if s % r["act"] == 0 else s / r["act"] for a, s in r["events"] if a == "alloc"]
                print(f"{kind:8s} {str(dtype):15s} {rows}x{width}: peak {r['peak'] / r['act']:.2f} activations; "
                      f"allocations in activations: {acts}")
                records.append(r)
    write_records(sys.argv[1] if len(sys.argv) > 1 else "probe_residual.json", records)


if __name__ == "__main__":
    main()
