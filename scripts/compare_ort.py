#!/usr/bin/env python3
"""compare_ort.py: the verify executor's whole-model outputs against onnxruntime.

For each model (ONNX files with their weights embedded, e.g. the truth
folder's *.full.onnx eval-mode exports) it
  1. makes a deterministic input (numpy seed 0, standard normal float32; the
     input's symbolic dims bound to --batch, default 2) and writes it to
     OUT/<model>.input.npy;
  2. runs `memest verify MODEL --mode infer --batch B --input FILE
     --dump-outputs OUT/<model>.outputs` (the executor on the GPU, its
     convolutions in float32: MEMEST_VERIFY_CONV_TF32=0);
  3. runs onnxruntime (CPUExecutionProvider) on the same input;
  4. compares every output: max abs error, max abs error relative to the
     reference's largest magnitude (the pass criterion: <= --rtol, default
     1e-3), and the largest elementwise relative error where |ref| is at least
     1e-3 of that magnitude (reported only).
Writes OUT/compare_ort.json and prints one line per output. Exit 0 when all
pass, 1 when one fails or a run fails.

Usage: compare_ort.py [--memest PATH] [--out DIR] [--batch N] [--rtol R] MODEL.onnx...
Needs numpy and onnxruntime (and onnx for nothing: only onnxruntime reads
the model).
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np


def main():
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("models", nargs="+")
    ap.add_argument("--memest", default=os.path.join(here, "build", "cli", "memest"))
    ap.add_argument("--out", default="compare-ort")
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--rtol", type=float, default=1e-3)
    a = ap.parse_args()

    import onnxruntime as ort

    os.makedirs(a.out, exist_ok=True)
    results, ok_all = [], True
    for path in a.models:
        name = os.path.basename(path)
        if name.endswith(".onnx"):
            name = name[: -len(".onnx")]
        rec = {"model": path, "batch": a.batch}
        results.append(rec)
        try:
            sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        except Exception as e:  # noqa: BLE001
            rec["error"] = f"onnxruntime cannot load: {e}"
            ok_all = False
            print(f"FAIL {name}: {rec['error']}")
            continue
        np.random.seed(0)
        feeds, in_args = {}, []
        for k, i in enumerate(sess.get_inputs()):
            shape = [d if isinstance(d, int) and d > 0 else a.batch for d in i.shape]
            if i.type == "tensor(float)":
                x = np.random.standard_normal(shape).astype(np.float32)
            elif i.type == "tensor(int64)":
                x = np.random.randint(0, 2, size=shape).astype(np.int64)
            else:
                rec["error"] = f"input {i.name} of type {i.type}"
                break
            f = os.path.join(a.out, f"{name}.input{k}.npy" if k else f"{name}.input.npy")
            np.save(f, x)
            feeds[i.name] = x
            in_args += ["--input", f"{i.name}={f}"]
        if "error" in rec:
            ok_all = False
            print(f"FAIL {name}: {rec['error']}")
            continue
        dump = os.path.join(a.out, f"{name}.outputs")
        cmd = [a.memest, "verify", path, "--mode", "infer", "--batch", str(a.batch), *in_args,
               "--dump-outputs", dump, "--tolerance", "1e9", "--format", "json",
               "-o", os.path.join(a.out, f"{name}.verify.json")]
        rec["command"] = " ".join(cmd)
        # full float32 convolutions: verify runs them in TF32 by default, as PyTorch does
        env = dict(os.environ, MEMEST_VERIFY_CONV_TF32="0")
        p = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if p.returncode != 0 or not os.path.exists(os.path.join(dump, "outputs.json")):
            rec["error"] = f"memest verify exited {p.returncode}: {p.stderr.strip()[-500:]}"
            ok_all = False
            print(f"FAIL {name}: {rec['error']}")
            continue
        meta = json.load(open(os.path.join(dump, "outputs.json")))
        ref = sess.run(None, feeds)
        names = [o.name for o in sess.get_outputs()]
        rec["outputs"] = []
        for k, (oname, r) in enumerate(zip(names, ref)):
            o = {"name": oname}
            rec["outputs"].append(o)
            m = next((m for m in meta["outputs"] if m["name"] == oname), None)
            if m is None and k < len(meta["outputs"]):
                m = meta["outputs"][k]
            if m is None:
                o["error"] = "not in memest's outputs"
                ok_all = False
                print(f"FAIL {name} {oname}: {o['error']}")
                continue
            dt = {"float32": np.float32, "int64": np.int64, "bool": np.uint8}[m["dtype"]]
            got = np.fromfile(os.path.join(dump, m["file"]), dtype=dt).reshape(m["shape"])
            r = np.asarray(r)
            o["shape"] = list(got.shape)
            o["ref_shape"] = list(r.shape)
            if got.shape != r.shape:
                o["error"] = f"shape {list(got.shape)} vs onnxruntime {list(r.shape)}"
                ok_all = False
                print(f"FAIL {name} {oname}: {o['error']}")
                continue
            g64, r64 = got.astype(np.float64), r.astype(np.float64)
            diff = np.abs(g64 - r64)
            scale = float(np.max(np.abs(r64))) if r64.size else 0.0
            max_abs = float(np.max(diff)) if diff.size else 0.0
            rel = max_abs / scale if scale > 0 else (0.0 if max_abs == 0 else float("inf"))
            mask = np.abs(r64) >= 1e-3 * scale
            elem_rel = float(np.max(diff[mask] / np.abs(r64[mask]))) if scale > 0 and mask.any() else 0.0
            finite = bool(np.all(np.isfinite(g64)))
            ok = finite and rel <= a.rtol
            o.update(max_abs_error=max_abs, ref_max_abs=scale, rel_error=rel, max_elem_rel_error=elem_rel,
                     finite=finite, ok=ok)
            ok_all &= ok
            print(f"{'ok  ' if ok else 'FAIL'} {name:32s} {oname:10s} shape {list(got.shape)} "
                  f"max abs err {max_abs:.3g} (ref max |x| {scale:.3g}) rel {rel:.3g} "
                  f"max elementwise rel {elem_rel:.3g}")
    json.dump({"rtol": a.rtol, "results": results}, open(os.path.join(a.out, "compare_ort.json"), "w"), indent=1)
    print(f"compare_ort: {'all within' if ok_all else 'NOT all within'} {a.rtol:g} relative; "
          f"details in {os.path.join(a.out, 'compare_ort.json')}")
    return 0 if ok_all else 1


if __name__ == "__main__":
    sys.exit(main())
