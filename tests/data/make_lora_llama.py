#!/usr/bin/env python3
"""Writes lora_llama.dynamo.onnx and lora_llama.legacy.onnx, the test models
for PyTorch's parameter names (onnx/param_names.c, tests/test_load.c): a
two-layer Llama-shaped decoder (multi-head attention: the TorchScript
exporter cannot convert grouped-query SDPA) (transformers, random init) with a PEFT LoRA
adapter of rank 2 on q_proj, k_proj, v_proj and o_proj, exported in
training mode by the dynamo exporter (opset 18) and by the TorchScript
exporter (opset 17, TrainingMode.TRAINING, no constant folding: every
initializer keeps its module's name). The dynamo exporter folds the linear
weights' transposes into initializers with generated names (val_N), and
its optimizer merges equal initializers: every lora_B (zeros) into one, every
RMSNorm weight (ones) into one, and takes the equal lora_dropout calls of
q_proj, k_proj and v_proj (dropout 0.05, one input) for one. The script prints the PyTorch model's
parameter figures, which the test checks. Weights of 1 KiB or more are stripped, as in the truth exports.

usage: python3 make_lora_llama.py   (torch 2.15, transformers 5.23, peft 0.21; a CPU)
"""
import os

import onnx
import torch
from peft import LoraConfig, get_peft_model
from transformers import LlamaConfig, LlamaForCausalLM

HERE = os.path.dirname(os.path.abspath(__file__))


class Logits(torch.nn.Module):
    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, input_ids):
        return self.m(input_ids=input_ids).logits


def build():
    torch.manual_seed(0)
    cfg = LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=4, vocab_size=64, attn_implementation="sdpa")
    peft = get_peft_model(LlamaForCausalLM(cfg), LoraConfig(r=2, lora_alpha=4, lora_dropout=0.05,
                                                            target_modules=["q_proj", "k_proj", "v_proj", "o_proj"]))
    return Logits(peft).train()


def strip(path):
    """Weights of 1 KiB or more to absent external data; the stack traces
    out of the node metadata (memest does not read them: a smaller file)."""
    model = onnx.load(path)
    for node in model.graph.node:
        keep = [p for p in node.metadata_props if p.key != "pkg.torch.onnx.stack_trace"]
        del node.metadata_props[:]
        node.metadata_props.extend(keep)
    weights = os.path.basename(path) + ".weights"
    onnx.save_model(model, path, save_as_external_data=True, all_tensors_to_one_file=True, location=weights,
                    size_threshold=1024)
    os.remove(os.path.join(os.path.dirname(path), weights))


def main():
    model = build()
    x = torch.randint(0, 64, (2, 8))
    params = list(model.named_parameters())
    print("parameters", len(params), "elements", sum(p.numel() for _, p in params),
          "lora elements", sum(p.numel() for n, p in params if "lora_" in n))
    dyn = os.path.join(HERE, "lora_llama.dynamo.onnx")
    prog = torch.onnx.export(model, (x,), dynamo=True, opset_version=18, input_names=["input_ids"],
                             output_names=["logits"],
                             dynamic_shapes=({0: torch.export.Dim("batch"), 1: torch.export.Dim("seq")},))
    prog.save(dyn)
    strip(dyn)
    legacy = os.path.join(HERE, "lora_llama.legacy.onnx")
    torch.onnx.export(model, (x,), legacy, dynamo=False, opset_version=17, do_constant_folding=False,
                      training=torch.onnx.TrainingMode.TRAINING,
                      input_names=["input_ids"], output_names=["logits"],
                      dynamic_axes={"input_ids": {0: "batch", 1: "seq"}, "logits": {0: "batch", 1: "seq"}})
    strip(legacy)


if __name__ == "__main__":
    main()
