"""Small ONNX models built with onnx.helper for the plain-ONNX (`--runtime winml`) tests.

Each builder writes the model to ``path`` and returns the path. Weights are seeded, so two calls
make byte-identical files.

* ``mlp``: x float32 [1, 8] -> MatMul/Add/Relu/MatMul/Add -> y float32 [1, 4] (all shapes fixed).
* ``dynamic_batch``: the same MLP with x ['batch', 8] -> y ['batch', 4].
* ``multi_io``: three inputs, three outputs, a non-batch dynamic dimension ``seq`` shared by two inputs:
  features float32 ['batch', 'seq', 4], scale float32 [1], ids int64 ['batch', 'seq'] ->
  scaled = features * scale, total = ReduceSum(features, axis 2), ids_next = ids + 1.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
IR_VERSION = 8


def _save(graph: onnx.GraphProto, path: Path) -> Path:
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="winml-perf-tests")
    model.ir_version = IR_VERSION
    onnx.checker.check_model(model)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))
    return path


def _mlp_graph(batch_dim, name: str) -> onnx.GraphProto:
    rng = np.random.default_rng(7)
    inits = [
        numpy_helper.from_array(rng.standard_normal((8, 16)).astype(np.float32), "w1"),
        numpy_helper.from_array(rng.standard_normal((16,)).astype(np.float32), "b1"),
        numpy_helper.from_array(rng.standard_normal((16, 4)).astype(np.float32), "w2"),
        numpy_helper.from_array(rng.standard_normal((4,)).astype(np.float32), "b2"),
    ]
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h0"]),
        helper.make_node("Add", ["h0", "b1"], ["h1"]),
        helper.make_node("Relu", ["h1"], ["h2"]),
        helper.make_node("MatMul", ["h2", "w2"], ["h3"]),
        helper.make_node("Add", ["h3", "b2"], ["y"]),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch_dim, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch_dim, 4])
    return helper.make_graph(nodes, name, [x], [y], inits)


def mlp(path: Path) -> Path:
    return _save(_mlp_graph(1, "mlp"), path)


def dynamic_batch(path: Path) -> Path:
    return _save(_mlp_graph("batch", "mlp_dynamic_batch"), path)


def multi_io(path: Path) -> Path:
    inputs = [
        helper.make_tensor_value_info("features", TensorProto.FLOAT, ["batch", "seq", 4]),
        helper.make_tensor_value_info("scale", TensorProto.FLOAT, [1]),
        helper.make_tensor_value_info("ids", TensorProto.INT64, ["batch", "seq"]),
    ]
    outputs = [
        helper.make_tensor_value_info("scaled", TensorProto.FLOAT, ["batch", "seq", 4]),
        helper.make_tensor_value_info("total", TensorProto.FLOAT, ["batch", "seq"]),
        helper.make_tensor_value_info("ids_next", TensorProto.INT64, ["batch", "seq"]),
    ]
    inits = [
        numpy_helper.from_array(np.array([2], dtype=np.int64), "axis2"),
        numpy_helper.from_array(np.array(1, dtype=np.int64), "one"),
    ]
    nodes = [
        helper.make_node("Mul", ["features", "scale"], ["scaled"]),
        helper.make_node("ReduceSum", ["features", "axis2"], ["total"], keepdims=0),
        helper.make_node("Add", ["ids", "one"], ["ids_next"]),
    ]
    return _save(helper.make_graph(nodes, "multi_io", inputs, outputs, inits), path)


def with_external_data(path: Path) -> Path:
    """The fixed-shape MLP with its weights in ``<name>.data`` next to it (external data)."""
    path = Path(path)
    model = helper.make_model(_mlp_graph(1, "mlp_external"), opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = IR_VERSION
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(
        model,
        str(path),
        save_as_external_data=True,
        all_tensors_to_one_file=True,
        location=path.name + ".data",
        size_threshold=0,
    )
    return path


def reference_mlp(x: np.ndarray) -> np.ndarray:
    """What ``mlp`` / ``dynamic_batch`` compute, in numpy (same seeded weights)."""
    rng = np.random.default_rng(7)
    w1 = rng.standard_normal((8, 16)).astype(np.float32)
    b1 = rng.standard_normal((16,)).astype(np.float32)
    w2 = rng.standard_normal((16, 4)).astype(np.float32)
    b2 = rng.standard_normal((4,)).astype(np.float32)
    return np.maximum(x @ w1 + b1, 0) @ w2 + b2
