#!/usr/bin/env python3
"""Export the models of finetune_zoo.py (one file per distinct graph: a base
network with its adapters, not per batch) to ONNX, in train mode, for
compare_finetune.py.

usage: export_finetune.py OUT_DIR [--only MODEL,...] [--exporters dynamo,dynamo-opt,legacy] [--tiny] [--meta]

Writes OUT_DIR/<model>.<export>.onnx (<model>.bf16.<export>.onnx for a model
whose cases train in bfloat16: it is built and exported in bfloat16) and
OUT_DIR/exports.json (per model and
exporter: ok or the error, seconds, initializer counts, and how many
initializers memest's --trainable pattern of the model's cases names beside
how many parameters PyTorch trains):

  dynamo      torch.onnx.export(dynamo=True, optimize=False), opset 20, from
              model.train(). optimize=False keeps every parameter an initializer
              under its named_parameters() name: the exporter's optimizer folds
              Transpose(weight) of each MatMul weight (and what DoRA computes
              from its weights) into new constants named val_<n>, which loses
              the LoRA weights' names (gpt2.lora_attn_r8: 0 of 24 left).
  dynamo-opt  the same program after the exporter's default optimizer
              (ONNXProgram.optimize(), what export.py's dynamo exports get).
  legacy      the TorchScript exporter, opset 18, TrainingMode.TRAINING,
              do_constant_folding=False, dynamic_axes batch/seq.

The input is input_ids (batch, seq) for the token models, input (batch, 3,
224, 224) for resnet50; the dynamic dims are named batch and seq. Exported
at batch 2, seq 16. As in export.py, initializers of 1 KiB or more are written
as external data to <file>.weights, which does not exist: memest needs only
their names, dtypes and dims. The stubs are written without ever
serialising the weights.

The 8B model (llama8b.*) is built on the meta device and exported from there
(torch 2.15 has no torch.onnx.enable_fake_mode), so no weight is materialised;
its initializers are all stubs. Its dynamo-opt export is skipped (the
optimizer's constant folding needs the weights' values: it would transpose 32
GB of them) and so is its legacy export (the TorchScript exporter runs the
model). --meta exports every model that way.
"""
import argparse
import json
import math
import os
import sys
import time
import traceback

import onnx
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import finetune_zoo as fz  # noqa: E402

EXPORT_BATCH, EXPORT_SEQ = 2, 16  # torch.export specialises 0, 1 and equal sizes
EXPORTERS = ("dynamo", "dynamo-opt", "legacy")
MAX_SEQ = {"gpt2": 1024, "bert": 512}


def is_fake(t):
    from torch._subclasses.fake_tensor import FakeTensor
    raw = getattr(t, "raw", None)
    return isinstance(raw, FakeTensor) or (isinstance(raw, torch.Tensor) and raw.device.type == "meta")


def save_stubbed(ir_model, path):
    """Save an onnx_ir model with every initializer of 1 KiB or more (and every
    fake one) as external data in <path>.weights, which is not written."""
    import onnx_ir as ir
    inits = dict(ir_model.graph.initializers)
    ir_model.graph.initializers.clear()
    try:
        proto = ir.serde.serialize_model(ir_model)
    finally:
        ir_model.graph.initializers.update(inits)
    location = os.path.basename(path) + ".weights"
    offset = 0
    for name, v in inits.items():
        t = v.const_value
        shape = [int(d) for d in v.shape]
        nbytes = v.dtype.itemsize * math.prod(shape)
        if t is not None and not is_fake(t) and nbytes < 1024:
            tp = ir.serde.serialize_tensor(t)
            tp.name = name  # a folded constant's tensor may carry no name of its own
            proto.graph.initializer.append(tp)
            continue
        tp = onnx.TensorProto(name=name, data_type=int(v.dtype), dims=shape)
        tp.data_location = onnx.TensorProto.EXTERNAL
        for k, val in (("location", location), ("offset", str(offset)), ("length", str(nbytes))):
            e = tp.external_data.add()
            e.key, e.value = k, val
        offset += (nbytes + 4095) // 4096 * 4096
        proto.graph.initializer.append(tp)
    onnx.save_model(proto, path)


def dims(model_id):
    fam = fz.MODELS[model_id][0]
    if fz.FAMILIES[fam]["kind"] == "image":
        return ({0: torch.export.Dim("batch")},), {0: "batch"}, {0: "batch"}
    seq = torch.export.Dim("seq", min=2, max=MAX_SEQ.get(fam, 8192))
    return ({0: torch.export.Dim("batch"), 1: seq},), {0: "batch", 1: "seq"}, {0: "batch", 1: "seq"}


def export_dynamo(model, x, model_id, paths):
    """paths: {"dynamo": path or None, "dynamo-opt": path or None}; returns the
    seconds each took (dynamo-opt: the export and the optimizer)."""
    t0 = time.time()
    shapes, _, _ = dims(model_id)
    prog = torch.onnx.export(model, (x,), dynamo=True, opset_version=20, optimize=False,
                             input_names=[fz.input_name(model_id)], output_names=["output"], dynamic_shapes=shapes)
    t_export = time.time() - t0
    secs = {}
    if paths.get("dynamo"):
        save_stubbed(prog.model, paths["dynamo"])
        secs["dynamo"] = round(time.time() - t0, 1)
    if paths.get("dynamo-opt"):
        t1 = time.time()
        prog.optimize()
        save_stubbed(prog.model, paths["dynamo-opt"])
        secs["dynamo-opt"] = round(t_export + time.time() - t1, 1)
    return secs


def export_legacy(model, x, model_id, path):
    """The TorchScript exporter prints the whole graph when an op has no
    symbolic: its output goes to path + ".log", removed afterwards."""
    import contextlib
    import onnx_ir as ir
    _, din, dout = dims(model_id)
    name = fz.input_name(model_id)
    tmp = path + ".full.onnx"
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    try:
        with open(path + ".log", "w") as log:
            os.dup2(log.fileno(), 1)
            os.dup2(log.fileno(), 2)
            with contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
                torch.onnx.export(model, (x,), tmp, dynamo=False, opset_version=18,
                                  training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                                  input_names=[name], output_names=["output"], dynamic_axes={name: din, "output": dout})
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        os.close(saved[0])
        os.close(saved[1])
        os.remove(path + ".log")
    try:
        save_stubbed(ir.load(tmp), path)
    finally:
        for p in (tmp, tmp + ".data"):
            if os.path.exists(p):
                os.remove(p)


def check(path, model_id, trainable_names):
    """Initializer counts of an export, and, for each --trainable pattern of the
    model's cases (None: every parameter trains), how many initializers it
    names beside how many parameters PyTorch trains, and which of those are
    not initializers of the export under their PyTorch names."""
    m = onnx.load(path, load_external_data=False)
    names = [i.name for i in m.graph.initializer]
    out = {"initializers": len(names), "nodes": len(m.graph.node), "bytes": os.path.getsize(path),
           "input": [(i.name, [d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim])
                     for i in m.graph.input],
           "output": [(o.name, [d.dim_param or d.dim_value for d in o.type.tensor_type.shape.dim])
                      for o in m.graph.output]}
    for pat, want in trainable_names.items():
        got = [n for n in names if fz.matches(pat, n)] if pat else [n for n in names if n in set(want)]
        out[f"trainable[{pat or '(all)'}]"] = {"pattern_matches": len(got), "pytorch_trainable": len(want),
                                               "missing": sorted(set(want) - set(names))[:5],
                                               "n_missing": len(set(want) - set(names))}
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--only", default="")
    ap.add_argument("--exporters", default=",".join(EXPORTERS))
    ap.add_argument("--tiny", action="store_true", help="small dims of the same structure (a quick check)")
    ap.add_argument("--meta", action="store_true", help="build and export every model on the meta device")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    exporters = a.exporters.split(",")
    used = []  # (model, dtype): a model trained in bfloat16 is exported from bfloat16
    for c in fz.CASES:
        if (c["model"], c["dtype"]) not in used:
            used.append((c["model"], c["dtype"]))
    names = [(m, dt) for m, dt in used if not a.only or m in a.only.split(",")]
    summary_path = os.path.join(a.out, "exports.json")
    summary = json.load(open(summary_path)) if os.path.exists(summary_path) else {}
    summary["_software"] = {"torch": torch.__version__, "onnx": onnx.__version__}
    for mod in ("transformers", "peft", "onnxscript", "torchvision"):
        try:
            summary["_software"][mod] = __import__(mod).__version__
        except ImportError:
            pass
    failed = 0
    t_all = time.time()
    for mid, dtype in names:
        meta = a.meta or (mid.startswith("llama8b") and not a.tiny)
        stem = fz.export_name(mid, dtype)
        todo = {e: os.path.join(a.out, f"{stem}.{e}.onnx") for e in exporters}
        todo = {e: p for e, p in todo.items() if not os.path.exists(p)}
        if not todo:
            continue
        rec = summary.setdefault(stem, {})
        t0 = time.time()
        model = fz.build(mid, tiny=a.tiny, device="meta" if meta else "cpu", dtype=fz.TORCH_DTYPE[dtype])
        cases = [c for c in fz.CASES if c["model"] == mid and c["dtype"] == dtype]
        trainable = {}
        for c in cases:
            fz.set_trainable(model, c)
            trainable[c["trainable"]] = [n for n, p in model.named_parameters() if p.requires_grad]
        for p in model.parameters():  # export with every parameter trainable: one graph for all cases
            p.requires_grad_(True)
        model.train()
        x = fz.make_input(mid, EXPORT_BATCH, EXPORT_SEQ, tiny=a.tiny, device="meta" if meta else "cpu")
        build_s = time.time() - t0
        dyn = {e: todo[e] for e in ("dynamo", "dynamo-opt") if e in todo}
        if meta and "dynamo-opt" in dyn:
            del dyn["dynamo-opt"]
            rec["dynamo-opt"] = {"ok": False, "error": "skipped: built on the meta device, and the optimizer's "
                                                        "constant folding needs the weights' values"}
        if dyn:
            t1 = time.time()
            try:
                secs = export_dynamo(model, x, mid, dyn)
                for e, p in dyn.items():
                    rec[e] = {"ok": True, "secs": secs[e], **check(p, mid, trainable)}
                    print(f"exported {p} ({secs[e]:.1f} s)", flush=True)
            except Exception as ex:
                failed += 1
                for e, p in dyn.items():
                    rec[e] = {"ok": False, "secs": round(time.time() - t1, 1), "error": repr(ex)[:400]}
                    if os.path.exists(p):
                        os.remove(p)
                print(f"FAILED dynamo {mid}\n{traceback.format_exc(limit=4)}", flush=True)
        if "legacy" in todo:
            t1 = time.time()
            if meta:
                rec["legacy"] = {"ok": False, "error": "skipped: the TorchScript exporter needs real weights "
                                                       "(built on the meta device)"}
            else:
                try:
                    export_legacy(model, x, mid, todo["legacy"])
                    rec["legacy"] = {"ok": True, "secs": round(time.time() - t1, 1),
                                     **check(todo["legacy"], mid, trainable)}
                    print(f"exported {todo['legacy']} ({time.time() - t1:.1f} s)", flush=True)
                except Exception as ex:
                    failed += 1
                    rec["legacy"] = {"ok": False, "secs": round(time.time() - t1, 1),
                                     "error": (type(ex).__name__ + ": " + str(ex).strip().splitlines()[-1])[:400]}
                    if os.path.exists(todo["legacy"]):
                        os.remove(todo["legacy"])
                    print(f"FAILED legacy {mid}: {rec['legacy']['error']}", flush=True)
        rec["build_secs"] = round(build_s, 1)
        del model, x
        print(f"{stem}: {time.time() - t0:.1f} s", flush=True)
        with open(summary_path, "w") as f:
            json.dump(summary, f, indent=1)
    print(f"all: {time.time() - t_all:.1f} s, {failed} failed", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
