#!/usr/bin/env python3
"""Writes rotary_block.dynamo.onnx, the test model for folded tables
(tests/test_fusion.c): a block with rotary position embeddings as in Llama,
exported with torch.onnx.export(dynamo=True) in training mode. The exporter
folds the cos/sin tables (computed from a buffer) into initializers that
multiply activations; memest must not take them for parameters, while the
norm weight and a per-channel scale viewed for broadcasting stay parameters.
Weights of 1 KiB or more are stripped, as in the truth exports.

usage: python3 make_rotary_block.py   (torch 2.11, onnxscript; runs on a CPU)
"""
import os

import onnx
import torch
from torch import nn

D, S = 64, 16


class RotaryBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm_weight = nn.Parameter(torch.ones(D))       # used as is
        self.scale = nn.Parameter(torch.ones(D))             # viewed: [1, 1, D]
        self.q = nn.Linear(D, D)
        self.out = nn.Linear(D, D, bias=False)
        self.register_buffer("inv_freq", 1.0 / 10000 ** (torch.arange(0, D, 2).float() / D), persistent=False)

    def forward(self, x):
        h = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.norm_weight
        q = self.q(h)
        t = torch.arange(S, dtype=torch.float32)
        freqs = torch.outer(t, self.inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos()[None], emb.sin()[None]        # [1, S, D]
        rot = torch.cat((-q[..., D // 2:], q[..., :D // 2]), dim=-1)
        q = q * cos + rot * sin
        return self.out(q * self.scale.view(1, 1, -1))


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    path = os.path.join(here, "rotary_block.dynamo.onnx")
    model = RotaryBlock().train()
    x = torch.randn(2, S, D)
    torch.onnx.export(model, (x,), path, dynamo=True, opset_version=20, input_names=["input"],
                      output_names=["output"], dynamic_shapes={"x": {0: torch.export.Dim("batch")}})
    m = onnx.load(path)
    onnx.save_model(m, path, save_as_external_data=True, all_tensors_to_one_file=True,
                    location="rotary_block.weights", size_threshold=1024)
    os.remove(os.path.join(here, "rotary_block.weights"))
    if os.path.exists(path + ".data"):  # what the exporter wrote first
        os.remove(path + ".data")


if __name__ == "__main__":
    main()
