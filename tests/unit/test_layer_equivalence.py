"""Issue 24, layer-by-layer localisation: the first layer beyond the reference's own band is the one
named, a jump is told from growth, every layer both sides observed is judged, and the tapped copy of
a stage reads each layer's residual stream without writing the source bundle."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import numpy as np
import onnx
import pytest

from winml_perf.bundle.variants import layer_tensors, tapped_copy
from winml_perf.model.equivalence import GROWTH, JUMP, Layers
from winml_perf.stats.layer_equivalence import (
    LAYER_REL_FLOOR,
    band_errors,
    first_departing,
    first_differing,
    layer_figures,
    pattern,
)

BUNDLES = Path(__file__).resolve().parents[2] / "bundles"
RNG = np.random.default_rng(0)
REF = {k: RNG.normal(size=(1, 8, 16)).astype(np.float32) for k in range(6)}


def _scaled(rel: dict[int, float]) -> dict[int, np.ndarray]:
    """REF with layer k's first element at every position moved by rel[k] of that position's largest |value|."""
    out = {}
    for k, v in REF.items():
        w = v.astype(np.float64)
        w[..., 0] += rel.get(k, 0.0) * np.abs(v).max(axis=-1)
        out[k] = w
    return out


def _figures(route_rel: dict[int, float], band_rel: dict[int, float]):
    band = band_errors(REF, _scaled(band_rel))
    return layer_figures(dict.fromkeys(REF, "decoder"), dict.fromkeys(REF, "t"), REF, _scaled(route_rel), band)


def test_the_layer_that_jumps_is_named():
    band = {k: 1e-3 * 2**k for k in REF}  # a precision change growing through the layers
    figs = _figures({0: 1e-3, 1: 2e-3, 2: 4e-3, 3: 0.5, 4: 0.6, 5: 0.7}, band)
    assert [f.layer for f in figs] == list(REF)  # every layer judged
    assert first_departing(figs).layer == 3 and pattern(figs) == JUMP


def test_growth_through_the_layers_is_not_a_jump():
    band = {k: 1e-3 for k in REF}
    figs = _figures({k: 1e-3 * 2.5**k for k in REF}, band)  # beyond the band from layer 1 on, 2.5x a layer
    assert first_departing(figs).layer == 1 and pattern(figs) == GROWTH


def test_inside_the_band_nothing_departs_and_bit_equal_layers_are_told():
    band = {k: 0.01 for k in REF}
    figs = _figures({2: 0.005}, band)
    assert first_departing(figs) is None and pattern(figs) is None and first_differing(figs) == 2
    assert all(f.limit == pytest.approx(0.02, rel=1e-3) for f in figs)


def test_a_bit_equal_band_falls_back_to_the_floor():
    figs = _figures({0: LAYER_REL_FLOOR / 2, 1: 0.05}, {})
    assert figs[0].limit == LAYER_REL_FLOOR and first_departing(figs).layer == 1 and pattern(figs) == JUMP


def test_layers_round_trip_the_records_json():
    figs = _figures({3: 0.5}, {k: 1e-3 for k in REF})
    d = first_departing(figs)
    layers = Layers(
        31, "precision", tuple(figs), d.layer, d.stage, first_differing(figs), pattern(figs), ("x: y",), 1.5
    )
    assert Layers.from_dict(layers.to_dict()) == layers


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize(
    "bundle,filename",
    [
        ("tiny-qwen2", "model.onnx"),
        ("tiny-qwen2-pipeline", "transformer.onnx"),
        ("tiny-qwen2-npu", "transformer_context.onnx"),
    ],
)
def test_taps_read_each_layers_residual_stream_and_never_write_the_source(bundle, filename):
    src = BUNDLES / bundle / filename
    before = _sha(src)
    out, taps, _ = tapped_copy(src.parent, filename)
    try:
        assert sorted(taps) == [0, 1]  # both decoder layers of the tiny bundles
        model = onnx.load(str(out / filename), load_external_data=False)
        outputs = {o.name for o in model.graph.output}
        assert set(taps.values()) <= outputs
        # layer k's tap is the residual sum entering layer k+1, never a norm output (which would
        # carry layer k+1's norm weight and blame layer k for it)
        produced_by = {o: n for n in model.graph.node for o in n.output}
        for tensor in taps.values():
            assert not tensor.endswith("/output_0") or produced_by[tensor].op_type == "Add"
    finally:
        shutil.rmtree(out)
    assert _sha(src) == before
    # without add, a fused last skip norm that outputs no sum is not tapped: the copy added it
    assert set(layer_tensors(onnx.load(str(src), load_external_data=False))) <= set(taps)


def _builder_like_graph(n_layers: int) -> onnx.ModelProto:
    """A graph named as onnxruntime-genai's model builder names a fused decoder (Qwen2.5-0.5B: 24 layers):
    layer 0's input norm, then per layer a skip norm whose 4th output feeds the next, a final skip norm
    that outputs no sum."""
    from onnx import TensorProto, helper

    nodes = [helper.make_node("SimplifiedLayerNormalization", ["x", "w"], ["/model/layers.0/input_layernorm/output_0"],
                              name="/model/layers.0/input_layernorm/LayerNorm")]  # fmt: skip
    residual = "x"
    for n in range(1, n_layers + 1):
        kind = "final_norm_layernorm" if n == n_layers else "input_layernorm"
        outs = [f"/model/layers.{n}/{kind}/output_0"]
        if n < n_layers:
            outs += ["", "", f"/model/layers.{n}/{kind}/output_3"]
        nodes.append(helper.make_node("SkipSimplifiedLayerNormalization", [residual, "d", "w"], outs,
                                      name=f"/model/layers.{n}/{kind}/SkipLayerNorm", domain="com.microsoft"))  # fmt: skip
        residual = outs[-1]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info(t, TensorProto.FLOAT, [1, 4]) for t in ("x", "d", "w")],
        [helper.make_tensor_value_info(nodes[-1].output[0], TensorProto.FLOAT, [1, 4])],
    )
    return helper.make_model(graph)


def test_every_layer_of_a_24_layer_decoder_is_tapped_in_order():
    model = _builder_like_graph(24)
    taps = layer_tensors(model, add=True)
    assert sorted(taps) == list(range(24))
    assert taps[0] == "/model/layers.1/input_layernorm/output_3"  # layer 0's residual sum, not a norm output
    assert taps[23] == "/model/layers.24/final_norm_layernorm/SkipLayerNorm/residual_sum"  # given its sum output
    assert list(model.graph.node[-1].output)[3] == taps[23]


def test_each_stage_says_what_precision_it_computes_in_from_the_file_it_loads():
    from winml_perf.bundle.variants import bundle_precision

    flat = {p.stage: p for p in bundle_precision(BUNDLES / "tiny-qwen2")}
    assert flat["decoder"].matmulnbits_accuracy_levels == (4,) and flat["decoder"].ep == "CPUExecutionProvider"
    npu = {p.stage: p for p in bundle_precision(BUNDLES / "tiny-qwen2-npu")}
    assert npu["context"].ep == "QNNExecutionProvider" and dict(npu["context"].options) == {
        "enable_htp_fp16_precision": "1"
    }
    assert "HTP fp16" in npu["context"].compute and npu["embeddings"].ep == "CPUExecutionProvider"


def test_a_stage_whose_ep_runs_few_of_its_nodes_says_so_beside_the_eps_precision(tmp_path):
    # SmolLM2 forced onto QNN: QNN took a Cast and a Gather of 879 nodes, yet the line said "HTP fp16" alone
    import shutil

    from winml_perf.bundle.placement import PLACEMENT_FILE, saved_shares
    from winml_perf.bundle.variants import bundle_precision
    from winml_perf.model.route import StagePlacement
    from winml_perf.support.json_shapes import write_sealed

    bundle = tmp_path / "npu"
    shutil.copytree(BUNDLES / "tiny-qwen2-npu", bundle, ignore=shutil.ignore_patterns("_compiled"))
    qnn, cpu = "QNNExecutionProvider", "CPUExecutionProvider"
    context = StagePlacement("context", ("context.onnx",), qnn, "ok", {qnn: 2, cpu: 27}, {qnn: {"Gather": 1}})
    iterator = StagePlacement("iterator", ("iterator.onnx",), qnn, "ok", {qnn: 29}, {qnn: {"Gather": 1}})
    stages = [context.to_dict(), iterator.to_dict()]
    doc = {"format_version": 3, "key": "k", "derive_key": "d", "stages": stages}
    assert write_sealed(bundle / PLACEMENT_FILE, doc) is None
    assert saved_shares(bundle) == {"context": (qnn, 2, 29), "iterator": (qnn, 29, 29)}
    npu = {p.stage: p for p in bundle_precision(bundle)}
    assert npu["context"].compute.endswith(
        "HTP fp16 (enable_htp_fp16_precision 1); qnn runs 2 of the stage's 29 nodes, the rest run on CPU"
    )
    assert "the rest run on CPU" not in npu["iterator"].compute  # QNN ran all of it
    assert "runs" not in npu["embeddings"].compute  # a CPU stage


def test_the_fp16_band_variants_differ_only_in_the_precision_of_the_fp16_stages():
    from winml_perf.bundle.config import load_config
    from winml_perf.bundle.variants import fp16_cpu_variants

    assert fp16_cpu_variants(BUNDLES / "tiny-qwen2") is None  # no stage asks for fp16
    src = BUNDLES / "tiny-qwen2-npu" / "transformer_context.onnx"
    before = _sha(src)
    fp32, fp16, change = fp16_cpu_variants(BUNDLES / "tiny-qwen2-npu")
    try:
        assert "context/iterator fp32 -> fp16" in change
        for folder in (fp32, fp16):  # both on the CPU EP
            assert all(not s.provider_options for s in load_config(folder).stages)
        half = onnx.load(str(fp16 / "transformer_context.onnx"), load_external_data=False)
        kinds = {i.data_type for i in half.graph.initializer}
        assert onnx.TensorProto.FLOAT16 in kinds
        assert {i.type.tensor_type.elem_type for i in half.graph.input} <= {
            onnx.TensorProto.FLOAT,
            onnx.TensorProto.INT64,
        }
        assert _sha(fp32 / "transformer_context.onnx") == before  # the fp32 side is the file as it is
    finally:
        shutil.rmtree(fp32)
        shutil.rmtree(fp16)
    assert _sha(src) == before


def test_a_layer_that_computes_something_else_is_named_where_the_accumulated_error_hides_it():
    from winml_perf.stats.layer_equivalence import LocalPasses, first_wrong

    band = {k: 0.2 * (k + 1) for k in REF}  # a wide accumulated band, as deep random-weight models have
    local = LocalPasses(REF, _scaled({3: 0.3}), {k: 0.002 for k in REF})  # only layer 3's own output moved
    figs = layer_figures(
        dict.fromkeys(REF, "decoder"), dict.fromkeys(REF, "t"), REF, _scaled({3: 0.3, 4: 0.3}), band, local
    )
    assert first_departing(figs) is None  # the accumulated error sits inside the band at every layer
    assert first_wrong(figs).layer == 3 and pattern(figs) == JUMP
    near = LocalPasses(REF, _scaled({k: 0.004 for k in REF}), {k: 0.002 for k in REF})  # 2x the band: precision
    figs = layer_figures({}, {}, REF, _scaled({}), band, near)
    assert first_wrong(figs) is None and pattern(figs) is None


def test_teacher_inputs_feed_every_later_layer_the_reference_output():
    from winml_perf.bundle.variants import teacher_inputs

    model = onnx.load(str(BUNDLES / "tiny-qwen2" / "model.onnx"), load_external_data=False)
    taps = layer_tensors(model, add=True)
    inputs = teacher_inputs(model, taps)
    assert list(inputs) == [0]  # layer 1, the last, feeds no layer
    fed = inputs[0]
    readers = [n for n in model.graph.node if fed in n.input]
    assert {n.op_type for n in readers} == {"SkipSimplifiedLayerNormalization", "SimplifiedLayerNormalization"}
    assert all(taps[0] not in n.input for n in model.graph.node)  # nothing reads layer 0's own output any more
    declared = next(i for i in model.graph.input if i.name == fed)
    assert declared.type.tensor_type.shape.dim[-1].dim_value == 128  # the hidden size, static
