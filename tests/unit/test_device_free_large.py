"""Issue 26: a device-free compiled model over protobuf's 2 GB limit is re-saved with external data.

The limit is lowered (device_free_child.INLINE_LIMIT_BYTES) so a 64 KiB model crosses it: no test writes 2 GB.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from tests import models
from winml_perf.bundle.epcontext import compat, device_free_child

QNN = "QNNExecutionProvider"
INFO = "v2:6:2.51.0:5.51.0:0:60:0:0"


def _compiled_like(path, weight: np.ndarray):
    """An EPContext node produced by QNN's virtual registration, and a CPU Add holding ``weight`` inline."""
    ctx = helper.make_node(
        "EPContext", ["x"], ["h"], domain="com.microsoft", source=QNN + ".virtual", embed_mode=0, main_context=1
    )
    add = helper.make_node("Add", ["h", "w"], ["y"])
    shape = list(weight.shape)
    graph = helper.make_graph(
        [ctx, add],
        "compiled",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)],
        [numpy_helper.from_array(weight, "w")],
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    )
    helper.set_model_props(model, {"ep_compatibility_info." + QNN + ".virtual": INFO})
    onnx.save(model, str(path))
    return path


def test_a_model_over_the_limit_is_re_saved_with_external_data(tmp_path, monkeypatch):
    """Failed before: retarget re-saved every model inline (onnx.save), which protobuf refuses over 2 GB."""
    weight = np.random.default_rng(1).standard_normal((128, 128)).astype(np.float32)  # 64 KiB
    out = _compiled_like(tmp_path / "m_qnn_ctx.onnx", weight)
    monkeypatch.setattr(device_free_child, "INLINE_LIMIT_BYTES", 16 * 1024)
    info = device_free_child.retarget(str(out), QNN)
    assert info == INFO
    assert out.stat().st_size < 16 * 1024  # the weight left the protobuf
    assert (tmp_path / "m_qnn_ctx.onnx.data").stat().st_size >= weight.nbytes
    back = onnx.load(str(out))  # external data read back beside it
    np.testing.assert_array_equal(numpy_helper.to_array(back.graph.initializer[0]), weight)
    (ctx,) = [n for n in back.graph.node if n.op_type == "EPContext"]
    assert helper.get_attribute_value(next(a for a in ctx.attribute if a.name == "source")) == QNN.encode()
    # the external data travels with the compiled model (export, the compat memo)
    assert compat.compiled_files(tmp_path, out.name) == ["m_qnn_ctx.onnx", "m_qnn_ctx.onnx.data"]


def test_a_model_under_the_limit_stays_inline(tmp_path):
    weight = np.ones((4, 4), np.float32)
    out = _compiled_like(tmp_path / "m_qnn_ctx.onnx", weight)
    device_free_child.retarget(str(out), QNN)
    assert not (tmp_path / "m_qnn_ctx.onnx.data").exists()
    assert onnx.load(str(out), load_external_data=False).graph.initializer[0].raw_data


def test_the_source_size_counts_its_external_data(tmp_path):
    model = models.with_external_data(tmp_path / "ext.onnx")
    data = tmp_path / "ext.onnx.data"
    assert device_free_child.source_bytes(str(model)) == model.stat().st_size + data.stat().st_size
