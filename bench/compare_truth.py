#!/usr/bin/env python3
"""Compare memest's simulated peaks with the measured ones in shared/truth.

usage: bench/compare_truth.py [MEMEST] [TRUTH_DIR]
Prints one row per model, export, batch and optimizer, with the relative error.
"""
import json
import subprocess
import sys

memest = sys.argv[1] if len(sys.argv) > 1 else "build/cli/memest"
truth_dir = sys.argv[2] if len(sys.argv) > 2 else "../shared/truth"
truth = json.load(open(f"{truth_dir}/truth.json"))["models"]


def run(path, batch, *args):
    out = subprocess.run([memest, path, "--batch", str(batch), "--format", "json", *args],
                         capture_output=True, text=True)
    if out.returncode:
        return None, out.stderr.strip()
    return json.loads(out.stdout), None


errs = []
for model, m in truth.items():
    for export in ("legacy-train", "dynamo-train"):
        path = f"{truth_dir}/onnx/{model}.{export}.onnx"
        for b in m["batches"]:
            for optim in ("sgd", "momentum", "adam"):
                rep, err = run(path, b, "--optimizer", optim)
                want = m["train"][str(b)][optim]["peak"]
                if rep is None:
                    print(f"{model:14} {export:13} b{b:<4} {optim:9} ERROR {err}")
                    continue
                got = rep["peak"]["bytes"]
                e = (got - want) / want
                errs.append(abs(e))
                print(f"{model:14} {export:13} b{b:<4} {optim:9} est {got/2**20:10.1f} MiB  "
                      f"meas {want/2**20:10.1f} MiB  {e*100:+6.1f}%  at {rep['peak']['phase']}:{rep['peak']['layer'][:30]}")
    for export in ("legacy", "dynamo"):
        path = f"{truth_dir}/onnx/{model}.{export}.onnx"
        for b in m["batches"]:
            rep, err = run(path, b, "--mode", "infer")
            want = m["infer"][str(b)]["peak"]
            if rep is None:
                print(f"{model:14} {export:13} b{b:<4} infer     ERROR {err}")
                continue
            got = rep["peak"]["bytes"]
            e = (got - want) / want
            print(f"{model:14} {export:13} b{b:<4} infer     est {got/2**20:10.1f} MiB  "
                  f"meas {want/2**20:10.1f} MiB  {e*100:+6.1f}%")
if errs:
    print(f"train rows: {len(errs)}, mean |err| {100*sum(errs)/len(errs):.1f}%, max {100*max(errs):.1f}%")
