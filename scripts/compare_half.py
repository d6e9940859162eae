#!/usr/bin/env python3
"""compare_half.py: the graph outputs of two `memest verify --dump-outputs`
runs of one model, a run in another dtype (--dtype bfloat16 / float16)
against the float32 reference: per float output, the largest absolute
difference over the reference's largest magnitude, and whether the two are
bit-identical (a float32 run against an older build of the executor).

usage: scripts/compare_half.py REF_DIR RUN_DIR [--rtol R] [--identical]
prints one TSV line per output: name, shape, max_abs_diff, ref_max_abs,
rel, identical, ok; exits 1 when an output is missing, differs in shape, or
rel > R (default 0.05), or with --identical when an output is not
bit-identical.  Reads the raw files with the standard library alone
(no numpy on the GPU machine).
"""
import argparse
import array
import json
import math
import os
import sys


def load(d):
    with open(os.path.join(d, "outputs.json")) as f:
        meta = json.load(f)
    outs = {}
    for o in meta["outputs"]:
        path = os.path.join(d, o["file"])
        with open(path, "rb") as f:
            raw = f.read()
        outs[o["name"]] = (o["dtype"], o["shape"], raw)
    return outs


def floats(raw):
    a = array.array("f")
    a.frombytes(raw)
    if sys.byteorder != "little":
        a.byteswap()
    return a


def compare(ref, run, rtol, identical_only):
    ok_all = True
    for name, (dt, shape, raw) in ref.items():
        if name not in run:
            print(f"{name}\t-\t-\t-\t-\t-\tmissing")
            ok_all = False
            continue
        dt2, shape2, raw2 = run[name]
        shp = "x".join(str(s) for s in shape)
        if shape != shape2 or dt != dt2:
            print(f"{name}\t{shp}\t-\t-\t-\t-\tshape or dtype differs")
            ok_all = False
            continue
        identical = raw == raw2
        if dt != "float32":
            print(f"{name}\t{shp}\t-\t-\t-\t{int(identical)}\t{'ok' if identical else 'differs'}")
            ok_all &= identical
            continue
        a, b = floats(raw2), floats(raw)
        diff = max((abs(x - y) for x, y in zip(a, b)), default=0.0)
        mag = max((abs(y) for y in b), default=0.0)
        finite = all(math.isfinite(x) for x in a)
        rel = diff / mag if mag > 0 else diff
        ok = identical if identical_only else finite and rel <= rtol
        print(f"{name}\t{shp}\t{diff:.4g}\t{mag:.4g}\t{rel:.4g}\t{int(identical)}\t{'ok' if ok else 'FAIL'}")
        ok_all &= ok
    return ok_all


def main():
    p = argparse.ArgumentParser()
    p.add_argument("ref")
    p.add_argument("run")
    p.add_argument("--rtol", type=float, default=0.05)
    p.add_argument("--identical", action="store_true", help="fail unless every output is bit-identical")
    a = p.parse_args()
    sys.exit(0 if compare(load(a.ref), load(a.run), a.rtol, a.identical) else 1)


if __name__ == "__main__":
    main()
