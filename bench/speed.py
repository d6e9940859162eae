#!/usr/bin/env python3
"""memest's speed as ratios to a reference taken in the same run (issue 15's
targets). Never a timed unit test: run it by hand, commit its JSON.

usage: python3 bench/speed.py [--memest build/cli/memest] [--bench build/bench/bench_estimate]
                              [--out FILE.json] [--only NAME,...] [--repeat N]
       python3 bench/speed.py --markdown FILE.json   the table of docs/architecture.md, "Speed"

Each figure is the median of --repeat runs (default 7) of memest and of its
reference, alternated:

  swin_whole       memest swin_t.legacy-train.onnx --batch 32 --format json > /dev/null
                   / onnx.load(same file, load_external_data=False)     target <= 1.0
  swin_load        loading swin_t alone, in a process that has started
                   (bench_estimate --load 50: the mean) / the same onnx.load:
                   the whole run's floor, no target of its own
  swin_max_batch   memest swin_t ... --max-batch --gpu H100-80GB
                   / the same onnx.load                                 target <= 5
  resnet50_reestimate  one estimate of a loaded resnet50 (train, Adam;
                   bench_estimate --reestimate 200) / onnx.load of it   target <= 0.25
                   and the same without the caching allocator's replay
                   (est_options.skip_reserved), for what needs no reserved bytes
  file_1gib        memest on a 1 GiB ONNX file with embedded weights
                   / cat FILE > /dev/null (warm page cache)             target <= 1.5
                   and memest's peak RSS                                target <= 256 MiB
  nodes_1m         memest on a 1,000,008-node synthetic transformer
                   (bench_estimate --write): seconds and peak RSS       target <= 2 s, 1 GiB
  nodes_linear     seconds on the 1,000,008-node synthetic transformer /
                   seconds on its 100,008-node sibling: every pass (loading,
                   the rewrites, inference, the step, printing) on graphs
                   ten times apart: 10 when linear                       target <= 15
  sigmoid_fanout   seconds at 100k nodes / seconds at 10k nodes of one
                   input read by N Sigmoids whose outputs are summed at
                   the end (fuse.c's candidates): 10 when linear        target <= 15

The models are made in bench/out/ (git-ignored) the first time: swin_t and
resnet50 exported from torchvision by bench/accuracy/export.py's TorchScript
training export (needs torch and torchvision), the others generated.
"""
import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "out")
ROOT = os.path.dirname(HERE)


def exported(name):
    """bench/out/<name>.legacy-train.onnx, exported once."""
    path = os.path.join(OUT, f"{name}.legacy-train.onnx")
    if not os.path.exists(path):
        sys.path.insert(0, os.path.join(HERE, "accuracy"))
        import export
        import zoo
        export.export_legacy(zoo.build(name), zoo.make_input(name, export.EXPORT_BATCH), path, True)
        export.strip_weights(path)
    return path


def big_file():
    """A 1 GiB model with its weights embedded: x @ W_0 @ ... @ W_15, each W
    4096 x 4096 float32 (64 MiB)."""
    path = os.path.join(OUT, "embedded_1gib.onnx")
    if os.path.exists(path):
        return path
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    n, d = 16, 4096
    nodes, inits, x = [], [], "x"
    for i in range(n):
        w = numpy_helper.from_array(np.full((d, d), 0.01, np.float32), f"w{i}")
        inits.append(w)
        nodes.append(helper.make_node("MatMul", [x, f"w{i}"], [f"h{i}"], name=f"mm{i}"))
        x = f"h{i}"
    g = helper.make_graph(nodes, "embedded", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", d])],
                          [helper.make_tensor_value_info(x, TensorProto.FLOAT, ["batch", d])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    with open(path, "wb") as f:
        f.write(m.SerializeToString())
    return path


def stale_bench(bench):
    """bench_estimate is not built by default: one older than the library
    beside it would time yesterday's code. The reason, or None."""
    lib_dir = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(bench))), "libestimate")
    libs = [os.path.join(lib_dir, f) for f in os.listdir(lib_dir) if f.startswith("libestimate.so")] \
        if os.path.isdir(lib_dir) else []
    if not os.path.exists(bench):
        return f"{bench} is not built: ninja -C BUILD bench/bench_estimate"
    if libs and os.path.getmtime(bench) < max(os.path.getmtime(f) for f in libs):
        return f"{bench} is older than {lib_dir}'s library: ninja -C BUILD bench/bench_estimate"
    return None


def synthetic(bench, blocks, name):
    path = os.path.join(OUT, name)
    if not os.path.exists(path):
        subprocess.run([bench, "--write", str(blocks), path], check=True)
    return path


def fanout(n):
    """x read by n Sigmoids; their outputs summed by a chain of Adds after all
    of them (so each Sigmoid's reader is far away)."""
    path = os.path.join(OUT, f"sigmoid_fanout_{n}.onnx")
    if os.path.exists(path):
        return path
    import onnx
    from onnx import TensorProto, helper
    k = n // 2
    nodes = [helper.make_node("Sigmoid", ["x"], [f"s{i}"], name=f"sig{i}") for i in range(k)]
    acc = "s0"
    for i in range(1, k):
        nodes.append(helper.make_node("Add", [acc, f"s{i}"], [f"a{i}"], name=f"add{i}"))
        acc = f"a{i}"
    g = helper.make_graph(nodes, "fanout", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8])],
                          [helper.make_tensor_value_info(acc, TensorProto.FLOAT, ["batch", 8])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    with open(path, "wb") as f:
        f.write(m.SerializeToString())
    return path


def run_child(args):
    """Wall seconds and peak RSS (bytes) of one child process, output
    discarded. The RSS comes from /usr/bin/time, whose own small process
    forks the child (a child forked from this Python would count the
    Python's pages up to its exec)."""
    t = time.perf_counter()
    p = subprocess.run(["/usr/bin/time", "-f", "%M", *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                       text=True)
    wall = time.perf_counter() - t
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: {p.stderr.strip()}")
    return wall, int(p.stderr.strip().splitlines()[-1]) * 1024


def onnx_parse(path):
    import onnx
    t = time.perf_counter()
    onnx.load(path, load_external_data=False)
    return time.perf_counter() - t


def ratio(repeat, mine, reference):
    """Medians of alternated runs: (mine s, reference s, ratio, extra)."""
    a, b, extra = [], [], []
    for _ in range(repeat):
        r = mine()
        a.append(r[0] if isinstance(r, tuple) else r)
        if isinstance(r, tuple):
            extra.append(r[1])
        b.append(reference())
    m, ref = statistics.median(a), statistics.median(b)
    return m, ref, m / ref, (max(extra) if extra else None)


def markdown(path):
    """docs/architecture.md's table from a results file."""
    d = json.load(open(path))
    f = d["figures"]
    mib = 2 ** 20

    def t(x):
        return f"{x * 1e3:.2f} ms" if x < 0.01 else f"{x * 1e3:.1f} ms" if x < 1 else f"{x:.2f} s"
    rows = []
    if "swin_whole" in f:
        g = f["swin_whole"]
        rows.append(("whole run on swin_t (8,081 nodes, train, batch 32, `--format json`)", t(g["memest_s"]),
                     f"`onnx.load` {t(g['onnx_load_s'])}", f"{g['ratio']:.1f}x", "<= 1.0x"))
    if "swin_load" in f:
        g = f["swin_load"]
        rows.append(("loading swin_t alone (the floor of the whole run)", t(g["memest_s"]),
                     f"`onnx.load` {t(g['onnx_load_s'])}", f"{g['ratio']:.1f}x", "-"))
    if "swin_max_batch" in f:
        g = f["swin_max_batch"]
        rows.append(("`--max-batch --gpu H100-80GB` on swin_t", t(g["memest_s"]), f"`onnx.load` {t(g['onnx_load_s'])}",
                     f"{g['ratio']:.1f}x", "<= 5x"))
    for key, what in (("resnet50_reestimate", "one re-estimate of a loaded resnet50 (train, Adam)"),
                      ("resnet50_reestimate_skip_reserved", "the same with `est_options.skip_reserved`")):
        if key in f:
            g = f[key]
            rows.append((what, t(g["memest_s"]), f"`onnx.load` {t(g['onnx_load_s'])}", f"{g['ratio']:.2f}x",
                         "<= 0.25x"))
    if "file_1gib" in f:
        g = f["file_1gib"]
        rows.append(("a 1 GiB file with embedded weights",
                     f"{t(g['memest_s'])}, {g['peak_rss_bytes'] / mib:.0f} MiB peak RSS", f"`cat` {t(g['cat_s'])}",
                     f"{g['ratio']:.2f}x", "<= 1.5x, <= 256 MiB"))
    if "nodes_1m" in f:
        g = f["nodes_1m"]
        rows.append(("a 1,000,008-node synthetic transformer",
                     f"{t(g['memest_s'])}, {g['peak_rss_bytes'] / 2 ** 30:.2f} GiB peak RSS", "-", "-",
                     "<= 2 s, <= 1 GiB"))
    if "nodes_linear" in f:
        g = f["nodes_linear"]
        rows.append(("synthetic transformer, 1,000,008 nodes against 100,008 (linearity of every pass)",
                     f"{t(g['s_1m'])} / {t(g['s_100k'])}", "-", f"{g['ratio']:.1f}", "~10 when linear"))
    if "sigmoid_fanout" in f:
        g = f["sigmoid_fanout"]
        rows.append(("Sigmoid fan-out, 100k nodes against 10k (linearity)", f"{t(g['s_100k'])} / {t(g['s_10k'])}",
                     "-", f"{g['ratio']:.1f}", "~10 when linear"))
    print("| what | memest | reference, same run | ratio | target |")
    print("|---|---|---|---:|---|")
    for r in rows:
        print("| " + " | ".join(r) + " |")


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--markdown":
        markdown(sys.argv[2])
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--memest", default=os.path.join(ROOT, "build", "cli", "memest"))
    ap.add_argument("--bench", default=os.path.join(ROOT, "build", "bench", "bench_estimate"))
    ap.add_argument("--out")
    ap.add_argument("--only", default="")
    ap.add_argument("--repeat", type=int, default=7)
    a = ap.parse_args()
    stale = stale_bench(a.bench)
    if stale:
        ap.error(stale)
    os.makedirs(OUT, exist_ok=True)
    only = set(filter(None, a.only.split(",")))
    want = lambda name: not only or name in only  # noqa: E731
    res = {"machine": {"cpus": os.cpu_count(), "cpu": platform.processor() or platform.machine(),
                       "python": platform.python_version()},
           "date": time.strftime("%Y-%m-%d"), "commit": subprocess.run(
               ["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip(),
           "figures": {}}
    try:
        with open("/proc/cpuinfo") as f:
            res["machine"]["cpu"] = next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    fig = res["figures"]
    R = a.repeat
    if want("swin_whole") or want("swin_load") or want("swin_max_batch"):
        swin = exported("swin_t")
        if want("swin_whole"):
            m, ref, x, _ = ratio(R, lambda: run_child([a.memest, swin, "--batch", "32", "--format", "json"])[0],
                                 lambda: onnx_parse(swin))
            fig["swin_whole"] = {"memest_s": m, "onnx_load_s": ref, "ratio": x, "target": 1.0}
        if want("swin_load"):
            def load():
                out = subprocess.run([a.bench, "--load", "50", swin], capture_output=True, text=True, check=True)
                return float(out.stdout.split()[1]) / 1e3
            m, ref, x, _ = ratio(R, load, lambda: onnx_parse(swin))
            fig["swin_load"] = {"memest_s": m, "onnx_load_s": ref, "ratio": x}
        if want("swin_max_batch"):
            m, ref, x, _ = ratio(R, lambda: run_child([a.memest, swin, "--max-batch", "--gpu", "H100-80GB"])[0],
                                 lambda: onnx_parse(swin))
            fig["swin_max_batch"] = {"memest_s": m, "onnx_load_s": ref, "ratio": x, "target": 5.0}
    if want("resnet50_reestimate"):
        r50 = exported("resnet50")

        def one():
            out = subprocess.run([a.bench, "--reestimate", "200", r50], capture_output=True, text=True, check=True)
            return float(out.stdout.split()[1]) / 1e3
        m, ref, x, _ = ratio(R, one, lambda: onnx_parse(r50))
        fig["resnet50_reestimate"] = {"memest_s": m, "onnx_load_s": ref, "ratio": x, "target": 0.25}

        def quick():
            out = subprocess.run([a.bench, "--reestimate", "200", r50, "skip-reserved"], capture_output=True,
                                 text=True, check=True)
            return float(out.stdout.split()[1]) / 1e3
        m, ref, x, _ = ratio(R, quick, lambda: onnx_parse(r50))
        fig["resnet50_reestimate_skip_reserved"] = {"memest_s": m, "onnx_load_s": ref, "ratio": x, "target": 0.25}
    if want("file_1gib"):
        big = big_file()
        m, ref, x, rss = ratio(max(3, R // 2), lambda: run_child([a.memest, big, "--batch", "1"]),
                               lambda: run_child(["sh", "-c", f"cat '{big}' > /dev/null"])[0])
        fig["file_1gib"] = {"memest_s": m, "cat_s": ref, "ratio": x, "target": 1.5, "peak_rss_bytes": rss,
                            "rss_target_bytes": 256 << 20, "file_bytes": os.path.getsize(big)}
    if want("nodes_1m"):
        path = synthetic(a.bench, 83334, "synthetic_1m.onnx")
        runs = [run_child([a.memest, path, "--batch", "1", "--dim", "seq=128"]) for _ in range(3)]
        fig["nodes_1m"] = {"memest_s": statistics.median(r[0] for r in runs), "target_s": 2.0,
                           "peak_rss_bytes": max(r[1] for r in runs), "rss_target_bytes": 1 << 30}
    if want("nodes_linear"):
        small = synthetic(a.bench, 8334, "synthetic_100k.onnx")
        large = synthetic(a.bench, 83334, "synthetic_1m.onnx")
        cmd = ["--batch", "1", "--dim", "seq=128"]
        ts = statistics.median(run_child([a.memest, small] + cmd)[0] for _ in range(5))
        tl = statistics.median(run_child([a.memest, large] + cmd)[0] for _ in range(3))
        fig["nodes_linear"] = {"s_100k": ts, "s_1m": tl, "ratio": tl / ts, "target": 15.0}
    if want("sigmoid_fanout"):
        small, large = fanout(10000), fanout(100000)
        ts = statistics.median(run_child([a.memest, small, "--batch", "1"])[0] for _ in range(3))
        tl = statistics.median(run_child([a.memest, large, "--batch", "1"])[0] for _ in range(3))
        fig["sigmoid_fanout"] = {"s_10k": ts, "s_100k": tl, "ratio": tl / ts, "target": 15.0}
    text = json.dumps(res, indent=1)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text + "\n")
    for name, f in fig.items():
        keys = ", ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in f.items())
        print(f"{name:20} {keys}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
