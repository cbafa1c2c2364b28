"""Turn a synthesized pipeline into a static-shape NPU pipeline, as shipped Snapdragon bundles are.

The dynamic ``transformer.onnx`` becomes two files over the same weights file: ``context`` takes
exactly S prompt tokens, ``iterator`` one token; both have a fixed batch of 1 and a KV buffer of
``kv_length`` positions, and the KV head dimension is the config's ``head_size``. Both run on QNN's HTP backend with fp16 precision (which needs a
``soc_model``); embeddings and lm_head stay on CPU. SkipSimplifiedLayerNormalization, which QNN does
not take, is written as Add + SimplifiedLayerNormalization, which it does.

No ``op_affinity`` is set: QNN reads it only as a file path relative to the working directory,
which would tie the bundle to one folder. Without it GroupQueryAttention stays on CPU.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from winml_perf.synth.pipeline import TRANSFORMER

if TYPE_CHECKING:
    from onnx import ModelProto

CONTEXT = "transformer_context.onnx"
ITERATOR = "transformer_iterator.onnx"
DEFAULT_PROMPT_LENGTH = 16
DEFAULT_KV_LENGTH = 128
DEFAULT_SOC_MODEL = "60"


def qnn_provider_options(soc_model: str) -> dict[str, dict[str, str]]:
    return {"qnn": {"backend_type": "htp", "soc_model": str(soc_model), "enable_htp_fp16_precision": "1"}}


def _fix_dims(model: ModelProto, seq: int, kv_length: int, head_size: int) -> ModelProto:
    """Copy of ``model`` with every named input/output dim made a number for this stage."""
    import copy

    fixed = copy.deepcopy(model)
    for value in [*fixed.graph.input, *fixed.graph.output]:
        dims = value.type.tensor_type.shape.dim
        for axis, dim in enumerate(dims):
            name = dim.dim_param
            if not name:
                continue
            if _is_kv(value.name) and axis == len(dims) - 1:
                size = head_size  # the builder names it kv_cache_dim; symbolic, QNN leaves GroupQueryAttention on CPU
            elif name == "batch_size":
                size = 1
            elif name == "sequence_length":
                size = seq
            elif name == "past_sequence_length" or (
                name == "total_sequence_length" and value.name.startswith("present")
            ):
                size = kv_length  # the shared past/present buffer genai allocates
            elif name == "total_sequence_length" and seq > 1:
                size = seq  # the context runs first, on an empty cache: mask length == prompt length
            else:
                continue  # the iterator's mask grows with every token
            dim.ClearField("dim_param")
            dim.dim_value = size
    return fixed


def _is_kv(name: str) -> bool:
    return name.startswith(("past_key_values.", "present."))


def _split_skip_norms(model: ModelProto) -> None:
    """SkipSimplifiedLayerNormalization(x, skip, gamma) -> Add + SimplifiedLayerNormalization, in place."""
    from onnx import helper

    nodes = []
    for node in model.graph.node:
        if node.op_type != "SkipSimplifiedLayerNormalization":
            nodes.append(node)
            continue
        if len(node.input) > 3 and node.input[3]:
            raise ValueError(f"{node.name}: a SkipSimplifiedLayerNormalization with a bias is not handled")
        eps = next((a.f for a in node.attribute if a.name == "epsilon"), 1e-6)
        total = node.output[3] if len(node.output) > 3 and node.output[3] else f"{node.name}/sum"
        nodes.append(helper.make_node("Add", [node.input[0], node.input[1]], [total], name=f"{node.name}/Add"))
        nodes.append(
            helper.make_node(
                "SimplifiedLayerNormalization",
                [total, node.input[2]],
                [node.output[0]],
                name=f"{node.name}/Norm",
                epsilon=eps,
                axis=-1,
            )
        )
    del model.graph.node[:]
    model.graph.node.extend(nodes)


def make_static(build_dir: Path, prompt_length: int, kv_length: int, soc_model: str) -> None:
    """Rewrite a pipeline bundle (made by synth_pipeline) into the static NPU layout, in place."""
    import onnx

    cfg_path = build_dir / "genai_config.json"
    cfg = json.loads(cfg_path.read_text())
    head_size = int(cfg["model"]["decoder"]["head_size"])
    source = onnx.load(str(build_dir / TRANSFORMER), load_external_data=False)  # weights stay in their .data file
    _split_skip_norms(source)
    for filename, seq in ((CONTEXT, prompt_length), (ITERATOR, 1)):
        # No onnx.checker: it does not know onnxruntime's SimplifiedLayerNormalization (the builder's own files fail it too).
        onnx.save_model(_fix_dims(source, seq, kv_length, head_size), str(build_dir / filename))
    (build_dir / TRANSFORMER).unlink()

    stages = cfg["model"]["decoder"]["pipeline"][0]
    for name, filename in (("context", CONTEXT), ("iterator", ITERATOR)):
        stages[name]["filename"] = filename
        stages[name]["session_options"] = {"provider_options": [qnn_provider_options(soc_model)]}
    for name in ("embeddings", "lm_head"):
        stages[name]["session_options"] = {"provider_options": []}
    cfg["model"]["context_length"] = kv_length
    cfg["search"]["max_length"] = kv_length
    cfg_path.write_text(json.dumps(cfg, indent=4) + "\n")
