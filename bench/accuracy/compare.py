#!/usr/bin/env python3
"""Compare memest's peaks with measured ones.

usage: compare.py [--memest PATH] [--markdown] [--categories] [--only MODEL,...] MEASURED.json ONNX_DIR

MEASURED.json is ../shared/truth/truth.json or what measure.py wrote; ONNX_DIR
holds <model>.<export>.onnx. Training rows use the -train exports (sgd,
momentum, adam at every batch); inference rows the eval exports. Prints one
row per case and a summary per model and overall; --markdown prints the tables
docs/accuracy.md keeps. --categories instead sets memest's breakdown of the
training peak beside MemTracker's snapshot (memtracker_adam_b<batch>: Adam at
that batch), category by category.
"""
import json
import os
import sys

from memest_run import add_inputs, argument_parser, estimate, load_models

TRAIN_EXPORTS = ("legacy-train", "dynamo-train")
INFER_EXPORTS = ("legacy", "dynamo")
OPTIMIZERS = ("sgd", "momentum", "adam")


def cases(models, onnx_dir):
    """(model, export, batch, what, measured bytes, path) for every case with an export."""
    for name, m in models.items():
        if "error" in m:
            continue
        for export in TRAIN_EXPORTS + INFER_EXPORTS:
            path = os.path.join(onnx_dir, f"{name}.{export}.onnx")
            if not os.path.exists(path):
                continue
            for b in m["batches"]:
                if export in TRAIN_EXPORTS:
                    for opt in OPTIMIZERS:
                        yield name, export, b, opt, m["train"][str(b)][opt]["peak"], path
                else:
                    yield name, export, b, "infer", m["infer"][str(b)]["peak"], path


def main():
    ap = argument_parser(__doc__.splitlines()[0])
    ap.add_argument("--categories", action="store_true")
    add_inputs(ap)
    a = ap.parse_args()
    data, models = load_models(a.measured, a.only)
    if a.categories:
        print_categories(a.memest, models, a.onnx_dir, a.markdown)
        return 0
    rows = []
    for name, export, b, what, want, path in cases(models, a.onnx_dir):
        args = ["--mode", "infer"] if what == "infer" else ["--optimizer", what]
        rep, err = estimate(a.memest, path, b, *args)
        got = rep["peak"]["bytes"] if rep else None
        where = f"{rep['peak']['phase']}:{rep['peak']['layer']}" if rep else err
        rows.append((name, export, b, what, got, want, where))
    if a.markdown:
        print_markdown(rows, data)
    else:
        print_text(rows)
    return 0


# MemTracker's categories and the parts of memest's peak that mean the same.
# MemTracker files the input batch and the last iteration's output and loss
# (memest's "inputs" and "other") under ACT.
CATEGORIES = (("PARAM", ("params",)), ("BUFFER", ("buffers",)), ("GRAD", ("grads",)),
              ("OPT", ("optimizer",)), ("ACT", ("activations", "inputs", "other")), ("TEMP", ("temp",)))


def print_categories(memest, models, onnx_dir, markdown):
    head = ["model", "export", "batch"] + [f"{c} memest / MemTracker MiB" for c, _ in CATEGORIES] + ["total"]
    if markdown:
        print("| " + " | ".join(head) + " |")
        print("|---|---|---:|" + "---:|" * (len(CATEGORIES) + 1))
    for name, m in models.items():
        key = next((k for k in m if k.startswith("memtracker_adam_b")), None)
        if not key:
            continue
        batch = int(key.rsplit("_b", 1)[1])
        snap = m[key]["cuda:0"]
        for export in TRAIN_EXPORTS:
            path = os.path.join(onnx_dir, f"{name}.{export}.onnx")
            if not os.path.exists(path):
                continue
            rep, err = estimate(memest, path, batch, "--optimizer", "adam")
            if not rep:
                print(f"{name} {export}: {err}")
                continue
            peak = rep["peak"]
            cells = []
            for cat, parts in CATEGORIES:
                ours = sum(peak["breakdown"].get(p, 0) for p in parts)
                theirs = snap.get(f"_MemRefType.{cat}", 0)
                cells.append(f"{ours / 2**20:.1f} / {theirs / 2**20:.1f}")
            cells.append(f"{peak['bytes'] / 2**20:.1f} / {snap['Total'] / 2**20:.1f}")
            if markdown:
                print(f"| {name} | {export} | {batch} | " + " | ".join(cells) + " |")
            else:
                print(f"{name:14} {export:13} b{batch:<4} " + "  ".join(
                    f"{c}={v}" for (c, _), v in zip(CATEGORIES + (("TOTAL", ()),), cells)))


def rel(got, want):
    return (got - want) / want


def print_text(rows):
    for name, export, b, what, got, want, where in rows:
        if got is None:
            print(f"{name:18} {export:13} b{b:<4} {what:9} ERROR {where}")
            continue
        print(f"{name:18} {export:13} b{b:<4} {what:9} est {got / 2**20:10.1f} MiB  meas {want / 2**20:10.1f} MiB"
              f"  {100 * rel(got, want):+6.1f}%  at {where[:44]}")
    summary(rows, print)


def summary(rows, out):
    def stats(sel):
        errs = [abs(rel(r[4], r[5])) for r in sel if r[4] is not None]
        failed = sum(1 for r in sel if r[4] is None)
        if not errs:
            return f"n=0 failed={failed}"
        errs.sort()
        return (f"n={len(errs)} mean |err| {100 * sum(errs) / len(errs):.1f}%  median {100 * errs[len(errs) // 2]:.1f}%"
                f"  max {100 * errs[-1]:.1f}%" + (f"  failed={failed}" if failed else ""))
    train = [r for r in rows if r[3] != "infer"]
    infer = [r for r in rows if r[3] == "infer"]
    out(f"training (all batches):   {stats(train)}")
    out(f"training (batch >= 8):    {stats([r for r in train if r[2] >= 8])}")
    out(f"inference (all batches):  {stats(infer)}")
    out(f"inference (batch >= 8):   {stats([r for r in infer if r[2] >= 8])}")


def print_markdown(rows, data):
    print(f"Measured on {data.get('device', '?')}, torch {data.get('torch', '?')}, "
          f"cuDNN {data.get('cudnn', '?')}, {data.get('date', '')}.\n")
    print("| model | export | batch | case | memest MiB | measured MiB | error |")
    print("|---|---|---:|---|---:|---:|---:|")
    for name, export, b, what, got, want, where in rows:
        if got is None:
            print(f"| {name} | {export} | {b} | {what} | error | {want / 2**20:.1f} | {where} |")
        else:
            print(f"| {name} | {export} | {b} | {what} | {got / 2**20:.1f} | {want / 2**20:.1f} | "
                  f"{100 * rel(got, want):+.1f}% |")
    print()
    summary(rows, lambda s: print(f"- {s}"))


if __name__ == "__main__":
    sys.exit(main())
