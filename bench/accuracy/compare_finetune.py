#!/usr/bin/env python3
"""Set memest's training peak beside each fine-tuning row that
measure_finetune.py measured.

usage: compare_finetune.py [--memest PATH] [--markdown] [--only ID,...] [--exports dynamo,dynamo-opt,legacy]
                           MEASURED.json [MEASURED.json ...] ONNX_DIR

MEASURED.json is what measure_finetune.py wrote (data/finetune/*.json); with
several, a (case, batch, seq) measured in more than one file takes the last
file's row, and the largest difference between the files' peaks for such
rows is printed;
ONNX_DIR holds export_finetune.py's <model>.<export>.onnx. For each row and
each export that exists, memest runs as

  memest MODEL --batch B [--dim seq=S] --optimizer adamw|adafactor [--trainable PATTERN]
         [--dtype bfloat16] [--grad-accum 4] [--checkpoint every=1] --format json

(finetune_zoo.memest_args) and its rep["peak"]["bytes"] is set beside the
measured peak. A flag memest rejects, or any other failure, is printed in the
row. A row that ran out of memory on the GPU is shown as OOM, with whether
memest's peak exceeds the GPU's memory. The summary, per export: the median
and largest |error| at batch >= 4 (target 5%) and at batch 1 (target 10%);
--markdown prints the same as tables for the docs.
"""
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import finetune_zoo as fz  # noqa: E402
from memest_run import argument_parser, estimate  # noqa: E402

MIB = 2 ** 20
TARGETS = (("batch >= 4", lambda b: b >= 4, 5.0), ("batch 1", lambda b: b == 1, 10.0),
           ("batch 2-3", lambda b: 1 < b < 4, None))


def case_of(data, cid):
    """The case as measured (its definition was stored with the rows), else finetune_zoo's."""
    c = data.get("cases", {}).get(cid)
    if c and "model" in c:
        return c
    return fz.CASE[cid]


def rows(data, onnx_dir, exports, memest, only):
    """(case id, export, batch, seq, measured bytes or None, status, est bytes or None, note, row)."""
    out = []
    for r in data["rows"]:
        cid = r["case"]
        if only and cid not in only:
            continue
        case = case_of(data, cid)
        b, s = r["batch"], r.get("seq")
        if "peak" in r:
            want, status = r["peak"], "ok"
        elif r.get("oom"):
            want, status = None, "OOM"
        elif "skipped" in r:
            want, status = None, "skipped"
        else:
            want, status = None, "error"
        for e in exports:
            path = os.path.join(onnx_dir, f"{fz.export_name(case['model'], case['dtype'])}.{e}.onnx")
            if not os.path.exists(path):
                continue
            args = fz.memest_args(case, b, s)[2:]  # without --batch: estimate() adds it
            rep, err = estimate(memest, path, b, *args)
            got = rep["peak"]["bytes"] if rep else None
            # errors name the export by its file name, not this machine's path
            note = f"{rep['peak']['phase']}:{rep['peak']['layer']}" if rep else err.replace(path, os.path.basename(path))
            out.append((cid, e, b, s, want, status, got, note, r))
    return out


def merge(files):
    """One measurement: the first file's machine facts, every file's cases, and
    the rows by (case, batch, seq), a later file's replacing an earlier's."""
    data = dict(files[0])
    data["cases"], by_key, diffs = {}, {}, []
    for f in files:
        data["cases"].update(f.get("cases", {}))
        for r in f["rows"]:
            key = (r["case"], r["batch"], r.get("seq"))
            old = by_key.get(key)
            if old is not None and "peak" in old and "peak" in r:
                diffs.append(abs(r["peak"] - old["peak"]) / old["peak"])
            by_key[key] = r
    data["rows"] = list(by_key.values())
    if diffs:
        print(f"{len(diffs)} rows measured in more than one file: largest peak difference "
              f"{100 * max(diffs):.3f}%", file=sys.stderr)
    return data


def rel(got, want):
    return 100.0 * (got - want) / want


def fmt_mib(v):
    return f"{v / MIB:.1f}" if v is not None else "-"


def summarise(rs, total_memory):
    """Lines of the summary, per export."""
    lines = []
    for e in sorted({r[1] for r in rs}):
        sel = [r for r in rs if r[1] == e]
        for label, pick, target in TARGETS:
            errs = sorted(abs(rel(r[6], r[4])) for r in sel if pick(r[2]) and r[4] is not None and r[6] is not None)
            failed = sum(1 for r in sel if pick(r[2]) and r[4] is not None and r[6] is None)
            if not errs and not failed:
                continue
            if errs:
                med, mx = statistics.median(errs), errs[-1]
                within = sum(1 for x in errs if target is None or x <= target)
                verdict = (f" (target {target:.0f}%: median {'within' if med <= target else 'OVER'}, "
                           f"{within}/{len(errs)} rows within)") if target else ""
                lines.append(f"{e:10} {label:10}: n={len(errs)} median |err| {med:.1f}%  max {mx:.1f}%{verdict}"
                             + (f"  memest failed on {failed}" if failed else ""))
            else:
                lines.append(f"{e:10} {label:10}: n=0, memest failed on {failed}")
        ooms = [r for r in sel if r[5] == "OOM"]
        if ooms:
            agree = sum(1 for r in ooms if r[6] is not None and total_memory and r[6] > total_memory)
            lines.append(f"{e:10} OOM rows  : {len(ooms)}; memest's peak above the GPU's {total_memory / 2**30:.1f} GiB "
                         f"in {agree}")
        fits = [r for r in sel if r[4] is not None and r[6] is not None and total_memory and r[6] > total_memory]
        if fits:
            lines.append(f"{e:10} rows that ran but memest says exceed the GPU: {len(fits)}")
    return lines


def main():
    ap = argument_parser(__doc__.splitlines()[0])
    ap.add_argument("--exports", default="dynamo,dynamo-opt,legacy")
    ap.add_argument("inputs", nargs="+", metavar="MEASURED.json ... ONNX_DIR")
    a = ap.parse_args()
    if len(a.inputs) < 2:
        ap.error("needs MEASURED.json and ONNX_DIR")
    a.onnx_dir = a.inputs[-1]
    data = merge([json.load(open(p)) for p in a.inputs[:-1]])
    only = set(filter(None, a.only.split(",")))
    rs = rows(data, a.onnx_dir, a.exports.split(","), a.memest, only)
    total = data.get("total_memory")
    if a.markdown:
        print(f"Measured on {data.get('device', '?')} ({total / 2**30:.1f} GiB), torch {data.get('torch')}, "
              f"transformers {data.get('transformers')}, peft {data.get('peft')}, {data.get('date', '')}; "
              f"peaks are max_memory_allocated() above the baseline (../shared/truth/README.md).\n")
        print("| case | export | batch | seq | measured MiB | memest MiB | error |")
        print("|---|---|---:|---:|---:|---:|---:|")
        for cid, e, b, s, want, status, got, note, r in rs:
            if status != "ok":
                extra = f" (at OOM {fmt_mib(r.get('peak_at_oom'))})" if status == "OOM" else ""
                err = "" if got is not None else f" {note}"
                print(f"| {cid} | {e} | {b} | {s or ''} | {status}{extra} | {fmt_mib(got)}{err} | |")
            elif got is None:
                print(f"| {cid} | {e} | {b} | {s or ''} | {fmt_mib(want)} | error: {note} | |")
            else:
                print(f"| {cid} | {e} | {b} | {s or ''} | {fmt_mib(want)} | {fmt_mib(got)} | {rel(got, want):+.1f}% |")
        print()
        for line in summarise(rs, total):
            print(f"- {line}")
        return 0
    for cid, e, b, s, want, status, got, note, r in rs:
        head = f"{cid:34} {e:10} b{b:<2} s{s or '-':<5}"
        if status != "ok":
            extra = f" (peak at OOM {fmt_mib(r.get('peak_at_oom'))} MiB)" if status == "OOM" else ""
            verdict = ""
            if got is not None and total:
                verdict = "  memest: exceeds the GPU" if got > total else "  memest: fits the GPU"
            print(f"{head} meas {status}{extra}  est {fmt_mib(got)} MiB{verdict}" + ("" if got else f"  {note}"))
        elif got is None:
            print(f"{head} meas {fmt_mib(want):>9} MiB  ERROR {note}")
        else:
            print(f"{head} meas {fmt_mib(want):>9} MiB  est {fmt_mib(got):>9} MiB  {rel(got, want):+6.1f}%  at {note[:40]}")
    for line in summarise(rs, total):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
