#!/usr/bin/env python3
"""memest --world-size N --strategy S against measure_dist.py's measurements.

usage: compare_dist.py [--memest build/cli/memest] [--markdown] [--json OUT]
                       MEASURED.json [MEASURED.json ...] EXPORTS_DIR

For every measured (model, strategy, batch), the largest peak over the ranks
against memest's per-GPU peak, on the model's TorchScript training export
(EXPORTS_DIR/<model>.legacy-train.onnx), else its dynamo one. "ddp-view" is
--strategy ddp --grad-as-bucket-view; "tp" is --tp over every GPU; "none" is
the one-GPU estimate. The reserved columns set the largest rank's
max_memory_reserved beside memest's totals.reserved_bytes.

Under ddp, ddp-view and zero1 the peak is a race: DDP's first-iteration
bucket of every gradient outlives the second iteration's rebuild or not
(docs/distributed.md, "DDP's first bucket"), and memest gives the peak at
both ends (parallel.peak_first_bucket_released_bytes and _held_bytes). The
"range" column is that span; "to range" is 0 where the measured peak lies
in it, else the error to its nearer end. Elsewhere the range is memest's
one peak.
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "accuracy"))
import memest_run  # noqa: E402


def export_of(exports, model):
    for kind in ("legacy-train", "dynamo-train"):
        path = os.path.join(exports, f"{model}.{kind}.onnx")
        if os.path.exists(path):
            return path, kind
    return None, None


def strategy_args(strategy, world, shard_group):
    if strategy == "none":
        return []
    args = ["--world-size", str(world)]
    if strategy == "ddp-view":
        return args + ["--strategy", "ddp", "--grad-as-bucket-view"]
    if strategy == "hsdp":
        return args + ["--strategy", "hsdp", "--shard-group", str(shard_group)]
    if strategy == "tp":
        return args + ["--tp", str(world)]
    return args + ["--strategy", strategy]


def main():
    ap = memest_run.argument_parser(__doc__.splitlines()[0])
    ap.add_argument("--json")
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    exports, files = a.files[-1], a.files[:-1]
    rows = []
    for path in files:
        d = json.load(open(path))
        world, group = d["world_size"], d["shard_group"]
        worst, reserved = {}, {}
        for r in d["runs"]:
            key = (r["model"], r["strategy"], r["batch"])
            if key not in worst or r["peak"] > worst[key]["peak"]:
                worst[key] = r
            reserved[key] = max(reserved.get(key, 0), r["reserved"])
        for (model, strategy, batch), r in worst.items():
            if a.only and model not in a.only.split(","):
                continue
            onnx, kind = export_of(exports, model)
            row = {"model": model, "export": kind, "strategy": strategy, "world_size": world, "batch": batch,
                   "measured": r["peak"], "reserved": reserved[(model, strategy, batch)], "gpu": d["machine"]["gpus"][0],
                   "torch": d["versions"]["torch"], "source": os.path.basename(path)}
            if onnx is None:
                row["error"] = "no export"
            else:
                rep, err = memest_run.estimate(a.memest, onnx, batch, *strategy_args(strategy, world, group))
                if err:
                    row["error"] = err
                else:
                    row["estimate"] = rep["peak"]["bytes"]
                    par = rep.get("parallel") or {}
                    low = par.get("peak_first_bucket_released_bytes") or row["estimate"]
                    high = par.get("peak_first_bucket_held_bytes") or row["estimate"]
                    row["estimate_range"] = [low, high]
                    nearest = min(max(row["measured"], low), high)
                    row["range_error_pct"] = 100.0 * (nearest - row["measured"]) / row["measured"]
                    row["estimate_reserved"] = rep["totals"]["reserved_bytes"]
                    row["error_pct"] = 100.0 * (row["estimate"] - row["measured"]) / row["measured"]
            rows.append(row)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)
    mib = 2 ** 20
    if a.markdown:
        sources = sorted({os.path.relpath(os.path.dirname(os.path.abspath(p)), ROOT) for p in files})
        d = json.load(open(files[0]))
        print(f"Measured: `{'`, `'.join(sources)}` ({d['machine']['gpus'][0]}, torch {d['versions']['torch']}, "
              f"NCCL {d['versions']['nccl']}, {d['date']}; {'one job per configuration' if d.get('fresh') else 'one job'}"
              f"); estimated: the current memest on `{os.path.relpath(os.path.abspath(exports), ROOT)}`.")
        print()
        print("| model | export | strategy | GPUs | batch | measured | memest | error | race range | to range | reserved "
              "| memest reserved | error |")
        print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        est = f"{r['estimate'] / mib:.1f} MiB" if "estimate" in r else r.get("error", "")
        err = f"{r['error_pct']:+.1f}%" if "error_pct" in r else "-"
        span = r.get("estimate_range")
        span = f"{span[0] / mib:.1f}-{span[1] / mib:.1f} MiB" if span and span[0] != span[1] else "-"
        to_range = f"{r['range_error_pct']:+.1f}%" if "range_error_pct" in r else "-"
        if span != "-" and r.get("range_error_pct") == 0:
            to_range = "in it"
        res = f"{r['estimate_reserved'] / mib:.0f} MiB" if "estimate_reserved" in r else "-"
        res_err = (f"{100.0 * (r['estimate_reserved'] - r['reserved']) / r['reserved']:+.1f}%"
                   if "estimate_reserved" in r and r["reserved"] else "-")
        if a.markdown:
            print(f"| {r['model']} | {r['export']} | {r['strategy']} | {r['world_size']} | {r['batch']} | "
                  f"{r['measured'] / mib:.1f} MiB | {est} | {err} | {span} | {to_range} | {r['reserved'] / mib:.0f} MiB | "
                  f"{res} | {res_err} |")
        else:
            print(f"{r['model']:12} {r['strategy']:13} w{r['world_size']} b{r['batch']:<3} "
                  f"measured {r['measured'] / mib:8.1f} MiB  memest {est:>14}  {err}")
    errs = sorted(abs(r["error_pct"]) for r in rows if "error_pct" in r)
    if errs:
        print()
        print(f"{'- ' if a.markdown else ''}{len(errs)} rows: median |error| {errs[len(errs) // 2]:.1f}%, "
              f"worst {errs[-1]:.1f}%, within 5%: {sum(e <= 5 for e in errs)}")
        spans = sorted(abs(r["range_error_pct"]) for r in rows if "range_error_pct" in r)
        print(f"{'- ' if a.markdown else ''}to memest's range (DDP's first bucket held or released): "
              f"worst {spans[-1]:.1f}%, in the range: {sum(e == 0 for e in spans)}, "
              f"within 5%: {sum(e <= 5 for e in spans)}")
        res = sorted(abs(100.0 * (r["estimate_reserved"] - r["reserved"]) / r["reserved"]) for r in rows
                     if "estimate_reserved" in r and r["reserved"])
        if res:
            print(f"{'- ' if a.markdown else ''}reserved (the largest rank's max_memory_reserved): median |error| "
                  f"{res[len(res) // 2]:.1f}%, worst {res[-1]:.1f}%, within 5%: {sum(e <= 5 for e in res)}, "
                  f"within 10%: {sum(e <= 10 for e in res)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
