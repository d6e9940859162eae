#!/usr/bin/env python3
"""Compare memest --amp training peaks with measured ones.

usage: compare_amp.py [--memest PATH] [--markdown] [--only MODEL,...] MEASURED.json ONNX_DIR

MEASURED.json is ../shared/truth/truth.json: train_amp_bf16 and train_amp_fp16
(Adam, forward and loss under torch.autocast("cuda")) per model and batch,
from the second entry of `batches` upwards. One row per model, -train export,
batch and autocast dtype: memest's peak, the measured peak and the error.
"""
import json
import os

from memest_run import add_inputs, argument_parser, estimate, load_models

EXPORTS = ("legacy-train", "dynamo-train")
AMPS = ("bf16", "fp16")


def main():
    ap = argument_parser(__doc__.splitlines()[0])
    add_inputs(ap)
    a = ap.parse_args()
    _, models = load_models(a.measured, a.only)
    rows = []
    for name, m in models.items():
        for export in EXPORTS:
            path = os.path.join(a.onnx_dir, f"{name}.{export}.onnx")
            if not os.path.exists(path):
                continue
            for b in m["batches"][1:]:
                for amp in AMPS:
                    meas = m.get(f"train_amp_{amp}", {}).get(str(b))
                    if not meas:
                        continue
                    rep, err = estimate(a.memest, path, b, "--amp", amp)
                    got = rep["peak"]["bytes"] if rep else None
                    where = f"{rep['peak']['phase']}:{rep['peak']['layer']}" if rep else err
                    rows.append((name, export, b, amp, got, meas["peak"], where))
    mib = 1 << 20
    if a.markdown:
        print("| model | export | batch | amp | memest MiB | measured MiB | error |")
        print("|---|---|---:|---|---:|---:|---:|")
    else:
        print(f"{'model':14} {'export':13} {'batch':>5} {'amp':4} {'memest MiB':>11} {'measured MiB':>12} {'error':>7}  peak at")
    errs = []
    for name, export, b, amp, got, want, where in rows:
        e = (got - want) / want * 100 if got is not None else None
        if e is not None and b >= 8:
            errs.append(abs(e))
        gs = f"{got / mib:.1f}" if got is not None else "error"
        es = f"{e:+.1f}%" if e is not None else "-"
        if a.markdown:
            print(f"| {name} | {export} | {b} | {amp} | {gs} | {want / mib:.1f} | {es} |")
        else:
            print(f"{name:14} {export:13} {b:>5} {amp:4} {gs:>11} {want / mib:>12.1f} {es:>7}  {where}")
    if errs:
        within = sum(1 for e in errs if e <= 5)
        print(f"\nbatch >= 8: {within}/{len(errs)} within 5%, mean |error| {sum(errs) / len(errs):.1f}%, "
              f"max {max(errs):.1f}%")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
