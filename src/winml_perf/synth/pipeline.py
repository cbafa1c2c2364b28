"""Split a model-builder transformer into an NPU-style decoder-pipeline bundle.

The builder makes the middle stage (``exclude_embeds`` / ``exclude_lm_head``: inputs_embeds in,
hidden_states out); this module writes the two stages it cannot make, a Gather over the embedding
matrix and a MatMul for lm_head, from the Hugging Face safetensors, and the pipeline config in
which ``context`` runs on the prompt and ``iterator`` on token generation, sharing one file.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

if TYPE_CHECKING:
    from onnx import ModelProto

TRANSFORMER = "transformer.onnx"
EMBEDDINGS = "embeddings.onnx"
LM_HEAD = "lm_head.onnx"


def _weights(hf_dir: Path) -> dict[str, NDArray[Any]]:
    from safetensors.numpy import load_file

    tensors: dict[str, NDArray[Any]] = {}
    for f in sorted(hf_dir.glob("*.safetensors")):
        tensors.update(load_file(str(f)))
    return tensors


def _io_dtype(transformer: Path) -> int:
    import onnx

    model = onnx.load(str(transformer), load_external_data=False)
    for value in model.graph.input:
        if value.name == "inputs_embeds":
            elem_type: int = value.type.tensor_type.elem_type
            return elem_type
    raise ValueError(f"{transformer} has no inputs_embeds input; was it built with exclude_embeds=true?")


def _save(model: ModelProto, path: Path) -> None:
    import onnx

    onnx.checker.check_model(model)
    onnx.save_model(model, str(path))


def _embeddings_model(weight: NDArray[Any], elem_type: int) -> ModelProto:
    from onnx import TensorProto, helper, numpy_helper

    table = numpy_helper.from_array(weight.astype(helper.tensor_dtype_to_np_dtype(elem_type)), "embed_tokens.weight")
    node = helper.make_node("Gather", ["embed_tokens.weight", "input_ids"], ["inputs_embeds"], axis=0)
    graph = helper.make_graph(
        [node],
        "embeddings",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch_size", "sequence_length"])],
        [helper.make_tensor_value_info("inputs_embeds", elem_type, ["batch_size", "sequence_length", weight.shape[1]])],
        initializer=[table],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)


def _lm_head_model(weight: NDArray[Any], elem_type: int) -> ModelProto:
    from onnx import helper, numpy_helper

    # HF stores lm_head as [vocab, hidden]; MatMul wants [hidden, vocab].
    w = numpy_helper.from_array(
        np.ascontiguousarray(weight.T).astype(helper.tensor_dtype_to_np_dtype(elem_type)), "lm_head.weight"
    )
    node = helper.make_node("MatMul", ["hidden_states", "lm_head.weight"], ["logits"])
    graph = helper.make_graph(
        [node],
        "lm_head",
        [helper.make_tensor_value_info("hidden_states", elem_type, ["batch_size", "sequence_length", weight.shape[1]])],
        [helper.make_tensor_value_info("logits", elem_type, ["batch_size", "sequence_length", weight.shape[0]])],
        initializer=[w],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)


def pipeline_config(flat_cfg: Mapping[str, Any], n_layers: int) -> dict[str, Any]:
    """Rewrite the builder's single-stage config into a four-stage decoder-pipeline config."""
    cfg: dict[str, Any] = json.loads(json.dumps(flat_cfg))  # a deep copy
    model = cfg["model"]
    decoder = model["decoder"]
    kv_in = [decoder["inputs"][k] % i for i in range(n_layers) for k in ("past_key_names", "past_value_names")]
    kv_out = [decoder["outputs"][k] % i for i in range(n_layers) for k in ("present_key_names", "present_value_names")]
    decoder.pop("filename", None)
    decoder["inputs"] = {
        "input_ids": "input_ids",
        "attention_mask": decoder["inputs"]["attention_mask"],
        "past_key_names": decoder["inputs"]["past_key_names"],
        "past_value_names": decoder["inputs"]["past_value_names"],
    }
    decoder["outputs"] = {
        "logits": "logits",
        "present_key_names": decoder["outputs"]["present_key_names"],
        "present_value_names": decoder["outputs"]["present_value_names"],
    }
    transformer_io = {
        "filename": TRANSFORMER,
        "inputs": ["inputs_embeds", decoder["inputs"]["attention_mask"], *kv_in],
        "outputs": ["hidden_states", *kv_out],
    }
    decoder["pipeline"] = [
        {
            "embeddings": {"filename": EMBEDDINGS, "inputs": ["input_ids"], "outputs": ["inputs_embeds"]},
            "context": {**transformer_io, "run_on_token_gen": False},
            "iterator": {**transformer_io, "run_on_prompt": False},
            "lm_head": {"filename": LM_HEAD, "inputs": ["hidden_states"], "outputs": ["logits"], "is_lm_head": True},
        }
    ]
    model["type"] = "decoder-pipeline"
    return cfg


def _quantize_int4(model: ModelProto, block_size: int = 32) -> ModelProto:
    """lm_head's MatMul as MatMulNBits (4 bits, like the builder's own int4 lm_head)."""
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

    quantizer = MatMulNBitsQuantizer(model, block_size=block_size, is_symmetric=True)
    quantizer.process()
    # onnxruntime.quantization is untyped: its ONNXModel wraps the ModelProto
    quantized: ModelProto = quantizer.model.model
    return quantized


def make_pipeline(
    build_dir: Path, hf_dir: Path, hf_config: Mapping[str, Any], precision: str, quantize_lm_head: bool = False
) -> None:
    weights = _weights(hf_dir)
    elem_type = _io_dtype(build_dir / TRANSFORMER)
    _save(_embeddings_model(weights["model.embed_tokens.weight"], elem_type), build_dir / EMBEDDINGS)
    lm_head = _lm_head_model(weights.get("lm_head.weight", weights["model.embed_tokens.weight"]), elem_type)
    if quantize_lm_head:
        lm_head = _quantize_int4(lm_head)
    _save(lm_head, build_dir / LM_HEAD)
    cfg_path = build_dir / "genai_config.json"
    cfg = pipeline_config(json.loads(cfg_path.read_text()), int(hf_config["num_hidden_layers"]))
    cfg_path.write_text(json.dumps(cfg, indent=4) + "\n")
