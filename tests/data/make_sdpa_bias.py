#!/usr/bin/env python3
"""Writes sdpa_bias.dynamo.onnx, the test model for SDPA calls the dynamo
exporter decomposes without a scaling Mul (tests/test_fusion.c,
check_sdpa_bias): as T5 does, one scaled_dot_product_attention with a scale
of 1, a trainable bias as its mask and a dropout of 0.1, and one with a
constant bias, zeros filled by a Where as T5's cross-attention builds it,
which the exporter folds into a zeros table. Exported in training mode;
weights of 1 KiB or more are stripped, as in the truth exports.

usage: python3 make_sdpa_bias.py   (torch 2.11, onnxscript; runs on a CPU)
"""
import os

import onnx
import torch
from torch import nn
from torch.nn import functional as F

B, S, H, DH = 2, 64, 4, 32
D = H * DH


class BiasAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(D, 3 * D)
        self.qkv2 = nn.Linear(D, 3 * D)
        self.bias = nn.Parameter(torch.zeros(1, H, S, S))  # trains, as T5's position bias
        self.register_buffer("keep", torch.ones(S, S, dtype=torch.bool).tril(), persistent=False)

    def forward(self, x):
        q, k, v = self.qkv(x).view(x.shape[0], S, 3, H, DH).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, attn_mask=self.bias, dropout_p=0.1, scale=1.0)
        q2, k2, v2 = self.qkv2(x).view(x.shape[0], S, 3, H, DH).permute(2, 0, 3, 1, 4)
        cond = self.keep.expand(x.shape[0], 1, S, S)
        fixed = torch.zeros(1, H, S, S).masked_fill(~cond, torch.finfo(torch.float32).min)
        b = F.scaled_dot_product_attention(q2, k2, v2, attn_mask=fixed, scale=1.0)
        return (a + b).transpose(1, 2).reshape(x.shape[0], S, D)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    path = os.path.join(here, "sdpa_bias.dynamo.onnx")
    torch.manual_seed(0)
    model = BiasAttention().train()
    x = torch.randn(B, S, D)
    torch.onnx.export(model, (x,), path, dynamo=True, opset_version=20, input_names=["x"], output_names=["y"],
                      dynamic_shapes={"x": {0: torch.export.Dim("batch", min=2)}}, training=torch.onnx.TrainingMode.TRAINING)
    m = onnx.load(path)
    onnx.save_model(m, path, save_as_external_data=True, all_tensors_to_one_file=True, location="sdpa_bias.weights",
                    size_threshold=1024)
    os.remove(os.path.join(here, "sdpa_bias.weights"))
    if os.path.exists(path + ".data"):  # the exporter's own external data
        os.remove(path + ".data")


if __name__ == "__main__":
    main()
