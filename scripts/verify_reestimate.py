#!/usr/bin/env python3
"""The estimates of a recorded verify sweep made again with the current
memest, set against the sweep's measurements: how a change to the
--kernels verify rules moves each run, without a GPU.

usage: python3 scripts/verify_reestimate.py [--memest build/cli/memest] SWEEP_DIR [SWEEP_DIR ...]

SWEEP_DIR holds a gpu_verify.sh sweep.tsv (bench/accuracy/data/verify/zoo3_h100/b8,
.../b32). Each run's export is taken from bench/accuracy/out/exports-verify,
else bench/accuracy/out/exports (git-ignored; bench/accuracy/export.py makes
them). Prints every run whose estimate moved, with its error before (the
sweep's estimate) and now, then the counts within 0.05% before and now.
"""
import argparse
import csv
import json
import os
import subprocess

EXPORTS = ("bench/accuracy/out/exports-verify", "bench/accuracy/out/exports")


def export_of(name):
    f = name + ".onnx" if "." in name else name + ".legacy-train.onnx"
    for d in EXPORTS:
        if os.path.exists(os.path.join(d, f)):
            return os.path.join(d, f)
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--memest", default="build/cli/memest")
    ap.add_argument("dirs", nargs="+")
    a = ap.parse_args()
    runs = []
    for d in a.dirs:
        for r in csv.DictReader(open(os.path.join(d, "sweep.tsv")), delimiter="\t"):
            path = export_of(r["model"])
            if r["status"] != "ok" or not path:
                continue
            cmd = [a.memest, path, "--batch", r["batch"], "--kernels", "verify", "--format", "json", "--mode", r["mode"]]
            if r["mode"] == "train":
                cmd += ["--optimizer", r["optimizer"]]
            out = subprocess.run(cmd, capture_output=True, text=True)
            if out.returncode == 0:
                now = json.loads(out.stdout)["totals"]["peak_bytes"]
                runs.append((r["model"], r["mode"], r["batch"], int(r["estimate"]), now, int(r["measured"])))
    err = lambda e, m: 100 * (e - m) / m
    for name, mode, b, was, now, meas in runs:
        if was != now:
            print(f"{name:28s} {mode} b{b}: {err(was, meas):+.3f}% -> {err(now, meas):+.3f}%")
    within = lambda i: sum(abs(err(x[i], x[5])) <= 0.05 for x in runs)
    print(f"{len(runs)} runs; within 0.05%: {within(3)} then, {within(4)} now")


if __name__ == "__main__":
    main()
