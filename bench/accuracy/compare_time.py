#!/usr/bin/env python3
"""Compare memest's step time (est_time_estimate, `--gpu NAME`) with
time_layers.py's measurements (docs/accuracy.md, "Step time").

usage: compare_time.py [--memest PATH] [--markdown] [--only M,...] [--by-op] [--fit]
                       MEASURED.json ONNX_DIR

Per model and batch (the dynamo-train export, Adam, float32): the measured
step against memest's with the host costs of the machine's own probe
(time_layers.py's `eager` and `eager_noparam`, scaled by HOST_SCALE: the
host's costs are the machine's, not the GPU's) and with memest's defaults;
the kernels' total; and per module (the innermost module a kernel ran in)
the forward and backward kernel time, as the median of |error| over the
modules that took at least 20 us. --by-op instead sums, by op type, the
modules that are one layer (a Conv, a BatchNormalization, ...). --fit prints
the HOST_SCALE that minimises the median |error| of the step on the
calibration models (CALIBRATION) alone.
"""
import concurrent.futures
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from memest_run import add_inputs, argument_parser, estimate, load_models  # noqa: E402

# libestimate/step_time.c's HOST_SCALE, fitted by --fit on these four models
# of the H100 run (docs/time-model.md); the other eight are held out
HOST_SCALE = 2.0
CALIBRATION = ("resnet18", "mobilenet_v2", "bert_base", "llama_4l")
GPUS = {"NVIDIA H100 80GB HBM3": "H100-80GB", "NVIDIA H200": "H200"}
MIN_MODULE_S = 20e-6


def probe_host(data, scale):
    """est_host from the machine's probe: per op from the chain without
    parameters, per parameter what the Linear chain costs beyond that."""
    e, n = data["eager"], data["eager_noparam"]
    ops = 2 * e["layers"]  # a Linear and a ReLU per layer; each Linear reads 2 parameters
    params = 2 * e["layers"]
    host = [n["forward_op_s"], (e["forward_s"] - ops * n["forward_op_s"]) / params, n["backward_op_s"],
            (e["backward_s"] - ops * n["backward_op_s"]) / params, e["optimizer_param_s"]]
    return ",".join(f"{max(v, 0) * scale * 1e6:.3f}" for v in host)


def run_memest(memest, onnx_dir, model, batch, gpu, host):
    args = ["--gpu", gpu] + (["--host-us", host] if host else [])
    return estimate(memest, os.path.join(onnx_dir, f"{model}.dynamo-train.onnx"), batch, *args)


def modules_of(report):
    """Per module: [forward s, backward s] of memest's kernels."""
    out = {}
    for layer in report["layers"]:
        if layer["module"] is None:
            continue
        m = out.setdefault(layer["module"], [0.0, 0.0, []])
        m[0] += layer.get("time_forward_s", 0)
        m[1] += layer.get("time_backward_s", 0)
        if not layer["shape_only"]:
            m[2].append(layer["op"])
    return out


def module_errors(measured, report):
    """|error| of each module's forward and backward kernel time, over the
    modules that measured at least MIN_MODULE_S."""
    mine = modules_of(report)
    fwd, bwd = [], []
    for name, m in measured["modules"].items():
        if name not in mine:
            continue
        for meas, pred, out in ((m["fwd_s"], mine[name][0], fwd), (m["bwd_s"], mine[name][1], bwd)):
            if meas >= MIN_MODULE_S:
                out.append(abs(pred / meas - 1) * 100)
    return fwd, bwd


def err(pred, meas):
    return (pred / meas - 1) * 100


def rows_of(args, data, models):
    gpu = GPUS.get(data["device"])
    if not gpu:
        sys.exit(f"compare_time.py: no memest GPU for '{data['device']}'")
    host = probe_host(data, args.scale)
    jobs = [(m, int(b), r) for m, per in models.items() for b, r in per.items() if "error" not in r]
    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        probe = list(pool.map(lambda j: run_memest(args.memest, args.onnx_dir, j[0], j[1], gpu, host), jobs))
        default = list(pool.map(lambda j: run_memest(args.memest, args.onnx_dir, j[0], j[1], gpu, None), jobs))
    return gpu, host, [(m, b, r, p, d) for (m, b, r), p, d in zip(jobs, probe, default)]


def step_table(gpu, host, rows):
    head = ["model", "batch", "measured ms", "memest ms", "error", "memest ms, default host", "error",
            "kernels: measured ms", "memest ms", "error", "modules", "fwd: median abs. error", "bwd"]
    out, errs, held, dflt, dev, fwd_all, bwd_all = [], [], [], [], [], [], []
    for m, b, r, (p, perr), (d, derr) in rows:
        if p is None or d is None:
            out.append([m, b, f"{r['step_s'] * 1e3:.2f}", f"error: {perr or derr}"] + ["-"] * (len(head) - 4))
            continue
        meas_dev = sum(x["fwd_s"] + x["bwd_s"] for x in r["modules"].values()) + r["optimizer_s"]
        e, de, ke = (err(p["time"]["step_s"], r["step_s"]), err(d["time"]["step_s"], r["step_s"]),
                     err(p["time"]["device_s"], meas_dev))
        errs.append(abs(e))
        dflt.append(abs(de))
        dev.append(ke)
        if m not in CALIBRATION:
            held.append(abs(e))
        fwd, bwd = module_errors(r, p)
        fwd_all += fwd
        bwd_all += bwd
        out.append([m, b, f"{r['step_s'] * 1e3:.2f}", f"{p['time']['step_s'] * 1e3:.2f}", f"{e:+.1f}%",
                    f"{d['time']['step_s'] * 1e3:.2f}", f"{de:+.1f}%", f"{meas_dev * 1e3:.2f}",
                    f"{p['time']['device_s'] * 1e3:.2f}", f"{ke:+.1f}%", len(fwd),
                    f"{statistics.median(fwd):.0f}%" if fwd else "-", f"{statistics.median(bwd):.0f}%" if bwd else "-"])
    lines = ["| " + " | ".join(head) + " |", "|---|---:|" + "---:|" * (len(head) - 2)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in out]
    med = (lambda xs: f"{statistics.median(xs):.1f}%" if xs else "-")
    within = (lambda xs, t: f"{sum(x <= t for x in xs)} of {len(xs)}")
    lines += ["",
              f"- GPU `{gpu}`, host costs from this machine's probe: `--host-us {host}`.",
              f"- Step, median |error|: {med(errs)} over {len(errs)} rows ({within(errs, 25)} within 25%); "
              f"on the models not used to fit HOST_SCALE: {med(held)} over {len(held)} rows.",
              f"- Step with memest's default host costs: median |error| {med(dflt)} ({within(dflt, 25)} within 25%).",
              f"- Kernels' total: median signed error {med(dev)}.",
              f"- Per module, kernel time, modules of at least {MIN_MODULE_S * 1e6:.0f} us: median |error| forward "
              f"{med(fwd_all)} over {len(fwd_all)}, backward {med(bwd_all)} over {len(bwd_all)}; within 25%: "
              f"forward {within(fwd_all, 25)}, backward {within(bwd_all, 25)}."]
    return lines


def op_table(rows):
    """Modules that are one layer, summed by op type."""
    agg = {}
    for m, b, r, (p, _), _ in rows:
        if p is None:
            continue
        for name, (f, bw, ops) in modules_of(p).items():
            if len(ops) != 1 or name not in r["modules"]:
                continue
            a = agg.setdefault(ops[0], [0, 0.0, 0.0, 0.0, 0.0])
            x = r["modules"][name]
            a[0] += 1
            a[1] += x["fwd_s"]
            a[2] += f
            a[3] += x["bwd_s"]
            a[4] += bw
    head = ["op", "modules", "fwd: measured ms", "memest ms", "error", "bwd: measured ms", "memest ms", "error"]
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    for op, a in sorted(agg.items(), key=lambda kv: -(kv[1][1] + kv[1][3])):
        if a[1] + a[3] < 1e-3:
            continue
        fe = f"{err(a[2], a[1]):+.0f}%" if a[1] > 0 else "-"
        be = f"{err(a[4], a[3]):+.0f}%" if a[3] > 0 else "-"
        lines.append(f"| {op} | {a[0]} | {a[1] * 1e3:.2f} | {a[2] * 1e3:.2f} | {fe} | {a[3] * 1e3:.2f} | "
                     f"{a[4] * 1e3:.2f} | {be} |")
    return lines


def fit(args, data, models):
    cal = {k: v for k, v in models.items() if k in CALIBRATION}
    best = None
    for s in [x / 20 for x in range(20, 81)]:
        args.scale = s
        _, _, rows = rows_of(args, data, cal)
        errs = [abs(err(p["time"]["step_s"], r["step_s"])) for _, _, r, (p, _), _ in rows if p]
        if best is None or statistics.median(errs) < best[0]:
            best = (statistics.median(errs), s)
    print(f"HOST_SCALE {best[1]:.2f}: median |error| {best[0]:.1f}% on {', '.join(CALIBRATION)}")


def main():
    ap = argparse_parser()
    args = ap.parse_args()
    data, models = load_models(args.measured, args.only)
    if args.fit:
        return fit(args, data, models)
    gpu, host, rows = rows_of(args, data, models)
    lines = op_table(rows) if args.by_op else step_table(gpu, host, rows)
    print("\n".join(lines))
    return 0


def argparse_parser():
    ap = argument_parser(__doc__.splitlines()[0])
    ap.add_argument("--by-op", action="store_true")
    ap.add_argument("--fit", action="store_true")
    ap.add_argument("--scale", type=float, default=HOST_SCALE)
    add_inputs(ap)
    return ap


if __name__ == "__main__":
    sys.exit(main())
