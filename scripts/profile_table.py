#!/usr/bin/env python3
"""profile_table.py: where verify's measured step goes, from the
profile.jsonl that scripts/gpu_profile.sh writes (MEMEST_VERIFY_PROFILE).

    python3 scripts/profile_table.py DIR/profile.jsonl [--top N]

Per model: the profiled step's total and its N largest (op, phase) rows with
their share. Then the same rows summed over every model."""
import argparse
import collections
import json
import os


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("profile")
    ap.add_argument("--top", type=int, default=6)
    a = ap.parse_args()
    overall = collections.Counter()
    with open(a.profile) as f:
        runs = [json.loads(line) for line in f if line.strip()]
    for run in runs:
        rows = sorted(run["rows"], key=lambda r: -r[3])
        total = sum(r[3] for r in rows)
        name = os.path.basename(run["model"]).replace(".onnx", "")
        print(f"{name} batch {run['batch']}: {total:.1f} ms profiled")
        for op, phase, calls, ms in rows[: a.top]:
            print(f"    {op:24s} {phase:9s} {calls:5d} calls {ms:8.2f} ms {100 * ms / total:5.1f}%")
        for op, phase, calls, ms in rows:
            overall[(op, phase)] += ms
    total = sum(overall.values())
    print(f"all runs: {total:.1f} ms")
    for (op, phase), ms in overall.most_common(3 * a.top):
        print(f"    {op:24s} {phase:9s} {ms:9.2f} ms {100 * ms / total:5.1f}%")


if __name__ == "__main__":
    main()
