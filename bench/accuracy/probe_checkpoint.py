#!/usr/bin/env python3
"""Per-op memory of one checkpointed training step, to locate the peak that
memest's --checkpoint model misses (docs/accuracy.md).

usage: probe_checkpoint.py OUT.json MODEL BATCH OPT [every=N|PREFIX ...]

Builds MODEL (zoo.py), checkpoints it as measure_checkpoint.py does for the
given spec ("none" for none), runs one step to create the optimizer state,
then records every aten op of the next step with measure.OpProbe (phase,
op, shapes, bytes allocated before, transient above that, left after).
Prints the ten largest moments (before + transient) with their op.
"""
import copy
import json
import sys

import torch

import measure
import measure_checkpoint as mc
import zoo


def main():
    out, name, batch, opt_kind = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    specs = sys.argv[5:] or ["none"]
    measure.warm_up()
    result = {}
    for spec in specs:
        cpu_model = zoo.build(name)
        segs = None
        for ck, seg in mc.CASES[name]:
            label = f"every={ck['every']}" if "every" in ck else ",".join(ck["prefixes"])
            if label == spec:
                segs = seg(cpu_model)
        measure.settle()
        base = torch.cuda.memory_allocated()
        model = copy.deepcopy(cpu_model).cuda().train()
        if segs:
            mc.apply_segments(model, segs)
        opt = measure.optimizer(opt_kind, model.parameters())
        x = zoo.make_input(name, batch).cuda()
        y = measure.train_step(model, opt, x)  # the optimizer state exists; y lives until rebound
        rows = [r[:5] + [r[5] - base, r[6], r[7]] for r in measure.probed_step(model, opt, x)]
        result[spec] = rows
        top = sorted(range(len(rows)), key=lambda i: -(rows[i][5] + rows[i][6]))[:10]
        print(f"== {name} b{batch} {opt_kind} {spec}: {len(rows)} ops")
        for i in sorted(top):
            r = rows[i]
            print(f"  #{i:5d} {r[0]:8} {r[1][:40]:40} {str(r[2])[:60]:60} before {r[5] / 2**20:8.1f} "
                  f"+{r[6] / 2**20:7.1f} MiB")
        del y, x, opt, model
    with open(out, "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()
