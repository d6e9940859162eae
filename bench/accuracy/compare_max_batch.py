#!/usr/bin/env python3
"""memest's --max-batch against the true largest batch (max_batch.py's runs).

usage: compare_max_batch.py [--memest PATH] [--markdown] MAX_BATCH.json GPU ONNX_DIR

GPU is the --gpu name of the machine the run measured (H100-80GB, H200).
Each model's dynamo-train export (else its legacy-train one) is estimated
with `memest EXPORT --max-batch --gpu GPU` (the default reserve), and set
beside the largest batch that ran: error = (memest - true) / true. A batch
above the true largest is "fails": PyTorch runs out of memory there.
"""
import argparse
import json
import os
import subprocess
import sys


HERE = os.path.dirname(os.path.abspath(__file__))


def export_for(onnx_dir, model):
    for kind in ("dynamo-train", "legacy-train"):
        path = os.path.join(onnx_dir, f"{model}.{kind}.onnx")
        if os.path.exists(path):
            return path, kind
    return None, None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memest", default=os.path.join(HERE, "..", "..", "build", "cli", "memest"))
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("measured")
    ap.add_argument("gpu")
    ap.add_argument("onnx_dir")
    a = ap.parse_args()
    d = json.load(open(a.measured))
    rows, errors = [], []
    for model, m in d["models"].items():
        if "error" in m or m.get("unfinished"):
            continue
        path, kind = export_for(a.onnx_dir, model)
        if not path:
            continue
        out = subprocess.run([a.memest, path, "--max-batch", "--gpu", a.gpu, "--format", "json"], capture_output=True,
                             text=True)
        if out.returncode:
            rows.append([model, kind, m["largest"], "error", "-", out.stderr.strip()[:120]])
            continue
        got = json.loads(out.stdout)["max_batch"]["batch"]
        err = 100.0 * (got - m["largest"]) / m["largest"]
        errors.append(err)
        rows.append([model, kind, m["largest"], got, f"{err:+.2f}%", "fails" if got > m["largest"] else "runs"])
    head = ["model", "export", "true largest", "memest", "error", "memest's batch"]
    if a.markdown:
        print(f"Measured: `{os.path.relpath(a.measured, os.path.join(HERE, '..', '..'))}` ({d['device']}, "
              f"torch {d['torch']}, {d['date']}; CUDA's total {d['total_bytes'] / 2**30:.2f} GiB); estimated: the "
              f"current memest with `--gpu {a.gpu}` and the default reserve.")
        print()
        print("| " + " | ".join(head) + " |")
        print("|---|---|---:|---:|---:|---|")
        for r in rows:
            print("| " + " | ".join(str(c) for c in r) + " |")
        print()
    else:
        for r in rows:
            print("  ".join(str(c) for c in r))
    if errors:
        fails = sum(1 for r in rows if r[-1] == "fails")
        s = sorted(abs(e) for e in errors)
        print(f"- {len(errors)} models: {fails} named a batch that fails; |error| median {s[len(s) // 2]:.2f}%, "
              f"largest {s[-1]:.2f}%; within 2% and safe: "
              f"{sum(1 for r, e in zip([r for r in rows if r[3] != 'error'], errors) if r[-1] == 'runs' and abs(e) <= 2)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
