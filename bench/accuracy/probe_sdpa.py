#!/usr/bin/env python3
"""Why PyTorch picks an SDPA kernel: for one training forward of each case
named, the arguments of every scaled_dot_product_attention call (shapes,
strides, dtypes, the mask's dtype and strides, scale, dropout, enable_gqa)
and what torch.backends.cuda.can_use_{flash,efficient,cudnn}_attention say
with debug on (their warnings name the failing check).

usage: probe_sdpa.py OUT.json CASE:BATCH:SEQ [...]   (on a CUDA GPU)
"""
import json
import sys
import warnings

import torch
import torch.nn.functional as F

import finetune_zoo as fz

calls = []
orig = F.scaled_dot_product_attention


def describe(t):
    return None if t is None else {"shape": list(t.shape), "stride": list(t.stride()), "dtype": str(t.dtype),
                                   "requires_grad": t.requires_grad}


def spy(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False, **kw):
    if len(calls) < 2:
        rec = {"q": describe(q), "k": describe(k), "v": describe(v), "mask": describe(attn_mask),
               "dropout_p": dropout_p, "is_causal": is_causal, "enable_gqa": enable_gqa}
        params = torch.backends.cuda.SDPAParams(q, k, v, attn_mask, dropout_p, is_causal, enable_gqa)
        for name in ("flash", "efficient", "cudnn"):
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                ok = getattr(torch.backends.cuda, f"can_use_{name}_attention")(params, True)
            rec[name] = {"ok": ok, "why": [str(x.message)[:300] for x in w]}
        calls.append(rec)
    return orig(q, k, v, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal, scale=scale,
                enable_gqa=enable_gqa, **kw)


def main():
    F.scaled_dot_product_attention = spy
    torch.nn.functional.scaled_dot_product_attention = spy
    out = {}
    for spec in sys.argv[2:]:
        cid, b, s = spec.split(":")
        case = fz.CASE[cid]
        dtype = torch.bfloat16 if case["dtype"] == "bfloat16" else torch.float32
        calls.clear()
        model = fz.build(case["model"], device="cuda", dtype=dtype).train()
        x = fz.make_input(case["model"], int(b), int(s), device="cuda")
        model(x).float().mean().backward()
        out[spec] = list(calls)
        print(spec, json.dumps(calls)[:1500], flush=True)
        del model
    json.dump(out, open(sys.argv[1], "w"), indent=1)


if __name__ == "__main__":
    sys.exit(main())
