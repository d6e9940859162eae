#!/usr/bin/env python3
"""Compare memest --checkpoint training peaks with those measure_checkpoint.py
measured under torch.utils.checkpoint.

usage: compare_checkpoint.py [--memest PATH] [--markdown] [--only MODEL,...] CHECKPOINT.json ONNX_DIR

CHECKPOINT.json is what measure_checkpoint.py wrote; ONNX_DIR holds
<model>.legacy-train.onnx and <model>.dynamo-train.onnx. For every measured
case and export: memest PATH --batch B --optimizer OPT --format json plus the
case's memest_args (--checkpoint every=N or --checkpoint PREFIX,...). Rows
without checkpointing are the reference. "saving" is the peak without
checkpointing minus the peak with it (same model, export, batch, optimizer),
measured and estimated. A case memest failed on shows memest's error.
"""
import json
import os

from memest_run import add_inputs, argument_parser, estimate

EXPORTS = ("legacy-train", "dynamo-train")
MIB = 1 << 20


def peak_of(memest, path, batch, optimizer, extra):
    rep, err = estimate(memest, path, batch, "--optimizer", optimizer, *extra)
    if rep is None:
        return None, err
    try:
        return rep["peak"]["bytes"], None
    except (KeyError, TypeError) as e:
        return None, f"bad JSON from memest: {e!r}"[:120]


def label(case):
    """The checkpoint spec of a case ("none" for the reference)."""
    args = case.get("memest_args", [])
    return args[args.index("--checkpoint") + 1] if "--checkpoint" in args else "none"


def opt_label(case):
    """The optimizer, with the autocast dtype of an --amp case."""
    return case["optimizer"] + (f" {case['amp']}" if case.get("amp") else "")


def main():
    ap = argument_parser(__doc__.splitlines()[0])
    add_inputs(ap)
    a = ap.parse_args()
    data = json.load(open(a.measured))
    cases = data["cases"]
    if a.only:
        cases = [c for c in cases if c["model"] in a.only.split(",")]
    rows = []  # model, export, batch, optimizer, checkpoint, got, want, err
    for c in cases:
        if "peak" not in c:
            print(f"# {c.get('model')} b{c.get('batch')} {c.get('optimizer')} {label(c)}: "
                  f"not measured: {c.get('error', '?')}")
            continue
        for export in EXPORTS:
            path = os.path.join(a.onnx_dir, f"{c['model']}.{export}.onnx")
            if not os.path.exists(path):
                continue
            opt = c.get("memest_optimizer", c["optimizer"])
            got, err = peak_of(a.memest, path, c["batch"], opt, c.get("memest_args", []))
            rows.append((c["model"], export, c["batch"], opt_label(c), label(c), got, c["peak"], err))
    ref = {(r[0], r[1], r[2], r[3]): r for r in rows if r[4] == "none"}

    def saving(r):
        base = ref.get(r[:4])
        if r[4] == "none" or base is None:
            return "", ""
        meas = f"{(base[6] - r[6]) / MIB:.1f}"
        est = f"{(base[5] - r[5]) / MIB:.1f}" if base[5] is not None and r[5] is not None else "-"
        return est, meas

    print(f"Measured on {data.get('device', '?')}, torch {data.get('torch', '?')}, {data.get('date', '')}.\n")
    if a.markdown:
        print("| model | export | batch | optimizer | checkpoint | memest MiB | measured MiB | error "
              "| saving memest / measured MiB |")
        print("|---|---|---:|---|---|---:|---:|---:|---:|")
    else:
        print(f"{'model':10} {'export':13} {'batch':>5} {'opt':9} {'checkpoint':22} {'memest MiB':>10} "
              f"{'measured MiB':>12} {'error':>7}  saving memest / measured MiB")
    errs, ref_errs = [], []
    for r in rows:
        name, export, b, opt, ck, got, want, err = r
        e = (got - want) / want * 100 if got is not None else None
        if e is not None and b >= 8:
            (ref_errs if ck == "none" else errs).append(abs(e))
        gs = f"{got / MIB:.1f}" if got is not None else "error"
        es = f"{e:+.1f}%" if e is not None else "-"
        s_est, s_meas = saving(r)
        sv = f"{s_est} / {s_meas}" if s_meas else ""
        if a.markdown:
            tail = sv if got is not None else f"{sv} {err}".strip()
            print(f"| {name} | {export} | {b} | {opt} | {ck} | {gs} | {want / MIB:.1f} | {es} | {tail} |")
        else:
            tail = sv if got is not None else f"{sv}  {err}".strip()
            print(f"{name:10} {export:13} {b:>5} {opt:9} {ck:22} {gs:>10} {want / MIB:>12.1f} {es:>7}  {tail}")
    print()
    for what, es in (("checkpointed", errs), ("no checkpoint (reference)", ref_errs)):
        if es:
            within = sum(1 for e in es if e <= 5)
            print(f"{'- ' if a.markdown else ''}{what}, batch >= 8: {within}/{len(es)} within 5%, "
                  f"mean |error| {sum(es) / len(es):.1f}%, max {max(es):.1f}%")
    failed = sum(1 for r in rows if r[5] is None)
    if failed:
        print(f"{'- ' if a.markdown else ''}memest failed on {failed} of {len(rows)} rows")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
