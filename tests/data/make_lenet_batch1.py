#!/usr/bin/env python3
"""Writes lenet_batch1.onnx, the test model for --input-shape (tests/test_cli_shapes.c):
models/lenet.onnx with its symbolic batch fixed to 1 in the input and output
shapes, as an export without dynamic axes (the ONNX zoo's batch-1 models)
declares them. The weights stay where models/lenet.onnx has them: memest
never reads them.

usage: python3 make_lenet_batch1.py   (onnx; runs anywhere)
"""
import os

import onnx

here = os.path.dirname(os.path.abspath(__file__))
model = onnx.load(os.path.join(here, "..", "..", "models", "lenet.onnx"), load_external_data=False)
for value in list(model.graph.input) + list(model.graph.output):
    for dim in value.type.tensor_type.shape.dim:
        if dim.HasField("dim_param"):
            dim.dim_value = 1
onnx.save(model, os.path.join(here, "lenet_batch1.onnx"))
