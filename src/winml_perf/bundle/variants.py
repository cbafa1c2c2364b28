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
from typing import TYPE_CHECKING, Any

from winml_perf.bundle.config import CONFIG_NAME, config_of
from winml_perf.ep.table import CPU_EP, EPS, Fp16Option, ep_from_genai_provider, is_known_ep
from winml_perf.onnxfile.wire import GraphInfo, read_graph

if TYPE_CHECKING:
    from onnx import ModelProto

    from winml_perf.bundle.config import GenaiConfig, Stage

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
    return session_variant(bundle, {"graph_optimization_level": level})


def session_variant(bundle: Path, entries: dict[str, Any]) -> Path:
    """A folder loading ``bundle`` (its files linked) with these session options on every stage."""
    config = config_of(bundle)
    names = ["decoder"] if config.kind == "flat" else list(config.stage_names)
    variant = config.with_session_entries({n: dict(entries) for n in names})
    out = _linked_copy(bundle, {CONFIG_NAME})
    (out / CONFIG_NAME).write_text(variant.dumps(), encoding="utf-8")
    return out


def accuracy_levels(bundle: Path) -> set[int]:
    """The MatMulNBits accuracy levels the bundle's stage files use (empty: no MatMulNBits)."""
    levels: set[int] = set()
    for name in {s.filename for s in config_of(bundle).stages}:
        levels.update(_levels(read_graph(bundle / name)))
    return levels


def _levels(graph: GraphInfo) -> set[int]:
    """The accuracy levels of a graph's MatMulNBits nodes (read from the wire: no weight is parsed;
    a stage file may hold its weights inline, hundreds of MB for an embedding table)."""
    return {n.attribute("accuracy_level", 0) for n in graph.nodes if n.op_type == "MatMulNBits"}


def precision_variant(bundle: Path) -> tuple[Path, str] | None:
    """A folder whose MatMulNBits nodes compute at the other accuracy level (else whose QNN stages
    flip enable_htp_fp16_precision), and what changed; None when neither applies."""
    import onnx

    levels = accuracy_levels(bundle)
    if not levels:
        return _fp16_variant(bundle)
    target = ACCURACY_LEVELS[0] if max(levels) == ACCURACY_LEVELS[1] else ACCURACY_LEVELS[1]
    stage_files = {s.filename for s in config_of(bundle).stages}
    files = sorted(f for f in stage_files if _levels(read_graph(bundle / f)))  # the others stay linked
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


def _fp16_switch(stage: Stage) -> tuple[str, dict[str, Any], str, Fp16Option] | None:
    """(genai key, a copy of its options, the EP, its fp16 switch) of the stage's first EP that has one
    in the EP table (QNN: enable_htp_fp16_precision); None when none has."""
    for entry in stage.provider_options:
        key, options = next(iter(entry.items()))
        ep = ep_from_genai_provider(key) if is_known_ep(key) else None
        fp16 = EPS[ep].fp16_option if ep is not None else None
        if ep is not None and fp16 is not None:
            return key, dict(options or {}), ep, fp16
    return None


def _fp16_variant(bundle: Path) -> tuple[Path, str] | None:
    """The bundle with every stage's fp16 switch flipped; None without a stage whose EP has one."""
    config = config_of(bundle)
    updates, was, what = {}, set(), set()
    for stage in config.stages:
        switch = _fp16_switch(stage)
        if switch is None:
            continue
        key, options, ep, fp16 = switch
        was.add(options.get(fp16.key, fp16.default))
        options[fp16.key] = "0" if fp16.declared(options) else "1"
        updates[stage.name] = [{key: options}]
        what.add(f"{EPS[ep].genai_name} {fp16.key}")
    if not updates:
        return None
    out = _linked_copy(bundle, {CONFIG_NAME})
    variant = config.with_provider_options(updates)
    (out / CONFIG_NAME).write_text(variant.dumps(), encoding="utf-8")
    now = "0" if was == {"1"} else "1"
    return out, f"{'/'.join(sorted(what))} {'/'.join(sorted(was))} -> {now}"


# -- layer taps (issue 24: where two routes part inside a model) --------------------------------

#: The node that normalises what enters decoder layer N (or the final norm after the last layer), as
#: onnxruntime-genai's model builder names it. Layer N-1's output (the residual stream) is its input
#: (a plain norm after a separate Add) or its fourth output, the input+skip sum (a fused skip norm).
LAYER_BOUNDARY = re.compile(r"^/model/layers\.(\d+)/(input_layernorm|final_norm_layernorm)/")
_SKIP_NORMS = {"SkipSimplifiedLayerNormalization", "SkipLayerNormalization"}
_NORMS = {"SimplifiedLayerNormalization", "LayerNormalization", "RMSNormalization"}
SUM_OUTPUT = 3  # a skip norm's input+skip(+bias) sum


def layer_tensors(model: ModelProto, add: bool = False) -> dict[int, str]:
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


def tapped_copy(folder: Path, filename: str, teacher: bool = False) -> tuple[Path, dict[int, str], dict[int, str]]:
    """A temporary folder holding ``folder`` (hard links) whose ``filename`` also outputs each decoder
    layer's output: the folder, {layer: tensor} and, with ``teacher``, {layer k: the graph input that
    now stands for layer k's output wherever a later layer reads it} (see teacher_inputs). The folder
    is removed by the caller. The source is never written."""
    import onnx

    model = onnx.load(str(folder / filename), load_external_data=False)  # external data stays linked
    taps = layer_tensors(model, add=True)
    inputs = teacher_inputs(model, taps) if teacher else {}
    out = _linked_copy(folder, {filename})
    have = {o.name for o in model.graph.output}
    model.graph.output.extend(onnx.helper.make_empty_tensor_value_info(t) for t in taps.values() if t not in have)
    onnx.save(model, str(out / filename))
    return out, taps, inputs


def teacher_inputs(model: ModelProto, taps: dict[int, str]) -> dict[int, str]:
    """Rewires ``model`` so that every layer after k reads layer k's output from a new graph input
    (fed the reference's value), while layer k's own output is still computed and tapped: each layer
    then runs on exactly the reference's input, and its error is its own, not its predecessors'.
    A fused skip norm's normalised output is recomputed from the input (SimplifiedLayerNormalization,
    same weight and epsilon). Returns {k: input name}; the last layer feeds no layer."""
    import onnx
    from onnx import helper

    producer = {out: node for node in model.graph.node for out in node.output if out}
    weights = {i.name: i.data_type for i in model.graph.initializer}
    shape = _residual_shape(model)
    added: dict[int, str] = {}
    last = max(taps, default=-1)
    for k, tensor in taps.items():
        node = producer.get(tensor)
        if k == last or node is None:
            continue
        name = f"{tensor}/teacher"
        dtype = onnx.TensorProto.FLOAT
        for other in model.graph.node:
            if other is not node and tensor in other.input:
                other.input[:] = [name if x == tensor else x for x in other.input]
                if other.op_type in _NORMS and len(other.input) > 1:
                    dtype = weights.get(other.input[1], dtype)
        if node.op_type in _SKIP_NORMS:  # its normalised output feeds layer k+1: recompute it from the input
            normed, dtype = node.output[0], weights.get(node.input[2], dtype)
            node.output[0] = f"{normed}/own"
            eps = [a for a in node.attribute if a.name == "epsilon"]
            norm = helper.make_node(
                "SimplifiedLayerNormalization", [name, node.input[2]], [normed], name=f"{node.name}/teacher", axis=-1
            )
            norm.attribute.extend(eps)
            index = list(model.graph.node).index(node)
            model.graph.node.insert(index + 1, norm)
        model.graph.input.append(helper.make_tensor_value_info(name, dtype, shape))
        added[k] = name
    return added


def _residual_shape(model: ModelProto) -> list[Any] | None:
    """The residual stream's shape as the graph declares its input (inputs_embeds; else input_ids and
    the hidden size of the first norm weight), static dims kept: an EP that needs static shapes (QNN)
    keeps the layers it took."""
    dims = {
        i.name: [d.dim_value if d.HasField("dim_value") else d.dim_param for d in i.type.tensor_type.shape.dim]
        for i in model.graph.input
    }
    if "inputs_embeds" in dims:
        return dims["inputs_embeds"]
    hidden = next(
        (list(i.dims)[-1] for n in model.graph.node if n.op_type in _NORMS | _SKIP_NORMS
         for i in model.graph.initializer if i.name in n.input[1:]),
        None,
    )  # fmt: skip
    return [*dims["input_ids"], hidden] if "input_ids" in dims and hidden else None


def stage_session_entries(config: GenaiConfig, stage_name: str) -> dict[str, Any]:
    """The session_options a stage loads with (its own, else the decoder's), as genai_config.json says."""
    decoder = config.raw["model"]["decoder"]
    if config.kind == "flat":
        return dict(decoder.get("session_options") or {})
    nodes = decoder["pipeline"]
    nodes = nodes[0] if isinstance(nodes, list) else nodes
    own = nodes[stage_name].get("session_options")
    return dict(own if isinstance(own, dict) else decoder.get("session_options") or {})


# -- what precision a bundle's stages compute in (issue 24) ---------------------------------------

#: The MatMulNBits accuracy_level attribute as the contrib op defines it: the least precision of input A.
_FLOAT16, _BFLOAT16 = 10, 16  # onnx TensorProto data types
ACCURACY_MEANING = {0: "unset", 1: "fp32 A", 2: "fp16 A", 3: "bf16 A", 4: "int8 A"}


#: _model_facts by file on disk (device, inode, size, mtime): derived folders link their sources, so a
#: check over many routes reads each distinct stage file once.
_FACTS: dict[tuple[int, int, int, int], tuple[tuple[int, ...], str, bool]] = {}


def _model_facts(path: Path) -> tuple[tuple[int, ...], str, bool]:
    """(MatMulNBits accuracy levels, float type of the graph's float inputs/weights, compiled) of one
    .onnx file, read from its wire format (no weight is parsed, inline or on disk)."""
    st = os.stat(path)
    key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    if key not in _FACTS:
        _FACTS[key] = _read_model_facts(path)
    return _FACTS[key]


def _read_model_facts(path: Path) -> tuple[tuple[int, ...], str, bool]:
    graph = read_graph(path)
    types = {v.elem_type for v in graph.inputs} | {i.data_type for i in graph.initializers}
    dtype = "fp16" if _FLOAT16 in types else "bf16" if _BFLOAT16 in types else "fp32"
    compiled = any(n.op_type == "EPContext" for n in graph.nodes)
    return tuple(sorted(_levels(graph))), dtype, compiled


def _compute(ep: str, levels: tuple[int, ...], dtype: str, compiled: bool, options: dict[str, str]) -> str:
    info = EPS[ep]
    parts = [f"{dtype} model"]
    if levels:
        text = "MatMulNBits accuracy_level " + "/".join(f"{x} ({ACCURACY_MEANING.get(x, '?')})" for x in levels)
        parts.append(text if info.accuracy_level_kernel else f"{text} as written (the EP's kernel decides)")
    if compiled:
        parts.append("compiled (EPContext)")
    if info.fp16_option is not None:
        parts.append(info.fp16_option.text(options))
    elif info.precision_options:
        given = [f"{k} {options[k]}" for k in info.precision_options if k in options]
        parts.append(", ".join(given) if given else "the device's default inference precision (no precision option)")
    return ", ".join(parts)


def bundle_precision(folder: Path) -> tuple[Any, ...]:
    """Each stage's StagePrecision: its EP, the accuracy levels of the .onnx it loads, the precision
    options it is given, and one line of what it computes in."""
    from winml_perf.bundle.placement import saved_shares
    from winml_perf.model.equivalence import StagePrecision

    config = config_of(folder)
    shares = saved_shares(folder)
    out = []
    for stage in config.stages:
        key, options = next(iter(stage.provider_options[0].items())) if stage.provider_options else ("cpu", {})
        ep = ep_from_genai_provider(key)
        levels, dtype, compiled = _model_facts(folder / stage.filename)
        given = {k: str(options[k]) for k in EPS[ep].precision_options if k in options}
        compute = _compute(ep, levels, dtype, compiled, {k: str(v) for k, v in options.items()})
        placed_ep, on_ep, nodes = shares.get(stage.name, (ep, 0, 0))
        if placed_ep == ep and on_ep < nodes and ep != CPU_EP:  # the EP's precision covers its nodes only
            compute += f"; {EPS[ep].alias} runs {on_ep} of the stage's {nodes} nodes, the rest run on CPU"
        out.append(StagePrecision(stage.name, ep, levels, tuple(sorted(given.items())), compute))
    return tuple(out)


# -- an fp16 precision band measured on the CPU EP (issue 24: an EP that ignores its precision flip) --


def _load_with_data(path: Path) -> ModelProto:
    """The model at ``path`` with its external weights read in (onnx's own loader refuses a data file
    with several hard links, which every derived folder here makes)."""
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    for tensor in model.graph.initializer:
        if tensor.data_location != onnx.TensorProto.EXTERNAL:
            continue
        info = {e.key: e.value for e in tensor.external_data}
        with open(path.parent / info["location"], "rb") as f:
            f.seek(int(info.get("offset", 0)))
            tensor.raw_data = f.read(int(info["length"])) if "length" in info else f.read()
        del tensor.external_data[:]
        tensor.data_location = onnx.TensorProto.DEFAULT
    return model


def fp16_declared_stages(bundle: Path) -> list[str]:
    """The stages whose EP options ask for fp16 compute (the EP table's ``fp16_option``: QNN's
    enable_htp_fp16_precision, default 1)."""
    out = []
    for stage in config_of(bundle).stages:
        switch = _fp16_switch(stage)
        if switch is not None and switch[1] and switch[3].declared(switch[1]):  # no options given: none declared
            out.append(stage.name)
    return out


def fp16_cpu_variants(bundle: Path) -> tuple[Path, Path, str] | None:
    """Two temporary folders that differ only in precision, both on the CPU EP: the stages that declare
    fp16 compute as they are (fp32) and converted to fp16 (onnxruntime.transformers.float16, inputs and
    outputs kept fp32 so the stages still chain), and what changed; None when no stage declares fp16."""
    import onnx
    from onnxruntime.transformers.float16 import convert_float_to_float16

    stages = fp16_declared_stages(bundle)
    if not stages:
        return None
    config = config_of(bundle)
    on_cpu = config.with_provider_options({name: [] for name in stages})
    files = sorted({config.stage(name).filename for name in stages})
    fp32 = _linked_copy(bundle, {CONFIG_NAME})
    fp16 = _linked_copy(bundle, {CONFIG_NAME, *files})
    for folder in (fp32, fp16):
        (folder / CONFIG_NAME).write_text(on_cpu.dumps(), encoding="utf-8")
    for name in files:
        half = convert_float_to_float16(_load_with_data(bundle / name), keep_io_types=True, disable_shape_infer=True)
        onnx.save(half, str(fp16 / name), save_as_external_data=True, location=f"{name}.fp16.data")
    return fp32, fp16, f"stages {'/'.join(stages)} fp32 -> fp16 (converted), both on the CPU EP"
