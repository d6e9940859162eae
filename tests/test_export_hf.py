#!/usr/bin/env python3
"""test_export_hf: scripts/export_hf.py exports a Hugging Face model from its
config alone, and memest reads the result.

A two-layer Llama config (hidden size 64) with LoRA adapters of rank 4 is
exported with --manifest (what PyTorch says about the model); the test checks
that
- input_ids has two symbolic dims named batch and seq, and logits keeps them;
- every parameter named by model.named_parameters() is an initializer of that
  name, with its dims and dtype and no data (external data in a file that
  does not exist);
- the LoRA adapters are there (lora_A, lora_B) in float32 beside bfloat16
  base weights, as peft keeps them;
- memest loads the file, estimates it, and counts the parameters PyTorch
  counts (a memest that cannot tell the exporter's buffers from parameters
  adds the float buffers in the graph, Llama's rotary inv_freq).

usage: test_export_hf.py MEMEST EXPORT_HF_PY TMP_DIR
Exits 77 (skipped) where torch, transformers, peft, onnx or onnxscript
cannot be imported.
"""
import importlib.util
import json
import os
import subprocess
import sys

SKIP = 77


def fail(msg):
    print(f"FAIL: {msg}")
    sys.exit(1)


def main():
    if len(sys.argv) != 4:
        print(__doc__)
        return 2
    memest, script, tmp = sys.argv[1:]
    missing = [m for m in ("torch", "transformers", "peft", "onnx", "onnxscript")
               if importlib.util.find_spec(m) is None]
    if missing:
        print(f"skipped: cannot import {', '.join(missing)}")
        return SKIP
    import onnx

    os.makedirs(tmp, exist_ok=True)
    config = os.path.join(tmp, "export_hf_tiny_llama.json")
    with open(config, "w") as f:
        json.dump({"model_type": "llama", "architectures": ["LlamaForCausalLM"], "vocab_size": 512,
                   "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
                   "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 256,
                   "tie_word_embeddings": False}, f)
    out = os.path.join(tmp, "export_hf_tiny_llama.onnx")
    man_path = os.path.join(tmp, "export_hf_tiny_llama.manifest.json")
    for p in (out, man_path):
        if os.path.exists(p):
            os.remove(p)
    r = subprocess.run([sys.executable, script, config, "-o", out, "--lora", "4", "--dtype", "bfloat16",
                        "--manifest", man_path], capture_output=True, text=True)
    print(r.stdout, end="")
    if r.returncode != 0:
        print(r.stderr)
        fail(f"export_hf.py exited {r.returncode}")
    with open(man_path) as f:
        man = json.load(f)

    model = onnx.load(out, load_external_data=False)
    g = model.graph

    # (a) input_ids [batch, seq], symbolic; logits [batch, seq, vocab].
    inputs = {i.name: i for i in g.input}
    if list(inputs) != ["input_ids"]:
        fail(f"graph inputs are {list(inputs)}, not ['input_ids']")
    dims = inputs["input_ids"].type.tensor_type.shape.dim
    if [d.dim_param for d in dims] != ["batch", "seq"] or any(d.HasField("dim_value") for d in dims):
        fail(f"input_ids dims are {[str(d).strip() for d in dims]}, not symbolic batch, seq")
    if inputs["input_ids"].type.tensor_type.elem_type != onnx.TensorProto.INT64:
        fail("input_ids is not int64")
    outputs = [o.name for o in g.output]
    if outputs != ["logits"]:
        fail(f"graph outputs are {outputs}, not ['logits']")
    odims = [d.dim_param or d.dim_value for d in g.output[0].type.tensor_type.shape.dim]
    if odims != ["batch", "seq", 512]:
        fail(f"logits dims are {odims}")

    # Every parameter is a data-less initializer under its PyTorch name.
    inits = {t.name: t for t in g.initializer}
    params = man["parameter_names"]
    if man["parameters_missing_from_onnx"]:
        fail(f"parameters missing from the ONNX file: {man['parameters_missing_from_onnx'][:5]}")
    base = os.path.dirname(out)
    for name, shape in params.items():
        t = inits.get(name)
        if t is None:
            fail(f"no initializer named {name}")
        if list(t.dims) != shape:
            fail(f"{name}: dims {list(t.dims)}, PyTorch shape {shape}")
        if t.raw_data or t.float_data or t.int32_data or t.int64_data:
            fail(f"{name}: the initializer holds data")
        if t.data_location != onnx.TensorProto.EXTERNAL:
            fail(f"{name}: not marked external")
        loc = {e.key: e.value for e in t.external_data}.get("location")
        if not loc or os.path.exists(os.path.join(base, loc)):
            fail(f"{name}: external location {loc!r} is missing or exists")
    # (c) the adapters, float32 beside bfloat16 base weights.
    lora_a = [n for n in inits if "lora_A" in n]
    lora_b = [n for n in inits if "lora_B" in n]
    if len(lora_a) != 2 * 4 or len(lora_b) != 2 * 4:  # q, k, v, o in 2 layers
        fail(f"{len(lora_a)} lora_A and {len(lora_b)} lora_B initializers, expected 8 each")
    if any(inits[n].data_type != onnx.TensorProto.FLOAT for n in lora_a + lora_b):
        fail("LoRA weights are not float32")
    if inits["base_model.model.model.layers.0.self_attn.q_proj.base_layer.weight"].data_type != onnx.TensorProto.BFLOAT16:
        fail("base weights are not bfloat16")
    lora_numel = sum(shape[0] * shape[1] for n, shape in params.items() if "lora_" in n)
    if man["trainable_parameters"] != lora_numel or lora_numel != 2 * (512 + 384 + 384 + 512):
        fail(f"trainable parameters {man['trainable_parameters']} are not the LoRA weights ({lora_numel})")

    # (b) memest loads it, estimates it and counts PyTorch's parameters.
    float_buffers = 0
    for name, b in man["buffers"].items():
        if b["in_onnx"] and b["dtype"].startswith(("float", "bfloat")):
            n = 1
            for d in b["shape"]:
                n *= d
            float_buffers += n
    r = subprocess.run([memest, out, "--batch", "2", "--dim", "seq=32", "--dtype", "bfloat16",
                        "--optimizer", "adamw", "--format", "json"], capture_output=True, text=True)
    if r.returncode != 0:
        fail(f"memest exited {r.returncode}: {r.stderr.strip()}")
    rep = json.loads(r.stdout)
    got = rep["totals"]["param_count"]
    got_buffers = rep["totals"].get("buffer_count", 0)
    # A memest that tells the exporter's buffers from parameters counts
    # PyTorch's parameters exactly; one that does not takes the float
    # buffers (inv_freq) for parameters. Either way nothing is lost or added.
    if got + got_buffers != man["parameters"] + float_buffers:
        fail(f"memest counts {got} parameters and {got_buffers} buffer elements; PyTorch {man['parameters']} "
             f"parameters and {float_buffers} float buffer elements in the graph")
    if got_buffers == float_buffers and got != man["parameters"]:
        fail(f"memest counts {got} parameters, PyTorch {man['parameters']}")
    if rep["dims"] != {"batch": 2, "seq": 32}:
        fail(f"memest bound dims {rep['dims']}")
    if not rep["totals"]["peak_bytes"] > 0 or rep["outputs"][0]["shape"] != [2, 32, 512]:
        fail("memest's estimate is empty or its logits have the wrong shape")
    # The table report too.
    r = subprocess.run([memest, out, "--batch", "1", "--dim", "seq=16"], capture_output=True, text=True)
    if r.returncode != 0 or "PEAK" not in r.stdout:
        fail(f"memest's table report exited {r.returncode}")
    print(f"ok: {len(params)} parameters ({man['parameters']}), {len(lora_a)} lora_A, memest counts {got}, "
          f"peak {rep['totals']['peak_bytes']} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
