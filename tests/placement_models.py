"""A tiny "bundle" whose one stage holds ops the WebGPU plugin EP has no kernel for (placement / --strict tests).

``strict_bundle(dest)`` writes ``model.onnx`` (x float32 [3, 3] -> Add(x, x) -> Det -> det; Round(x) -> rounded)
and a flat-decoder ``genai_config.json`` on CPU. Good enough for routing, deriving and placement: the
strict check fails before onnxruntime-genai would load it (it is not a language model).
Measured with onnxruntime-ep-webgpu 0.4.0: Add runs on WebGPU; Det and Round have no WebGPU kernel.
"""

from __future__ import annotations

import json
from pathlib import Path

import onnx
from onnx import TensorProto, helper

CPU_ONLY_OPS = ("Det", "Round")


def strict_model(path: Path) -> Path:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 3])
    det = helper.make_tensor_value_info("det", TensorProto.FLOAT, [])
    rounded = helper.make_tensor_value_info("rounded", TensorProto.FLOAT, [3, 3])
    nodes = [
        helper.make_node("Add", ["x", "x"], ["doubled"], name="double"),
        helper.make_node("Det", ["doubled"], ["det"], name="det"),
        helper.make_node("Round", ["x"], ["rounded"], name="round"),
    ]
    graph = helper.make_graph(nodes, "strict", [x], [det, rounded])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="winml-perf-tests")
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def strict_bundle(dest: Path, provider_options: list | None = None) -> Path:
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    strict_model(dest / "model.onnx")
    config = {
        "model": {
            "type": "qwen2",
            "decoder": {"filename": "model.onnx", "session_options": {"provider_options": provider_options or []}},
        }
    }
    (dest / "genai_config.json").write_text(json.dumps(config, indent=2))
    return dest
