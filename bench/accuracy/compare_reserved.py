#!/usr/bin/env python3
"""Compare memest's predicted reserved memory (totals.reserved_bytes, the
replay of PyTorch's caching allocator) with torch.cuda.max_memory_reserved().

usage: compare_reserved.py [--memest PATH] [--markdown] [--only MODEL,...]
                           [--base MiB] [--amp] [--exports E,...] [--steps S,...]
                           MEASURED.json ONNX_DIR

MEASURED.json is what measure.py wrote (each entry has "reserved" and
"reserved_base": the segments the process held before the model, mostly
cuBLAS's workspaces, which memest does not count) or ../shared/truth/truth.json
(only "reserved"; give --base, the MiB the process held before, to subtract).
Rows: training (-train exports, sgd/momentum/adam), inference (eval exports),
and with --amp the train_amp_bf16/fp16 entries. For each: memest's allocated
peak and reserved prediction beside the measured ones, and the errors.
--exports and --steps keep only those exports (legacy-train, legacy, ...) and
steps (sgd, momentum, adam, infer, "adam bf16", ...); the summary lines
count the rows printed.
"""
import os

from memest_run import add_inputs, argument_parser, estimate, load_models

MiB = 1 << 20


def cases(models, amp):
    for name, m in models.items():
        if "error" in m:
            continue
        for b in m["batches"]:
            for opt in ("sgd", "momentum", "adam"):
                e = m["train"][str(b)].get(opt)
                if e and "reserved" in e:
                    yield name, "train", ("legacy-train", "dynamo-train"), b, ["--optimizer", opt], opt, e
            e = m["infer"].get(str(b))
            if e and "reserved" in e:
                yield name, "infer", ("legacy", "dynamo"), b, ["--mode", "infer"], "infer", e
            for key, flag in (("train_amp_bf16", "bf16"), ("train_amp_fp16", "fp16")):
                e = m.get(key, {}).get(str(b))
                if amp and e and "reserved" in e:
                    yield name, "amp", ("legacy-train", "dynamo-train"), b, ["--amp", flag], "adam " + flag, e


def main():
    ap = argument_parser(__doc__.splitlines()[0])
    ap.add_argument("--base", type=float, default=None)
    ap.add_argument("--amp", action="store_true")
    ap.add_argument("--exports", default="")
    ap.add_argument("--steps", default="")
    ap.add_argument("--summary", action="store_true", help="print only the summary, a markdown table")
    add_inputs(ap)
    a = ap.parse_args()
    data, models = load_models(a.measured, a.only)
    rows, errs, naive_errs = [], {}, {}
    for name, kind, exports, b, args, what, e in cases(models, a.amp):
        base = e.get("reserved_base")
        if base is None:
            if a.base is None:
                continue
            base = a.base * MiB
        measured = e["reserved"] - base
        if a.steps and what not in a.steps.split(","):
            continue
        for export in exports:
            if a.exports and export not in a.exports.split(","):
                continue
            path = os.path.join(a.onnx_dir, f"{name}.{export}.onnx")
            if not os.path.exists(path):
                continue
            j, _ = estimate(a.memest, path, b, *args)
            if not j:
                rows.append((name, export, b, what, None, None, e["peak"], measured, None, None))
                continue
            res, peak = j["totals"]["reserved_bytes"], j["peak"]["bytes"]
            err = 100.0 * (res - measured) / measured if measured > 0 else None
            naive = 100.0 * (peak - measured) / measured if measured > 0 else None
            rows.append((name, export, b, what, peak, res, e["peak"], measured, err, naive))
            if err is not None and b >= 8:
                errs.setdefault(kind, []).append(abs(err))
                naive_errs.setdefault(kind, []).append(abs(naive))
    if a.summary:
        names = {"train": "training (sgd, momentum, adam; both exports)", "infer": "inference (both exports)",
                 "amp": "training under autocast (bf16, fp16)"}
        print("| step, batch >= 8 | rows | mean abs. error | median | within 5% | within 10% | max "
              "| allocated peak taken as reserved: mean abs. error |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|")
        for kind, es in errs.items():
            es, ns = sorted(es), naive_errs[kind]
            print(f"| {names[kind]} | {len(es)} | {sum(es) / len(es):.1f}% | {es[len(es) // 2]:.1f}% | "
                  f"{sum(x <= 5 for x in es)} | {sum(x <= 10 for x in es)} | {es[-1]:.1f}% | {sum(ns) / len(ns):.1f}% |")
        return
    hdr = ("model", "export", "batch", "step", "memest peak", "memest reserved", "measured peak",
           "measured reserved", "reserved error", "peak as reserved")
    fmt = (lambda v: f"{v / MiB:.1f}" if isinstance(v, (int, float)) else "-")
    pct = (lambda v: f"{v:+.1f}%" if v is not None else "-")
    if a.markdown:
        print("| " + " | ".join(hdr) + " |")
        print("|" + "---|" * len(hdr))
    else:
        print(f"{'model':20} {'export':13} {'b':>4} {'step':12} {'peak':>9} {'reserved':>9} {'m.peak':>9} "
              f"{'m.resv':>9} {'error':>8} {'peak as resv':>12}")
    for name, export, b, what, peak, res, mpeak, mres, err, naive in rows:
        if a.markdown:
            print(f"| {name} | {export} | {b} | {what} | {fmt(peak)} | {fmt(res)} | {fmt(mpeak)} | {fmt(mres)} | "
                  f"{pct(err)} | {pct(naive)} |")
        else:
            print(f"{name:20} {export:13} {b:>4} {what:12} {fmt(peak):>9} {fmt(res):>9} {fmt(mpeak):>9} "
                  f"{fmt(mres):>9} {pct(err):>8} {pct(naive):>12}")
    print()
    for kind, es in errs.items():
        es = sorted(es)
        print(f"{kind}, batch >= 8: {len(es)} rows, mean |error| {sum(es) / len(es):.1f}%, median "
              f"{es[len(es) // 2]:.1f}%, within 5%: {sum(x <= 5 for x in es)}, within 10%: "
              f"{sum(x <= 10 for x in es)}, max {es[-1]:.1f}%")
    print(f"Measured: {data.get('device', '?')}, torch {data.get('torch', '?')}, {data.get('date', '?')}")


if __name__ == "__main__":
    main()
