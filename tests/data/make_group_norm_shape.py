#!/usr/bin/env python3
"""Writes group_norm_shape.dynamo.onnx, the test model for an integer
initializer that an FX call reading parameters also reads (onnx/param_names.c;
tests/test_names.c, check_group_norm_shape).

The dynamo exporter decomposes aten.group_norm into a Reshape to
[batch, groups, -1], an InstanceNormalization with a scale of ones and a
bias of zeros per group, a Reshape back, and the module's weight and bias
in a Mul and an Add. Its optimizer shares one int64 shape initializer
("val_5") and the InstanceNormalization's ones and zeros ("val_9",
"val_12") between every GroupNorm. Each node's FX call names its own
GroupNorm's weight and bias placeholders; the shape, the ones and the zeros
are no parameters of the module. The optimizer also merges the two
GroupNorms' weights (both start at one) into "norm1.weight", and their
biases (zeros) into "val_24", which the loader splits back by the FX calls:
the Mul's is the call's first placeholder, the Add's the next one. The
graph, as the exporter writes it (node names, FX calls, scopes):

    per GroupNorm k (module normk), from x [batch, 8, 4]:
    Reshape(val_5 = [0, 1, -1]) -> InstanceNormalization(val_9, val_12)
        -> Mul(norm1.weight, read as normk.weight) -> Add(val_24, read as normk.bias)
    -> y [batch, 1, 32]

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


nodes = []
for k, index in ((1, 6), (2, 29)):
    call, scope = group_norm(f"norm{k}"), f"['', 'norm{k}', 'group_norm']"
    x = "x" if k == 1 else "y1"
    nodes += [
        fx(helper.make_node("Reshape", [x, "val_5"], [f"r{k}"], name=f"node_Reshape_{index}"), call, scope),
        fx(helper.make_node("InstanceNormalization", [f"r{k}", "val_9", "val_12"], [f"i{k}"],
                            name=f"node_InstanceNormalization_{index + 1}"), call, scope),
        fx(helper.make_node("Mul", [f"i{k}", "norm1.weight"], [f"m{k}"], name=f"node_Mul_{index + 2}"), call, scope),
        fx(helper.make_node("Add", [f"m{k}", "val_24"], [f"y{k}"], name=f"node_Add_{index + 3}"), call, scope),
    ]
inits = [numpy_helper.from_array(np.array([0, 1, -1], np.int64), "val_5"),
         numpy_helper.from_array(np.ones(1, np.float32), "val_9"),
         numpy_helper.from_array(np.zeros(1, np.float32), "val_12"),
         numpy_helper.from_array(np.ones(32, np.float32), "norm1.weight"),
         numpy_helper.from_array(np.zeros(32, np.float32), "val_24")]
graph = helper.make_graph(nodes, "group_norm_shape",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8, 4])],
                          [helper.make_tensor_value_info("y2", TensorProto.FLOAT, ["batch", 1, 32])], inits)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], producer_name="pytorch")
onnx.checker.check_model(model)
onnx.save(model, os.path.join(here, "group_norm_shape.dynamo.onnx"))
