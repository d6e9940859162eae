#!/usr/bin/env python3
"""Writes the recurrent test models of tests/test_recurrent.c: a tagger over
16-dim steps (x [batch, 10, 16], batch first) with a recurrent module, then a
linear head on every step, exported by both PyTorch exporters in training
mode, weights stripped (memest needs their names, dtypes and dims only):

    lstm2bi.{legacy,dynamo}.onnx  nn.LSTM(16, 32, num_layers=2, bidirectional=True)
    gru2.{legacy,dynamo}.onnx     nn.GRU(16, 32, num_layers=2)
    rnn1.legacy.onnx              nn.RNN(16, 32)  (the dynamo exporter unrolls nn.RNN)

usage: python3 make_rnn.py   (needs torch and onnx; runs on a CPU)
"""
import os

import onnx
import torch

here = os.path.dirname(os.path.abspath(__file__))


class Tagger(torch.nn.Module):
    def __init__(self, rnn):
        super().__init__()
        self.rnn = rnn
        self.head = torch.nn.Linear(rnn.hidden_size * (2 if rnn.bidirectional else 1), 5)

    def forward(self, x):
        y, _ = self.rnn(x)
        return self.head(y)


def strip(path):
    model = onnx.load(path)
    weights = os.path.basename(path) + ".weights"
    onnx.save_model(model, path, save_as_external_data=True, all_tensors_to_one_file=True, location=weights,
                    size_threshold=1024)
    os.remove(os.path.join(os.path.dirname(path), weights))
    if os.path.exists(path + ".data"):  # the dynamo exporter's own external data
        os.remove(path + ".data")


def export(name, rnn, dynamo):
    torch.manual_seed(0)
    model = Tagger(rnn).train()
    x = torch.randn(2, 10, 16)
    path = os.path.join(here, f"{name}.{'dynamo' if dynamo else 'legacy'}.onnx")
    if dynamo:
        torch.onnx.export(model, (x,), path, dynamo=True, input_names=["x"],
                          dynamic_shapes=({0: torch.export.Dim("batch")},), training=torch.onnx.TrainingMode.TRAINING)
    else:
        torch.onnx.export(model, (x,), path, dynamo=False, opset_version=17, input_names=["x"],
                          dynamic_axes={"x": {0: "batch"}}, training=torch.onnx.TrainingMode.TRAINING,
                          do_constant_folding=False)
    strip(path)


for dynamo in (False, True):
    export("lstm2bi", torch.nn.LSTM(16, 32, num_layers=2, bidirectional=True, batch_first=True), dynamo)
    export("gru2", torch.nn.GRU(16, 32, num_layers=2, batch_first=True), dynamo)
export("rnn1", torch.nn.RNN(16, 32, batch_first=True), False)
