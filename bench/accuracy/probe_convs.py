#!/usr/bin/env python3
"""Per-op workspace of every convolution in one model's training step and
inference pass (measure.probe), at several batches: the evidence for the
Conv workspace rules (layers/conv.c).

usage: probe_convs.py OUT.json MODEL BATCH [BATCH ...]
Prints, per conv and phase: input, weight, stride, and the workspace (the
op's transient bytes beyond its outputs) in MiB and as a multiple of the
input.
"""
import json
import math
import sys

import measure
import zoo


def conv_rows(rows, phase):
    out = []
    for r in rows:
        if r[1] not in ("aten.convolution.default", "aten.convolution_backward.default"):
            continue
        fwd = r[1] == "aten.convolution.default"
        x, w = (r[2][0], r[2][1]) if fwd else (r[2][1], r[2][2])
        outs = r[4]
        made = sum(math.prod(o) * 4 for o in outs)
        ws = r[6] - made
        stride = x[2] // outs[0][2] if fwd and len(x) == 4 and outs and len(outs[0]) == 4 and outs[0][2] else None
        out.append({"phase": phase, "op": "forward" if fwd else "backward", "x": x, "w": w, "stride": stride,
                    "workspace": ws, "input": math.prod(x) * 4})
    return out


def main():
    out_path, name, batches = sys.argv[1], sys.argv[2], [int(b) for b in sys.argv[3:]]
    measure.warm_up()
    result = {}
    for b in batches:
        p = measure.probe(zoo.build(name), name, b)
        rows = conv_rows(p["train_adam"], "train") + conv_rows(p["infer"], "infer")
        result[str(b)] = rows
        print(f"== {name} batch {b}")
        for r in rows:
            if r["w"][2:] == [1, 1] and r["stride"] != 1 or r["workspace"] > r["input"] // 2:
                print(f"  {r['phase']:5} {r['op']:8} x={r['x']} w={r['w']} stride={r['stride']} "
                      f"ws={r['workspace'] / 2**20:.2f} MiB ({r['workspace'] / r['input']:.2f}x input)")
    with open(out_path, "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()
