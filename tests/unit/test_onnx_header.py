"""input_shapes reads graph inputs as onnx does; GenaiConfig.static_prompt_length finds a static S."""

from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import BUNDLES
from winml_perf.bundle.config import load_config
from winml_perf.onnxfile.header import input_shapes

onnx = pytest.importorskip("onnx")


def _onnx_shapes(path):
    model = onnx.load(str(path), load_external_data=False)
    return {
        v.name: tuple(
            d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in v.type.tensor_type.shape.dim
        )
        for v in model.graph.input
    }


@pytest.mark.parametrize("path", sorted(BUNDLES.glob("*/*.onnx")), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_input_shapes_match_onnx_on_every_committed_model(path):
    assert input_shapes(path) == _onnx_shapes(path)


def test_input_shapes_skip_inlined_weights_and_keep_unknown_dims(tmp_path):
    from onnx import TensorProto, helper, numpy_helper

    weight = numpy_helper.from_array(np.ones((300, 300), np.float32), "w")  # 360 kB inlined before the inputs
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 300])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 7])
    y.type.tensor_type.shape.dim[0].Clear()
    out = helper.make_tensor_value_info("z", TensorProto.FLOAT, ["n", 300])
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["z"])], "g", [x, y], [out], initializer=[weight])
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph), str(path))
    assert input_shapes(path) == {"x": ("n", 300), "y": (None, 7)}


def test_static_prompt_length_of_the_npu_bundle_is_its_context_length():
    assert load_config(BUNDLES / "tiny-qwen2-npu").static_prompt_length() == ("context", 16)


@pytest.mark.parametrize("name", ["tiny-qwen2", "tiny-qwen2-pipeline", "tiny-qwen2-pipeline-fp32"])
def test_dynamic_bundles_have_no_static_prompt_length(name):
    assert load_config(BUNDLES / name).static_prompt_length() is None
