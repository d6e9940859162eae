#!/usr/bin/env python3
"""Per-op evidence for the fine-tuning misses: for a few cases of
finetune_zoo.py, one steady-state training step on a CUDA GPU under
measure.OpProbe (every aten op: phase, op, input and output shapes, bytes
allocated before it, its transient, bytes it left), after one plain step so
the optimizer state exists. The SDPA kernel PyTorch picked shows as the aten
op (_scaled_dot_product_efficient_attention, _flash_attention, or the math
path's bmm and softmax).

usage: probe_finetune.py OUT.json CASE:BATCH:SEQ [CASE:BATCH:SEQ ...]
"""
import gc
import json
import sys

import torch

import finetune_zoo as fz
from measure import probed_step


def probe(spec):
    cid, batch, seq = spec.split(":")
    case = fz.CASE[cid]
    batch, seq = int(batch), (int(seq) if seq != "-" else None)
    dtype = torch.bfloat16 if case["dtype"] == "bfloat16" else torch.float32
    gc.collect()
    torch.cuda.empty_cache()
    model = fz.build(case["model"], device="cuda", dtype=dtype, checkpoint=case["checkpoint"]).train()
    fz.set_trainable(model, case)
    opt = fz.make_optimizer(case, [p for p in model.parameters() if p.requires_grad])
    x = fz.make_input(case["model"], batch, seq, device="cuda")
    opt.zero_grad(set_to_none=True)
    model(x).float().mean().backward()
    opt.step()
    torch.cuda.synchronize()
    rows = probed_step(model, opt, x)
    sdpa = sorted({r[1] for r in rows if "attention" in r[1] or "softmax" in r[1]})
    print(spec, len(rows), "ops;", sdpa, flush=True)
    del model, opt, x
    return {"case": cid, "batch": batch, "seq": seq, "sdpa_ops": sdpa, "rows": rows}


def main():
    out = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "probes": []}
    for spec in sys.argv[2:]:
        try:
            out["probes"].append(probe(spec))
        except Exception as e:  # keep the others
            print(spec, "FAILED", repr(e)[:300], flush=True)
            out["probes"].append({"spec": spec, "error": repr(e)[:300]})
        json.dump(out, open(sys.argv[1], "w"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
