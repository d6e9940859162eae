#!/usr/bin/env python3
"""Export a Hugging Face model to ONNX from its config alone, for memest.

usage: export_hf.py CONFIG -o OUT.onnx [--task causal-lm|base] [--layers N]
                    [--dtype bfloat16|float32|float16] [--lora R [--lora-targets LIST]
                    [--lora-alpha A] [--lora-dropout P] [--dora]]
                    [--train | --eval] [--attn sdpa|eager] [--seq-example N]
                    [--manifest FILE.json] [--quiet | --verbose]
       export_hf.py --list-presets

CONFIG is a config.json as found in a model repository (or its folder), or a
preset name (--list-presets). No weights are loaded, downloaded or
allocated: the parameters live on PyTorch's meta device, where tensors have a
shape and a dtype and no storage, and the model is exported with
torch.onnx.export(dynamo=True). A Llama-3-8B shape exports in about 75
seconds and 1.1 GB of memory on two CPU cores (docs/exports.md).

The ONNX file has:
- one input, input_ids, int64 [batch, seq], both dims symbolic;
- the outputs of the model's forward under their Hugging Face names (logits
  for causal-lm, last_hidden_state for base, plus pooler_output where the
  model has one);
- every parameter as an initializer named as in model.named_parameters(),
  with its dims and dtype and its data in the external file OUT.onnx.weights,
  which is never written (memest never reads weights;
  onnx.load(OUT, load_external_data=False) loads the file);
- the buffers (rotary frequencies, position ids) with their values.

--manifest writes what PyTorch says about the model (parameter count and
names, trainable ones, buffers) beside what the ONNX file holds, for tests.

Needs torch, transformers, onnx, onnxscript (tested with torch 2.15,
transformers 5.23, onnxscript 0.7) and peft for --lora (0.21). Runs on a CPU.
"""
import argparse
import contextlib
import json
import os
import re
import sys
import time

# Published config.json values (no downloads). Trimmed to the fields that
# shape the model; transformers fills in the rest with its defaults.
# What Llama 3's 8B and 70B config.json files share.
_LLAMA3 = {
    "model_type": "llama", "architectures": ["LlamaForCausalLM"], "vocab_size": 128256,
    "num_key_value_heads": 8, "max_position_embeddings": 8192, "rope_theta": 500000.0, "rms_norm_eps": 1e-05,
    "hidden_act": "silu", "attention_bias": False, "tie_word_embeddings": False, "bos_token_id": 128000,
    "eos_token_id": 128001, "torch_dtype": "bfloat16",
}

PRESETS = {
    # meta-llama/Meta-Llama-3-8B
    "llama-3-8b": {**_LLAMA3, "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
                   "num_attention_heads": 32},
    # meta-llama/Meta-Llama-3-70B
    "llama-3-70b": {**_LLAMA3, "hidden_size": 8192, "intermediate_size": 28672, "num_hidden_layers": 80,
                    "num_attention_heads": 64},
    # Qwen/Qwen2-7B
    "qwen2-7b": {
        "model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"], "vocab_size": 152064,
        "hidden_size": 3584, "intermediate_size": 18944, "num_hidden_layers": 28,
        "num_attention_heads": 28, "num_key_value_heads": 4, "max_position_embeddings": 131072,
        "rope_theta": 1000000.0, "rms_norm_eps": 1e-06, "hidden_act": "silu",
        "sliding_window": 131072, "use_sliding_window": False, "max_window_layers": 28,
        "tie_word_embeddings": False, "bos_token_id": 151643, "eos_token_id": 151643,
        "torch_dtype": "bfloat16",
    },
    # mistralai/Mistral-7B-v0.1
    "mistral-7b": {
        "model_type": "mistral", "architectures": ["MistralForCausalLM"], "vocab_size": 32000,
        "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
        "num_attention_heads": 32, "num_key_value_heads": 8, "max_position_embeddings": 32768,
        "rope_theta": 10000.0, "rms_norm_eps": 1e-05, "hidden_act": "silu", "sliding_window": 4096,
        "tie_word_embeddings": False, "bos_token_id": 1, "eos_token_id": 2,
        "torch_dtype": "bfloat16",
    },
    # openai-community/gpt2
    "gpt2": {
        "model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "vocab_size": 50257,
        "n_embd": 768, "n_layer": 12, "n_head": 12, "n_positions": 1024, "n_ctx": 1024,
        "activation_function": "gelu_new", "attn_pdrop": 0.1, "embd_pdrop": 0.1, "resid_pdrop": 0.1,
        "layer_norm_epsilon": 1e-05, "bos_token_id": 50256, "eos_token_id": 50256,
    },
    # google-bert/bert-base-uncased
    "bert-base": {
        "model_type": "bert", "architectures": ["BertForMaskedLM"], "vocab_size": 30522,
        "hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12,
        "intermediate_size": 3072, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
        "attention_probs_dropout_prob": 0.1, "max_position_embeddings": 512, "type_vocab_size": 2,
        "layer_norm_eps": 1e-12, "pad_token_id": 0,
    },
}

# --lora's default targets: the attention projections, by model type (a
# regular expression is matched by peft against whole module names).
LORA_DEFAULT_TARGETS = {
    "gpt2": r".*\.attn\.(c_attn|c_proj)",
    "bert": r".*\.attention\.(self\.(query|key|value)|output\.dense)",
}
LORA_DEFAULT = "q_proj,k_proj,v_proj,o_proj"

# Sizes the example input takes while tracing; torch.export specialises
# dims of size 0 and 1, so both are above 1.
EXAMPLE_BATCH = 2

# Buffers up to this size are written with their values (memest folds
# what it computes from them, e.g. the rotary tables); larger ones are not.
BUFFER_LIMIT = 16 << 20

# Bytes per element of the ONNX data types a weight can have.
ITEMSIZE = {1: 4, 2: 1, 3: 1, 4: 2, 5: 2, 6: 4, 7: 8, 9: 1, 10: 2, 11: 8, 12: 4, 13: 8, 16: 2}


def load_config_dict(spec):
    if spec in PRESETS:
        return dict(PRESETS[spec])
    if os.path.isdir(spec):
        spec = os.path.join(spec, "config.json")
    if not os.path.isfile(spec):
        raise SystemExit(f"export_hf.py: '{spec}' is neither a config.json nor a preset "
                         f"({', '.join(PRESETS)})")
    with open(spec) as f:
        d = json.load(f)
    if "model_type" not in d:
        raise SystemExit(f"export_hf.py: {spec}: no 'model_type' field")
    return d


def default_task(d):
    archs = d.get("architectures") or []
    if any(a.endswith("ForCausalLM") or a.endswith("LMHeadModel") for a in archs):
        return "causal-lm"
    return "base"


def build_config(d, args):
    from transformers import AutoConfig
    # The dtype is applied to the built model (--dtype).
    d = {k: v for k, v in d.items() if k not in ("transformers_version", "_name_or_path", "torch_dtype", "dtype")}
    model_type = d.pop("model_type")
    cfg = AutoConfig.for_model(model_type, **d)
    cfg.use_cache = False  # no KV cache in a training step (and no cache object in the outputs)
    if args.layers is not None:
        cfg.num_hidden_layers = args.layers
    return cfg


@contextlib.contextmanager
def parameters_on_meta():
    """Every parameter registered inside is moved to the meta device as soon
    as it is registered, before the module initialises it; buffers stay
    where they are made (on the CPU, with their values). A layer's weight is
    briefly an uninitialised CPU tensor, whose pages are never touched."""
    from torch import nn
    register = nn.Module.register_parameter

    def register_on_meta(module, name, param):
        register(module, name, param)
        if param is not None and param.device.type != "meta":
            p = module._parameters[name]
            kwargs = dict(p.__dict__)
            kwargs["requires_grad"] = p.requires_grad
            module._parameters[name] = type(p)(p.to("meta"), **kwargs)

    nn.Module.register_parameter = register_on_meta
    try:
        yield
    finally:
        nn.Module.register_parameter = register


def build_model(cfg, args):
    """The model with its parameters on the meta device and its buffers
    (rotary frequencies, position ids) computed on the CPU, as
    from_pretrained(dtype=...) builds them."""
    import torch
    import transformers
    cls = transformers.AutoModelForCausalLM if args.task == "causal-lm" else transformers.AutoModel
    with parameters_on_meta():
        model = cls.from_config(cfg, attn_implementation=args.attn, dtype=getattr(torch, args.dtype))
        if args.lora:
            from peft import LoraConfig, get_peft_model
            targets = args.lora_targets
            if targets is None:
                targets = LORA_DEFAULT_TARGETS.get(cfg.model_type, LORA_DEFAULT)
            if targets == "all-linear":
                target_modules = "all-linear"
            elif "," in targets or re.fullmatch(r"[A-Za-z0-9_.]+", targets):
                target_modules = [t for t in targets.split(",") if t]
            else:
                target_modules = targets  # a regular expression
            lcfg = LoraConfig(r=args.lora, lora_alpha=args.lora_alpha if args.lora_alpha else 2 * args.lora,
                              lora_dropout=args.lora_dropout, target_modules=target_modules, use_dora=args.dora,
                              task_type="CAUSAL_LM" if args.task == "causal-lm" else "FEATURE_EXTRACTION")
            # peft keeps the adapters in float32 under a bfloat16 model
            # (autocast_adapter_dtype), as in training.
            model = get_peft_model(model, lcfg)
    model.train(not args.eval)
    for name, p in model.named_parameters():
        if p.device.type != "meta":
            raise SystemExit(f"export_hf.py: parameter {name} is on {p.device}, not on the meta device")
    return model


def take_buffers(model):
    """Moves every buffer to the meta device (torch.export traces one
    device) and returns their values by name, to be written into the ONNX
    file. Buffers too large to embed stay data-less, like the weights."""
    import torch
    values = {}
    for mod_name, mod in model.named_modules():
        for name, b in list(mod._buffers.items()):
            if b is None:
                continue
            if b.device.type != "meta" and b.numel() * b.element_size() <= BUFFER_LIMIT:
                values[f"{mod_name}.{name}" if mod_name else name] = b.detach().clone()
            mod._buffers[name] = b.to("meta")
    return values


def to_ir_tensor(t, name):
    import numpy as np
    import onnx_ir as ir
    import torch
    if t.dtype == torch.bfloat16:
        import ml_dtypes
        return ir.Tensor(t.view(torch.int16).numpy().view(ml_dtypes.bfloat16), name=name)
    return ir.Tensor(np.ascontiguousarray(t.numpy()), name=name)


@contextlib.contextmanager
def single_output_rewrites():
    """Leaves onnxscript's rewrite rules whose pattern ends in several nodes
    (SlicesSplit: the two Slices of rotate_half into one Split) out of the
    optimizer. Such a rule is tried on every combination of candidate nodes
    and rebuilds an index of the whole graph for each one: quadratic, 100 of
    the 165 seconds of a Llama-3-8B export, where it rewrote nothing."""
    try:
        import onnxscript.rewriter as rewriter
        rules = rewriter._DEFAULT_REWRITE_RULES
        kept = tuple(r for r in rules
                     if getattr(getattr(r, "_target_pattern", None), "has_single_output_node", True))
    except (ImportError, AttributeError, TypeError):
        yield
        return
    rewriter._DEFAULT_REWRITE_RULES = kept
    try:
        yield
    finally:
        rewriter._DEFAULT_REWRITE_RULES = rules


def export(model, args):
    import onnx_ir as ir
    import onnxscript.optimizer
    import torch

    buffers = take_buffers(model)
    t0 = time.time()
    ids = torch.zeros(EXAMPLE_BATCH, args.seq_example, dtype=torch.long, device="meta")
    dims = {0: torch.export.Dim("batch", min=1), 1: torch.export.Dim("seq", min=1)}
    # optimize=False: the optimizer's constant folding would read weights,
    # which have no data. It runs below, with the weights taken out.
    prog = torch.onnx.export(model, (), kwargs={"input_ids": ids}, dynamo=True, input_names=["input_ids"],
                             dynamic_shapes={"input_ids": dims}, optimize=False, verbose=False)
    graph = prog.model.graph
    t1 = time.time()
    output_names = output_keys(prog.exported_program)
    if output_names and len(output_names) == len(graph.outputs):
        for value, name in zip(graph.outputs, output_names):
            value.name = name
    else:
        output_names = [v.name for v in graph.outputs]
    # Every parameter and buffer is an initializer holding a meta tensor.
    # Buffers get their values back. While the optimizer runs, the weights are
    # graph inputs: nothing folds them, and identical weights are not merged
    # into one (DeduplicateInitializersPass would, on real data), so each
    # keeps its module path as its name.
    lifted = []
    for name, value in list(graph.initializers.items()):
        raw = getattr(value.const_value, "raw", None)
        if not (isinstance(raw, torch.Tensor) and raw.device.type == "meta"):
            continue
        if name in buffers:
            value.const_value = to_ir_tensor(buffers[name], name)
            continue
        graph.initializers.pop(name)
        value.const_value = None
        graph.inputs.append(value)
        lifted.append(name)
    t2 = time.time()
    with single_output_rewrites():
        onnxscript.optimizer.optimize_ir(prog.model)
    try:  # what ONNXProgram.optimize() runs after optimize_ir
        import onnxscript.rewriter.onnx_fusions
        onnxscript.rewriter.onnx_fusions.fuse(prog.model)
    except ImportError:
        pass
    if args.verbose:
        print(f"torch.onnx.export {t1 - t0:.1f} s, optimizer {time.time() - t2:.1f} s", file=sys.stderr)
    return ir.serde.serialize_model(prog.model), set(lifted), output_names


def output_keys(program):
    """The names of the forward's outputs: the keys of the ModelOutput it
    returns (logits, last_hidden_state, ...), from the exported program's
    output tree; None when the outputs are not a flat mapping."""
    spec = program.call_spec.out_spec
    try:
        keys = spec.context
        if isinstance(keys, (list, tuple)) and len(keys) == spec.num_leaves and all(
                isinstance(k, str) for k in keys):
            return list(keys)
        # a ModelOutput registered as a pytree node stores (type, keys) or keys
        if isinstance(keys, tuple) and len(keys) == 2 and isinstance(keys[1], (list, tuple)):
            if len(keys[1]) == spec.num_leaves:
                return [str(k) for k in keys[1]]
    except AttributeError:
        pass
    return None


def finish(proto, lifted, out_path):
    """Turns the lifted weights back into initializers whose data lies in an
    external file that is never written, names the input dims batch and seq."""
    import onnx

    location = os.path.basename(out_path) + ".weights"
    offset = 0
    keep = []
    inits = []
    for vi in proto.graph.input:
        if vi.name not in lifted:
            keep.append(vi)
            continue
        tt = vi.type.tensor_type
        dims = [d.dim_value for d in tt.shape.dim]
        if any(not d.HasField("dim_value") for d in tt.shape.dim):
            raise SystemExit(f"export_hf.py: weight {vi.name} has a symbolic dim")
        t = onnx.TensorProto(name=vi.name, data_type=tt.elem_type, dims=dims)
        n = 1
        for d in dims:
            n *= d
        length = n * ITEMSIZE[tt.elem_type]
        t.data_location = onnx.TensorProto.EXTERNAL
        for k, v in (("location", location), ("offset", str(offset)), ("length", str(length))):
            e = t.external_data.add()
            e.key, e.value = k, v
        offset += (length + 63) // 64 * 64
        inits.append(t)
    del proto.graph.input[:]
    proto.graph.input.extend(keep)
    proto.graph.initializer.extend(inits)

    names = ("batch", "seq")
    for vi in proto.graph.input:
        if vi.name != "input_ids":
            continue
        renamed = {}
        for k, d in enumerate(vi.type.tensor_type.shape.dim):
            if d.HasField("dim_value") or k >= len(names):
                raise SystemExit(f"export_hf.py: input_ids dim {k} is not symbolic")
            renamed[d.dim_param] = names[k]
            d.dim_param = names[k]
        # Outputs and value_info name the same symbols.
        for v in list(proto.graph.output) + list(proto.graph.value_info):
            for d in v.type.tensor_type.shape.dim:
                if d.HasField("dim_param") and d.dim_param in renamed:
                    d.dim_param = renamed[d.dim_param]
    onnx.save_model(proto, out_path)
    return offset


def manifest(model, proto, args, cfg, seconds, out_path, weight_bytes, output_names):
    params = dict(model.named_parameters())
    # Tied weights (GPT-2's lm_head and wte) are one parameter under several
    # names; the ONNX file uses one of them.
    aliases = {}
    for name, p in model.named_parameters(remove_duplicate=False):
        aliases.setdefault(id(p), []).append(name)
    buffers = dict(model.named_buffers())
    inits = {t.name for t in proto.graph.initializer}
    in_dims = [[d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim] for i in proto.graph.input]
    dtypes = {}
    for p in params.values():
        key = str(p.dtype).replace("torch.", "")
        dtypes[key] = dtypes.get(key, 0) + p.numel()
    return {
        "config": args.config,
        "model_type": cfg.model_type,
        "task": args.task,
        "class": type(model).__name__,
        "dtype": args.dtype,
        "train": not args.eval,
        "num_hidden_layers": cfg.num_hidden_layers,
        "lora": args.lora or None,
        "dora": bool(args.dora),
        "parameters": sum(p.numel() for p in params.values()),
        "trainable_parameters": sum(p.numel() for p in params.values() if p.requires_grad),
        "parameter_dtypes": dtypes,
        "parameter_names": {n: list(p.shape) for n, p in params.items()},
        "tied": {names[0]: names[1:] for names in aliases.values() if len(names) > 1},
        "trainable_names": [n for n, p in params.items() if p.requires_grad],
        "buffers": {n: {"shape": list(b.shape), "dtype": str(b.dtype).replace("torch.", ""), "in_onnx": n in inits}
                    for n, b in buffers.items()},
        "parameters_missing_from_onnx": [n for n, p in params.items()
                                         if not any(a in inits for a in aliases[id(p)])],
        "onnx": {
            "path": out_path,
            "bytes": os.path.getsize(out_path),
            "nodes": len(proto.graph.node),
            "initializers": len(proto.graph.initializer),
            "inputs": {i.name: d for i, d in zip(proto.graph.input, in_dims)},
            "outputs": output_names,
            "weight_bytes_absent": weight_bytes,
        },
        "export_seconds": round(seconds, 2),
    }


def main(argv=None):
    parts = __doc__.split("\n\n")
    ap = argparse.ArgumentParser(description=parts[0], epilog="\n\n".join(parts[2:]),
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("config", nargs="?", help="config.json (or its folder), or a preset name")
    ap.add_argument("-o", "--output", help="the ONNX file to write")
    ap.add_argument("--list-presets", action="store_true", help="print the preset names and exit")
    ap.add_argument("--task", choices=("causal-lm", "base"),
                    help="causal-lm: AutoModelForCausalLM (output logits); base: AutoModel "
                         "(last_hidden_state); default from the config's architectures")
    ap.add_argument("--layers", type=int, help="override num_hidden_layers")
    ap.add_argument("--dtype", choices=("bfloat16", "float32", "float16"), default="bfloat16",
                    help="dtype of the weights (default bfloat16); peft keeps LoRA adapters in float32")
    ap.add_argument("--lora", type=int, default=0, metavar="R", help="add LoRA adapters of rank R (peft)")
    ap.add_argument("--lora-targets", metavar="LIST",
                    help=f"comma-separated module names, all-linear, or a regular expression "
                         f"(default: the attention projections, {LORA_DEFAULT} for Llama-like models)")
    ap.add_argument("--lora-alpha", type=float, help="LoRA alpha (default 2R)")
    ap.add_argument("--lora-dropout", type=float, default=0.0, help="LoRA dropout (default 0)")
    ap.add_argument("--dora", action="store_true", help="DoRA (peft use_dora=True); needs --lora")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--train", action="store_true", help="export in train mode, dropout kept (default)")
    mode.add_argument("--eval", action="store_true", help="export in eval mode")
    ap.add_argument("--attn", choices=("sdpa", "eager"), default="sdpa",
                    help="transformers attn_implementation (default sdpa)")
    ap.add_argument("--seq-example", type=int, default=16, help="sequence length traced (default 16)")
    ap.add_argument("--manifest", metavar="FILE.json", help="write the model's parameter count and names")
    ap.add_argument("--quiet", action="store_true", help="print nothing but errors")
    ap.add_argument("--verbose", action="store_true", help="print the time of each step")
    args = ap.parse_args(argv)

    if args.list_presets:
        print("\n".join(PRESETS))
        return 0
    if not args.config or not args.output:
        ap.error("CONFIG and -o OUT.onnx are required")
    if args.dora and not args.lora:
        ap.error("--dora needs --lora R")
    if args.seq_example < 2:
        ap.error("--seq-example must be at least 2")

    import warnings
    warnings.filterwarnings("ignore", message=".*training mode.*")
    t0 = time.time()
    d = load_config_dict(args.config)
    if args.task is None:
        args.task = default_task(d)
    cfg = build_config(d, args)
    t_build = time.time()
    model = build_model(cfg, args)
    if args.verbose:
        print(f"imports and config {t_build - t0:.1f} s, model on the meta device {time.time() - t_build:.1f} s",
              file=sys.stderr)
    proto, lifted, output_names = export(model, args)
    weight_bytes = finish(proto, lifted, args.output)
    seconds = time.time() - t0
    m = manifest(model, proto, args, cfg, seconds, args.output, weight_bytes, output_names)
    if args.manifest:
        with open(args.manifest, "w") as f:
            json.dump(m, f, indent=1)
            f.write("\n")
    if not args.quiet:
        print(f"wrote {args.output}: {type(model).__name__} ({cfg.model_type}, {cfg.num_hidden_layers} layers, "
              f"{args.dtype}, {'train' if not args.eval else 'eval'}), {m['parameters']:,} parameters"
              + (f" ({m['trainable_parameters']:,} trainable)" if args.lora else "")
              + f"; {m['onnx']['nodes']} nodes, {m['onnx']['initializers']} initializers, "
              f"{m['onnx']['bytes'] / 2**20:.1f} MiB; weights ({weight_bytes / 2**30:.2f} GiB) not written; "
              f"{seconds:.1f} s")
        if m["parameters_missing_from_onnx"]:
            print(f"note: {len(m['parameters_missing_from_onnx'])} parameters are not in the graph "
                  f"(unused by its outputs), e.g. {m['parameters_missing_from_onnx'][0]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
