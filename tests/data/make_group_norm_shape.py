#!/usr/bin/env python3
"""Writes group_norm_shape.dynamo.onnx, the test model for an integer
initializer that an FX call reading parameters also reads (onnx/param_names.c;
tests/test_names.c, check_group_norm_shape).

The dynamo exporter decomposes aten.group_norm into a Reshape to
[batch, groups, -1] and back, and its optimizer shares one int64 shape
initializer ("val_5") between every GroupNorm. Each Reshape's FX call names
its own GroupNorm's weight placeholder; the shape is no parameter and keeps
its values. The optimizer also merges the two GroupNorms' weights (both
start at one) into "norm1.weight", which the loader splits back by the FX
calls. The graph, as the exporter writes it (node names, FX calls, scopes):

    x [batch, 8, 4] -> Reshape(val_5 = [0, 1, -1]) -> r1 -> Mul(norm1.weight) -> h
    h -> Reshape(val_5) -> r2 -> Mul(norm1.weight, read as norm2.weight) -> y [batch, 1, 32]

usage: python3 make_group_norm_shape.py   (onnx; runs anywhere)
"""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

here = os.path.dirname(os.path.abspath(__file__))


def fx(node, call, scope):
    """Adds the FX call and the module scope the dynamo exporter records."""
    for key, value in (("pkg.torch.onnx.fx_node", call), ("pkg.torch.onnx.name_scopes", scope)):
        entry = node.metadata_props.add()
        entry.key, entry.value = key, value
    return node


def group_norm(weight):
    return (f"%group_norm : [num_users=1] = call_function[target=torch.ops.aten.group_norm.default](args = "
            f"(%x, 1, %p_{weight}_weight, %p_{weight}_bias), kwargs = {{}})")


nodes = [
    fx(helper.make_node("Reshape", ["x", "val_5"], ["r1"], name="node_Reshape_6"), group_norm("norm1"),
       "['', 'norm1', 'group_norm']"),
    fx(helper.make_node("Mul", ["r1", "norm1.weight"], ["h"], name="node_Mul_7"), group_norm("norm1"),
       "['', 'norm1', 'group_norm']"),
    fx(helper.make_node("Reshape", ["h", "val_5"], ["r2"], name="node_Reshape_29"), group_norm("norm2"),
       "['', 'norm2', 'group_norm']"),
    fx(helper.make_node("Mul", ["r2", "norm1.weight"], ["y"], name="node_Mul_30"), group_norm("norm2"),
       "['', 'norm2', 'group_norm']"),
]
inits = [numpy_helper.from_array(np.array([0, 1, -1], np.int64), "val_5"),
         numpy_helper.from_array(np.ones(32, np.float32), "norm1.weight")]
graph = helper.make_graph(nodes, "group_norm_shape",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 1, 32])], inits)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], producer_name="pytorch")
onnx.checker.check_model(model)
onnx.save(model, os.path.join(here, "group_norm_shape.dynamo.onnx"))
