#!/usr/bin/env python3
"""amp_table.py: the markdown table of docs/verify.md's "Mixed precision
results" from scripts/gpu_half.sh sweeps run with DTYPES holding amp-bf16 and
amp-fp16 (bench/accuracy/data/verify/amp_h200/).

usage: scripts/amp_table.py HALF.tsv [HALF.tsv ...] [--outputs OUTPUTS.tsv ...]
A later file's row replaces an earlier one's for the same model, dtype, mode
and batch. One row per model and batch: the peak's error (estimate against
measured) under --amp bf16 and fp16, train (Adam) and infer, and the
largest difference of the bf16 / fp16 inference outputs from the float32
run's over their largest magnitude."""
import argparse
import csv


def err(row):
    return row["error"] if row and row["error"] != "-" else "-"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("half", nargs="+")
    ap.add_argument("--outputs", nargs="*", default=[])
    a = ap.parse_args()
    runs, order = {}, []
    for f in a.half:
        for r in csv.DictReader(open(f), delimiter="\t"):
            if not r["dtype"].startswith("amp-"):
                continue
            key = (r["model"], r["batch"])
            if key not in order:
                order.append(key)
            runs[(r["model"], r["batch"], r["dtype"], r["mode"])] = r
    outs = {}
    for f in a.outputs:
        for r in csv.DictReader(open(f), delimiter="\t"):
            outs[(r["model"], r["dtype"])] = "%.2g%%" % (100 * float(r["rel"])) if r["rel"] else "-"
    print("| model | batch | train bf16 | train fp16 | infer bf16 | infer fp16 | outputs bf16 / fp16 |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    errs = []
    for model, batch in order:
        cells = []
        for mode in ("train-adam", "infer"):
            for dt in ("amp-bf16", "amp-fp16"):
                r = runs.get((model, batch, dt, mode))
                cells.append(err(r))
                if r and r["error"] != "-":
                    errs.append(abs(float(r["error"].rstrip("%"))))
        o = "-"
        if batch == "8":
            o = "%s / %s" % (outs.get((model, "amp-bf16"), "-"), outs.get((model, "amp-fp16"), "-"))
        print("| %s | %s | %s | %s |" % (model, batch, " | ".join(cells), o))
    errs.sort()
    print()
    print("- %d runs: within 0.05%%: %d, within 0.5%%: %d, largest |error| %.4f%%" %
          (len(errs), sum(e <= 0.05 for e in errs), sum(e <= 0.5 for e in errs), errs[-1] if errs else 0))


if __name__ == "__main__":
    main()
