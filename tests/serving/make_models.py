#!/usr/bin/env python3
"""The serving test's models, written with onnx.helper (python3 on PATH, with onnx from scripts/setup.sh):
  batched.onnx  an MLP at batch 4 with two inputs and two outputs, x [4, 16] and bias [4, 8] -> logits and
                probs [4, 8]: every tensor's leading dim is the batch, so it is served with dynamic batching;
  exact.onnx    a reduction over the leading dim, a [3, 5] and b [5] -> total [5] and scaled [3, 5]: no
                batch dim shared by all its tensors, so it is served at its exact shapes;
  gather.onnx   rows [3, 4] of a constant [5, 4] table at ids [3] (int64): ids out of range fail the run in
                nnc's runtime, after Triton has accepted the request.
Usage: make_models.py OUT_DIR"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(0)


def const(name, shape):
    return numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name)


def save(graph, name):
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    onnx.save(model, os.path.join(out, name))


f32 = TensorProto.FLOAT
save(helper.make_graph(
    [helper.make_node("MatMul", ["x", "W1"], ["h"]), helper.make_node("Add", ["h", "b1"], ["h1"]),
     helper.make_node("Relu", ["h1"], ["h2"]), helper.make_node("MatMul", ["h2", "W2"], ["z"]),
     helper.make_node("Add", ["z", "bias"], ["logits"]), helper.make_node("Softmax", ["logits"], ["probs"], axis=-1)],
    "batched", [helper.make_tensor_value_info("x", f32, [4, 16]), helper.make_tensor_value_info("bias", f32, [4, 8])],
    [helper.make_tensor_value_info("logits", f32, [4, 8]), helper.make_tensor_value_info("probs", f32, [4, 8])],
    [const("W1", (16, 32)), const("b1", (32,)), const("W2", (32, 8))]), "batched.onnx")
save(helper.make_graph(
    [helper.make_node("ReduceSum", ["a", "axes"], ["s"], keepdims=0), helper.make_node("Add", ["s", "b"], ["total"]),
     helper.make_node("Mul", ["a", "b"], ["scaled"])],
    "exact", [helper.make_tensor_value_info("a", f32, [3, 5]), helper.make_tensor_value_info("b", f32, [5])],
    [helper.make_tensor_value_info("total", f32, [5]), helper.make_tensor_value_info("scaled", f32, [3, 5])],
    [numpy_helper.from_array(np.array([0], np.int64), "axes")]), "exact.onnx")
save(helper.make_graph(
    [helper.make_node("Gather", ["table", "ids"], ["rows"], axis=0)], "gather",
    [helper.make_tensor_value_info("ids", TensorProto.INT64, [3])], [helper.make_tensor_value_info("rows", f32, [3, 4])],
    [numpy_helper.from_array(np.arange(20, dtype=np.float32).reshape(5, 4), "table")]), "gather.onnx")
