#!/usr/bin/env python3
"""Every rank of measure_dist.py's measurements against memest --rank R.

usage: compare_ranks.py [--memest build/cli/memest] [--markdown] MEASURED.json [MEASURED.json ...] EXPORTS_DIR

compare_dist.py sets the largest rank of each configuration against memest's
per-GPU figures; this sets every rank against the figures memest gives for
that rank (--rank R: under zero1 each rank keeps its own partition of the
optimizer state; the other strategies' GPUs are alike). The error is to
memest's range between the two ends of DDP's first-bucket race (0 inside
it; compare_dist.py's "to range"), one summary line per strategy and world
size, then every rank beyond 5%.
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "accuracy"))
import memest_run  # noqa: E402
from compare_dist import export_of, strategy_args  # noqa: E402


def memest_range(memest, onnx, batch, args, cache):
    """(released end, held end) of memest's peak, or None; cached by arguments."""
    key = (onnx, batch, tuple(args))
    if key not in cache:
        rep, err = memest_run.estimate(memest, onnx, batch, *args)
        if err:
            cache[key] = None
        else:
            par = rep.get("parallel") or {}
            peak = rep["peak"]["bytes"]
            cache[key] = (par.get("peak_first_bucket_released_bytes") or peak,
                          par.get("peak_first_bucket_held_bytes") or peak)
    return cache[key]


def main():
    ap = memest_run.argument_parser(__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    exports, files = a.files[-1], a.files[:-1]
    cache, rows = {}, []
    for path in files:
        d = json.load(open(path))
        world, group = d["world_size"], d["shard_group"]
        for r in d["runs"]:
            if a.only and r["model"] not in a.only.split(","):
                continue
            onnx, _ = export_of(exports, r["model"])
            args = strategy_args(r["strategy"], world, group)
            if r["strategy"] == "zero1":
                args += ["--rank", str(r["rank"])]
            span = memest_range(a.memest, onnx, r["batch"], args, cache) if onnx else None
            row = {"model": r["model"], "strategy": r["strategy"], "world_size": world, "batch": r["batch"],
                   "rank": r["rank"], "measured": r["peak"]}
            if span:
                nearest = min(max(r["peak"], span[0]), span[1])
                row["range"] = span
                row["error_pct"] = 100.0 * (nearest - r["peak"]) / r["peak"]
            rows.append(row)
    bullet = "- " if a.markdown else ""
    groups = {}
    for r in rows:
        groups.setdefault((r["world_size"], r["strategy"]), []).append(r)
    for (world, strategy), rs in sorted(groups.items()):
        errs = sorted(abs(r["error_pct"]) for r in rs if "error_pct" in r)
        if not errs:
            continue
        print(f"{bullet}{strategy} on {world} GPU{'s' if world > 1 else ''}: {len(errs)} ranks, median |error| "
              f"{errs[len(errs) // 2]:.1f}%, worst {errs[-1]:.1f}%, within 5%: {sum(e <= 5 for e in errs)}")
    beyond = [r for r in rows if abs(r.get("error_pct", 0)) > 5]
    mib = 2 ** 20
    errs = [abs(r["error_pct"]) for r in rows if "error_pct" in r]
    print(f"{bullet}all: {len(errs)} ranks, within 5%: {sum(e <= 5 for e in errs)}"
          + (":" if beyond else ""))
    for r in beyond:
        print(f"{'  - ' if a.markdown else '    '}{r['model']} {r['strategy']} on {r['world_size']} at batch {r['batch']}, "
              f"rank {r['rank']}: measured {r['measured'] / mib:.1f} MiB, memest {r['range'][0] / mib:.1f}-"
              f"{r['range'][1] / mib:.1f} MiB ({r['error_pct']:+.1f}%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
