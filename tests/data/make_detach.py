#!/usr/bin/env python3
"""Writes detach.dynamo.onnx, the test model for tensor.detach() in dynamo
exports (onnx/onnx_loader.c, detach_from_fx_call; tests/test_finetune.c).

The dynamo exporter writes aten.detach as an Identity whose FX call
(metadata pkg.torch.onnx.fx_node) names it; peft's DoRA detaches its weight
norm that way. The graph, as the exporter writes it (node names, FX calls):

    x [batch, 64] -> Identity (aten.alias) -> xa
    xa -> MatMul W1 [64, 64] -> h
    h -> Sigmoid -> s -> Identity (aten.detach) -> sd
    Mul(h, sd) -> y [batch, 64]

usage: python3 make_detach.py   (onnx; runs anywhere)
"""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

here = os.path.dirname(os.path.abspath(__file__))


def fx(node, call):
    """Adds the FX call metadata the dynamo exporter records."""
    entry = node.metadata_props.add()
    entry.key, entry.value = "pkg.torch.onnx.fx_node", call
    return node


nodes = [
    fx(helper.make_node("Identity", ["x"], ["xa"], name="node_alias"),
       "%alias : [num_users=1] = call_function[target=torch.ops.aten.alias.default](args = (%x,), kwargs = {})"),
    fx(helper.make_node("MatMul", ["xa", "w1"], ["h"], name="node_matmul"),
       "%matmul : [num_users=2] = call_function[target=torch.ops.aten.matmul.default](args = (%alias, %p_w1), "
       "kwargs = {})"),
    fx(helper.make_node("Sigmoid", ["h"], ["s"], name="node_sigmoid"),
       "%sigmoid : [num_users=1] = call_function[target=torch.ops.aten.sigmoid.default](args = (%matmul,), "
       "kwargs = {})"),
    fx(helper.make_node("Identity", ["s"], ["sd"], name="node_detach"),
       "%detach : [num_users=1] = call_function[target=torch.ops.aten.detach.default](args = (%sigmoid,), "
       "kwargs = {})"),
    fx(helper.make_node("Mul", ["h", "sd"], ["y"], name="node_mul"),
       "%mul : [num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%matmul, %detach), "
       "kwargs = {})"),
]
graph = helper.make_graph(
    nodes, "detach",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 64])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 64])],
    [numpy_helper.from_array(np.zeros((64, 64), np.float32), "w1")])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)], producer_name="pytorch")
onnx.checker.check_model(model)
onnx.save(model, os.path.join(here, "detach.dynamo.onnx"))
