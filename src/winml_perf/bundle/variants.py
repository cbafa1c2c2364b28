"""Variants of a bundle that change one thing, for measuring a reference's own bands (issue 24):
another graph optimisation level (its noise floor), another MatMulNBits accuracy level (its
precision band). Each variant is a temporary folder: every file of the bundle hard-linked (else copied), the config
(and for the precision variant the rewritten .onnx headers) written anew. The source is never written.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path

from winml_perf.bundle.config import CONFIG_NAME, load_config

NOISE_LEVEL = "ORT_DISABLE_ALL"
#: MatMulNBits accuracy_level: 0 unset (fp32 activations here), 4 int8 activations.
ACCURACY_LEVELS = (0, 4)


def _linked_copy(bundle: Path, skip: set[str]) -> Path:
    out = Path(tempfile.mkdtemp(prefix="winml-variant-"))
    for entry in bundle.iterdir():
        if entry.name in skip or entry.name.startswith("_compiled"):
            continue
        try:  # onnxruntime refuses external data behind a symlink that leaves the folder
            os.link(entry.resolve(), out / entry.name)
        except OSError:
            shutil.copy2(entry.resolve(), out / entry.name)
    return out


def optimization_variant(bundle: Path, level: str = NOISE_LEVEL) -> Path:
    """A folder loading ``bundle`` with every stage at graph optimisation ``level``."""
    config = load_config(bundle)
    names = ["decoder"] if config.kind == "flat" else list(config.stage_names)
    variant = config.with_session_entries({n: {"graph_optimization_level": level} for n in names})
    out = _linked_copy(bundle, {CONFIG_NAME})
    (out / CONFIG_NAME).write_text(variant.dumps(), encoding="utf-8")
    return out


def accuracy_levels(bundle: Path) -> set[int]:
    """The MatMulNBits accuracy levels the bundle's stage files use (empty: no MatMulNBits)."""
    import onnx

    levels: set[int] = set()
    for name in {s.filename for s in load_config(bundle).stages}:
        model = onnx.load(str(bundle / name), load_external_data=False)
        for node in model.graph.node:
            if node.op_type == "MatMulNBits":
                level = next((a.i for a in node.attribute if a.name == "accuracy_level"), 0)
                levels.add(int(level))
    return levels


def precision_variant(bundle: Path) -> tuple[Path, str] | None:
    """A folder whose MatMulNBits nodes compute at the other accuracy level (else whose QNN stages
    flip enable_htp_fp16_precision), and what changed; None when neither applies."""
    import onnx

    levels = accuracy_levels(bundle)
    if not levels:
        return _qnn_fp16_variant(bundle)
    target = ACCURACY_LEVELS[0] if max(levels) == ACCURACY_LEVELS[1] else ACCURACY_LEVELS[1]
    files = sorted({s.filename for s in load_config(bundle).stages})
    out = _linked_copy(bundle, set(files))
    for name in files:
        model = onnx.load(str(bundle / name), load_external_data=False)  # external data stays linked
        for node in model.graph.node:
            if node.op_type != "MatMulNBits":
                continue
            kept = [a for a in node.attribute if a.name != "accuracy_level"]
            del node.attribute[:]
            node.attribute.extend([*kept, onnx.helper.make_attribute("accuracy_level", target)])
        onnx.save(model, str(out / name))
    return out, f"MatMulNBits accuracy_level {'/'.join(map(str, sorted(levels)))} -> {target}"


def _qnn_fp16_variant(bundle: Path) -> tuple[Path, str] | None:
    """The bundle with every QNN stage's enable_htp_fp16_precision flipped; None without QNN stages."""
    config = load_config(bundle)
    updates, was = {}, set()
    for stage in config.stages:
        options = stage.options_for("qnn")
        if options is None:
            continue
        was.add(options.get("enable_htp_fp16_precision", "1"))
        options["enable_htp_fp16_precision"] = "0" if options.get("enable_htp_fp16_precision", "1") == "1" else "1"
        updates[stage.name] = [{"qnn": options}]
    if not updates:
        return None
    out = _linked_copy(bundle, {CONFIG_NAME})
    variant = config.with_provider_options(updates)
    (out / CONFIG_NAME).write_text(variant.dumps(), encoding="utf-8")
    now = "0" if was == {"1"} else "1"
    return out, f"QNN enable_htp_fp16_precision {'/'.join(sorted(was))} -> {now}"


# -- layer taps (issue 24: where two routes part inside a model) --------------------------------

#: The node that normalises what enters decoder layer N (or the final norm after the last layer), as
#: onnxruntime-genai's model builder names it. Layer N-1's output (the residual stream) is its input
#: (a plain norm after a separate Add) or its fourth output, the input+skip sum (a fused skip norm).
LAYER_BOUNDARY = re.compile(r"^/model/layers\.(\d+)/(input_layernorm|final_norm_layernorm)/")
_SKIP_NORMS = {"SkipSimplifiedLayerNormalization", "SkipLayerNormalization"}
_NORMS = {"SimplifiedLayerNormalization", "LayerNormalization", "RMSNormalization"}
SUM_OUTPUT = 3  # a skip norm's input+skip(+bias) sum


def layer_tensors(model, add: bool = False) -> dict[int, str]:
    """{decoder layer k: the tensor holding its output, the residual stream entering layer k+1} of an
    onnx ModelProto; empty when the graph holds no decoder layers (or hides them in an EPContext node).
    With ``add``, a fused skip norm that does not output its sum is given that output (named after it)."""
    out: dict[int, str] = {}
    for node in model.graph.node:
        m = LAYER_BOUNDARY.match(node.name)
        if not m or int(m.group(1)) == 0 or int(m.group(1)) - 1 in out:
            continue
        if node.op_type in _NORMS and node.input:
            out[int(m.group(1)) - 1] = node.input[0]
        elif node.op_type in _SKIP_NORMS:
            if len(node.output) <= SUM_OUTPUT or not node.output[SUM_OUTPUT]:
                if not add:
                    continue
                while len(node.output) <= SUM_OUTPUT:
                    node.output.append("")
                node.output[SUM_OUTPUT] = f"{node.name}/residual_sum"
            out[int(m.group(1)) - 1] = node.output[SUM_OUTPUT]
    return dict(sorted(out.items()))


def tapped_copy(folder: Path, filename: str) -> tuple[Path, dict[int, str]]:
    """A temporary folder holding ``folder`` (hard links) whose ``filename`` also outputs each decoder
    layer's output, and {layer: tensor}; the folder is removed by the caller. The source is never written."""
    import onnx

    model = onnx.load(str(folder / filename), load_external_data=False)  # external data stays linked
    taps = layer_tensors(model, add=True)
    out = _linked_copy(folder, {filename})
    have = {o.name for o in model.graph.output}
    model.graph.output.extend(onnx.helper.make_empty_tensor_value_info(t) for t in taps.values() if t not in have)
    onnx.save(model, str(out / filename))
    return out, taps


def stage_session_entries(config, stage_name: str) -> dict:
    """The session_options a stage loads with (its own, else the decoder's), as genai_config.json says."""
    decoder = config.raw["model"]["decoder"]
    if config.kind == "flat":
        return dict(decoder.get("session_options") or {})
    nodes = decoder["pipeline"]
    nodes = nodes[0] if isinstance(nodes, list) else nodes
    own = nodes[stage_name].get("session_options")
    return dict(own if isinstance(own, dict) else decoder.get("session_options") or {})
