#!/usr/bin/env python3
"""Prints a gpu_verify.sh sweep (DIR/sweep.tsv) as the markdown table of
docs/verify.md: model, mode, optimizer, batch, estimate and measured MiB,
error, step ms. Rows that did not run say why. With --torch FILE (the JSON
lines of bench/accuracy/time_step.py, same GPU), training rows of the models
it timed also get PyTorch's eager step and the ratio of verify's to it.
--summary prints only the counts; --timed-only only the rows with a
PyTorch step. With --steps FILE (the steps.tsv of scripts/gpu_profile.sh:
the median of several runs' steps), training rows take their step time
from it instead of the sweep's single run.

usage: scripts/verify_table.py [--torch FILE [--timed-only] [--steps TSV]] [--summary] DIR
"""
import argparse
import csv
import json

MIB = 1 << 20


def torch_steps(path):
    """(model, batch) -> PyTorch's median step in ms."""
    steps = {}
    for line in open(path):
        d = json.loads(line)
        if "median_ms" in d:
            steps[(d["model"], str(d["batch"]))] = d["median_ms"]
    return steps


def profile_steps(path):
    """(model, batch) -> verify's median step in ms (gpu_profile.sh's steps.tsv:
    model, batch, median ms, error %, each run's ms)."""
    steps = {}
    for line in open(path):
        f = line.rstrip("\n").split("\t")
        if len(f) >= 3 and f[2] != "failed":
            steps[(f[0].removesuffix(".legacy-train"), f[1])] = float(f[2])
    return steps


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir")
    ap.add_argument("--torch")
    ap.add_argument("--summary", action="store_true")
    ap.add_argument("--timed-only", action="store_true")
    ap.add_argument("--steps")
    a = ap.parse_args()
    medians = profile_steps(a.steps) if a.steps else {}
    with open(f"{a.dir}/sweep.tsv", newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    steps = torch_steps(a.torch) if a.torch else {}
    ok = [r for r in rows if r["status"] == "ok"]
    errs = sorted(abs(float(r["error"].rstrip("%"))) for r in ok if r["error"])
    if a.summary:
        print(f"{len(ok)} runs of {len({r['model'] for r in ok})} exports ran ({len(rows) - len(ok)} did not): "
              f"{sum(e <= 0.05 for e in errs)} within 0.05%, {sum(e <= 0.3 for e in errs)} within 0.3%, "
              f"{sum(e <= 1.3 for e in errs)} within 1.3%, {sum(e <= 5 for e in errs)} within 5%, "
              f"the largest {errs[-1]:.2f}%")
        return
    torch_cols = " PyTorch ms | ratio |" if steps else ""
    print("| model | mode | optimizer | batch | estimate MiB | measured MiB | error | step ms |" + torch_cols)
    print("|---|---|---|---:|---:|---:|---:|---:|" + ("---:|---:|" if steps else ""))
    if a.timed_only:
        rows = [r for r in rows if r["mode"] == "train" and (r["model"], r["batch"]) in steps]
    for r in rows:
        if r["status"] != "ok":
            why = r["status"].removeprefix("error: ").split(": ", 2)[-1]
            print(f"| {r['model']} | {r['mode']} | {r['optimizer']} | {r['batch']} | | | {why} | |" +
                  (" | |" if steps else ""))
            continue
        est, meas = int(r["estimate"]), int(r["measured"])
        ms = float(r["step_ms"])
        if r["mode"] == "train":
            ms = medians.get((r["model"], r["batch"]), ms)
        line = (f"| {r['model']} | {r['mode']} | {r['optimizer']} | {r['batch']} | {est / MIB:.2f} | {meas / MIB:.2f} "
                f"| {r['error']} | {ms:.2f} |")
        if steps:
            t = steps.get((r["model"], r["batch"])) if r["mode"] == "train" else None
            line += f" {t:.2f} | {ms / t:.2f}x |" if t else " | |"
        print(line)


if __name__ == "__main__":
    main()
