#!/usr/bin/env python3
"""Prints a gpu_verify.sh sweep (DIR/sweep.tsv) as the markdown table of
docs/verify.md: model, mode, optimizer, batch, estimate and measured MiB,
error, step ms. Rows that did not run say why.

usage: scripts/verify_table.py DIR
"""
import csv
import sys

MIB = 1 << 20


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: verify_table.py DIR")
    with open(f"{sys.argv[1]}/sweep.tsv", newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    print("| model | mode | optimizer | batch | estimate MiB | measured MiB | error | step ms |")
    print("|---|---|---|---:|---:|---:|---:|---:|")
    for r in rows:
        if r["status"] != "ok":
            why = r["status"].removeprefix("error: ").split(": ", 2)[-1]
            print(f"| {r['model']} | {r['mode']} | {r['optimizer']} | {r['batch']} | | | {why} | |")
            continue
        est, meas = int(r["estimate"]), int(r["measured"])
        print(f"| {r['model']} | {r['mode']} | {r['optimizer']} | {r['batch']} | {est / MIB:.2f} | {meas / MIB:.2f} "
              f"| {r['error']} | {float(r['step_ms']):.2f} |")


if __name__ == "__main__":
    main()
