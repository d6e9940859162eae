#!/usr/bin/env python3
"""What an embedding's backward allocates besides the weight's gradient: the
evidence for the Gather rule of layers/index.c.

usage (on a GPU machine): probe_embedding.py OUT.json

For every configuration of a grid (indices n, embedding dim D, vocabulary
V, dtype, and whether the indices repeat: random over the vocabulary, or
every row once in order, as position embeddings read it), an
nn.functional.embedding(ids, W) with W requiring grad, then
out.backward(g) with g made beforehand:

  transient   max_memory_allocated() during backward, above
              memory_allocated() before it, less W.grad's block

Every figure is in bytes as the caching allocator counts them (blocks of
512). The JSON has the machine and torch versions and one record per
configuration; bench/accuracy/data/reduce/ keeps the runs.
"""
import itertools
import sys

import torch

from probe_util import block, peak_above, write_records


def backward_transient(n, d, v, dtype, repeated):
    w = torch.zeros(v, d, device="cuda", dtype=dtype, requires_grad=True)
    if repeated:
        ids = torch.randint(0, v, (n,), device="cuda")
    else:
        ids = torch.arange(n, device="cuda") % v
    out = torch.nn.functional.embedding(ids, w)
    g = torch.randn_like(out)
    peak, _ = peak_above(lambda: out.backward(g))
    grad = block(w.grad.numel() * w.grad.element_size())
    del w, ids, out, g
    return peak - grad


def main():
    out_path = sys.argv[1]
    counts = [512, 1024, 2048, 3072, 3073, 4096, 8192, 16384, 65536]
    dims = [64, 256, 768, 4096]
    vocabs = [2048, 50257]
    dtypes = {"float32": torch.float32, "bfloat16": torch.bfloat16}
    records = []
    torch.randn(1, device="cuda").sum()
    for n, d, v, (dname, dtype), repeated in itertools.product(counts, dims, vocabs, dtypes.items(), (True, False)):
        rec = {"indices": n, "dim": d, "vocab": v, "dtype": dname, "repeated": repeated,
               "transient": backward_transient(n, d, v, dtype, repeated)}
        records.append(rec)
        torch.cuda.empty_cache()
    write_records(out_path, records)


if __name__ == "__main__":
    main()
