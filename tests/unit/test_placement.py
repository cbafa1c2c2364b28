"""Placement proof (bundle/placement.py): summaries, --strict, measuring on CPU, the placement.json cache.

Everything here runs on the CPU EP alone; the WebGPU side (real fallback, strict on a real route)
is in tests/e2e/test_webgpu_e2e.py.
"""

from __future__ import annotations

import json
import os

import pytest

from tests.conftest import needs_openvino_absent
from tests.placement_models import strict_bundle
from tests.unit.bundle_fakes import fake_model_bytes
from winml_perf.bundle import placement as pl
from winml_perf.bundle.config import load_config
from winml_perf.bundle.prepare import prepare_route
from winml_perf.ep.devices import Target
from winml_perf.model.route import BUNDLE, Route, StageRoute
from winml_perf.record.warnings import EP_MISMATCH, check_stage_eps
from winml_perf.support import json_shapes
from winml_perf.support.errors import EXIT_FAILURE, BenchmarkFailure

CPU = "CPUExecutionProvider"
WEBGPU = "WebGpuExecutionProvider"
CPU_TARGET = Target("ep", "cpu", None, CPU, "cpu")
QNN_TARGET = Target("ep", "qnn", None, "QNNExecutionProvider", "npu")
# An EP this machine lacks (onnxruntime-qnn may be installed here: its plugin is found by protocol).
ABSENT_TARGET = Target("ep", "openvino", None, "OpenVINOExecutionProvider", "npu")

# What onnxruntime-ep-webgpu 0.4.0 does with the builder's transformer.onnx (measured): 23 nodes on WebGPU,
# the attention-mask subgraph (6 nodes) on CPU.
MIXED = (
    [(WEBGPU, "MatMulNBits", "com.microsoft")] * 11
    + [(WEBGPU, "GroupQueryAttention", "com.microsoft")] * 2
    + [(WEBGPU, "Mul", "")] * 10
    + [
        (CPU, "Cast", ""),
        (CPU, "Cast", ""),
        (CPU, "ReduceSum", ""),
        (CPU, "Sub", ""),
        (CPU, "Shape", ""),
        (CPU, "Gather", ""),
    ]
)


def stage(name, ep_after, placement=None, forced=True, files=("transformer.onnx",)) -> StageRoute:
    return StageRoute(
        name,
        tuple(files),
        CPU,
        ep_after,
        forced=forced,
        options_source="default" if forced else "config",
        placement=placement,
    )


def forced_route(label: str, *stages: StageRoute) -> Route:
    return Route(label, label, label, stages, BUNDLE, path="derived", derived_path="derived")


def webgpu_route(*placements: pl.StagePlacement, forced=True) -> Route:
    return forced_route("ep=webgpu", *(stage(p.stage, WEBGPU, p, forced=forced, files=p.files) for p in placements))


# -- pure summaries -------------------------------------------------------------------------------------
def test_summarize_counts_nodes_per_ep_and_cpu_fallback_ops():
    p = pl.summarize("context", ["transformer.onnx"], WEBGPU, MIXED)
    assert p.nodes == 29 and p.nodes_per_ep == {WEBGPU: 23, CPU: 6}
    assert p.cpu_fallback_nodes == 6
    assert p.cpu_fallback_ops == {"Cast": 2, "Gather": 1, "ReduceSum": 1, "Shape": 1, "Sub": 1}
    assert p.op_types_per_ep[WEBGPU]["com.microsoft.MatMulNBits"] == 11
    assert p.ep_actual is None  # mixed: the stage ran where asked, with a partial fallback
    assert pl.ops_text(p.cpu_fallback_ops) == "Cast x2, Gather, ReduceSum, Shape, Sub"
    assert pl.nodes_text(p) == "webgpu 23, cpu 6"


def test_a_stage_asked_for_cpu_has_no_fallback_and_ep_actual_names_a_silent_fallback():
    on_cpu = pl.summarize("lm_head", ["lm_head.onnx"], CPU, [(CPU, "MatMul", "")])
    assert on_cpu.cpu_fallback_ops == {} and on_cpu.cpu_fallback_nodes == 0 and on_cpu.ep_actual is None
    fell_back = pl.summarize(
        "decoder", ["model.onnx"], WEBGPU, [(CPU, "MatMul", ""), (CPU, "Add", "")], providers=[CPU]
    )
    assert fell_back.ep_actual == CPU


def test_stage_placement_round_trips_through_dict():
    p = pl.summarize("context", ["transformer.onnx"], WEBGPU, MIXED, [WEBGPU, CPU], 12.5)
    again = pl.StagePlacement.from_dict(json.loads(json.dumps(p.to_dict())))
    assert again == p


def test_prepared_route_puts_placement_and_ep_actual_in_each_stage_so_ep_mismatch_warns():
    mixed = pl.summarize("context", ["transformer.onnx"], WEBGPU, MIXED)
    fell_back = pl.summarize("lm_head", ["lm_head.onnx"], WEBGPU, [(CPU, "MatMul", "")])
    route = webgpu_route(mixed, fell_back)
    context, lm_head = route.to_dict()["stages"]
    assert context["placement"]["nodes_per_ep"] == {WEBGPU: 23, CPU: 6} and "ep_actual" not in context
    assert lm_head["ep_actual"] == CPU
    assert Route.from_dict(route.to_dict()) == route
    warnings = check_stage_eps(route)
    assert [(w.code, w.data["stage"], w.data["ran"]) for w in warnings] == [(EP_MISMATCH, "lm_head", CPU)]


# -- strict -------------------------------------------------------------------------------------------------
def test_strict_fails_naming_every_forced_stage_and_its_cpu_ops():
    route = webgpu_route(
        pl.summarize("context", ["transformer.onnx"], WEBGPU, MIXED),
        pl.summarize("iterator", ["transformer.onnx"], WEBGPU, MIXED),
        pl.summarize("lm_head", ["lm_head.onnx"], WEBGPU, [(WEBGPU, "MatMul", "")]),
    )
    with pytest.raises(BenchmarkFailure) as exc:
        pl.enforce_strict(route)
    text = exc.value.message
    assert exc.value.exit_code == EXIT_FAILURE
    assert "`context`" in text and "`iterator`" in text and "`lm_head`" not in text
    assert "6 of 29 nodes" in text and "Cast x2, Gather, ReduceSum, Shape, Sub" in text
    assert "--stages lm_head" in exc.value.remedy  # the forced stage that does run whole on the EP


def test_strict_passes_when_every_forced_node_stays_on_its_ep():
    pl.enforce_strict(webgpu_route(pl.summarize("lm_head", ["lm_head.onnx"], WEBGPU, [(WEBGPU, "MatMul", "")])))


def test_strict_ignores_stages_not_forced_and_stages_forced_to_cpu():
    not_forced = pl.summarize("context", ["transformer.onnx"], WEBGPU, MIXED)
    pl.enforce_strict(webgpu_route(not_forced, forced=False))
    to_cpu = pl.summarize("embeddings", ["embeddings.onnx"], CPU, [(CPU, "Gather", "")])
    pl.enforce_strict(forced_route("ep=cpu", stage("embeddings", CPU, to_cpu, files=["embeddings.onnx"])))


def test_strict_fails_when_placement_could_not_be_measured():
    unknown = pl.StagePlacement("context", ("transformer.onnx",), WEBGPU, pl.UNAVAILABLE, error="no device for WebGPU")
    with pytest.raises(BenchmarkFailure, match=r"`context`.*placement unknown \(no device for WebGPU\)"):
        pl.enforce_strict(webgpu_route(unknown))
    with pytest.raises(BenchmarkFailure, match="no placement was recorded"):
        pl.enforce_strict(forced_route("ep=webgpu", stage("context", WEBGPU)))


# -- session options a stage runs with ----------------------------------------------------------------------
def test_config_entries_pass_extra_string_keys_and_config_entries_but_not_genai_keys():
    entries = pl.config_entries(
        {
            "log_id": "x",
            "provider_options": [],
            "intra_op_num_threads": 2,
            "ep.context_enable": "1",
            "config_entries": {"session.foo": 3},
            "disable_cpu_ep_fallback": True,
        }
    )
    assert entries == {
        "ep.context_enable": "1",
        "session.foo": "3",
        "session.disable_cpu_ep_fallback": "1",
        pl.RECORD_ASSIGNMENT: "1",
    }


def test_stage_session_options_are_the_stages_own_else_the_decoders(tiny_pipeline, bundle_copy):
    bundle = bundle_copy(tiny_pipeline)
    path = bundle / "genai_config.json"
    raw = json.loads(path.read_text())
    raw["model"]["decoder"]["session_options"]["custom.key"] = "decoder"
    stages = raw["model"]["decoder"]["pipeline"][0]
    stages["context"]["session_options"] = {"provider_options": [], "custom.key": "context"}
    path.write_text(json.dumps(raw))
    config = load_config(bundle)
    assert pl.stage_session_options(config, config.stage("context"))["custom.key"] == "context"
    assert pl.stage_session_options(config, config.stage("iterator"))["custom.key"] == "decoder"


# -- measuring on the CPU EP ------------------------------------------------------------------------------
def test_measure_on_cpu_places_every_node_of_a_cpu_only_model_on_cpu(tmp_path):
    config = load_config(strict_bundle(tmp_path / "strict"))
    [p] = pl.measure_config(config)
    assert p.status == pl.OK and p.ep == CPU and p.providers == (CPU,)
    assert p.nodes_per_ep == {CPU: 3} and p.op_types_per_ep[CPU] == {"Add": 1, "Det": 1, "Round": 1}
    assert p.cpu_fallback_ops == {} and p.ep_actual is None


@needs_openvino_absent
def test_an_ep_missing_here_is_unavailable_not_a_silent_cpu_result(tmp_path):
    config = load_config(strict_bundle(tmp_path / "strict", provider_options=[{"OpenVINO": {}}]))
    [p] = pl.measure_config(config)
    assert p.status == pl.UNAVAILABLE and "OpenVINOExecutionProvider" in p.error and p.nodes_per_ep == {}


def test_a_session_that_cannot_be_created_is_recorded_as_an_error(tmp_path):
    bundle = strict_bundle(tmp_path / "strict")
    raw = json.loads((bundle / "genai_config.json").read_text())
    raw["model"]["decoder"]["session_options"]["graph_optimization_level"] = "ORT_ENABLE_ALL"
    (bundle / "genai_config.json").write_text(json.dumps(raw))
    (bundle / "model.onnx").write_bytes(fake_model_bytes(b"not an onnx model"))  # whole, but no model
    [p] = pl.measure_config(load_config(bundle))
    assert p.status == pl.ERROR and p.error and p.nodes_per_ep == {}


# -- prepare_route: measured once per derived bundle, kept in placement.json --------------------------------------
def test_prepare_route_records_placement_per_stage_and_reuses_it(tiny_pipeline, bundle_copy):
    bundle = bundle_copy(tiny_pipeline)
    first = prepare_route(bundle, CPU_TARGET)
    assert first.placement_cache == "miss" and (first.path / pl.PLACEMENT_FILE).is_file()
    assert [s.stage for s in first.stages] == [p.stage for p in first.placements]
    stages = {s["stage"]: s for s in first.to_dict()["stages"]}
    assert set(stages) == {"embeddings", "context", "iterator", "lm_head"}
    assert all(
        s["placement"]["status"] == "ok" and set(s["placement"]["nodes_per_ep"]) == {CPU} for s in stages.values()
    )
    assert stages["context"]["placement"]["nodes_per_ep"] == stages["iterator"]["placement"]["nodes_per_ep"]
    assert stages["embeddings"]["placement"]["op_types_per_ep"][CPU] == {"Gather": 1}

    second = prepare_route(bundle, CPU_TARGET)
    assert (second.cache, second.placement_cache) == ("hit", "hit")
    assert second.to_dict()["stages"] == first.to_dict()["stages"]


def test_placement_json_from_another_key_is_measured_again(tiny_pipeline, bundle_copy):
    bundle = bundle_copy(tiny_pipeline)
    first = prepare_route(bundle, CPU_TARGET)
    path = first.path / pl.PLACEMENT_FILE
    doc = json.loads(path.read_text())
    doc["key"] = "0" * 64
    doc["stages"][0]["nodes_per_ep"] = {CPU: 999}
    assert (
        json_shapes.write_sealed(path, {k: v for k, v in doc.items() if k != json_shapes.SEAL}) is None
    )  # sealed: not an edit
    again = prepare_route(bundle, CPU_TARGET)
    assert again.placement_cache == "miss" and "another key" in again.placement_reason
    assert again.placements[0].nodes_per_ep == {CPU: 1}
    assert json.loads(path.read_text())["key"] != "0" * 64  # rewritten under the real key


@pytest.mark.parametrize(
    "edit, why",
    [
        (
            lambda d: d["stages"][0].update(nodes_per_ep={CPU: 999}),
            "placement.json was edited (its sha256 does not match",
        ),
        (lambda d: d.update(stages={"embeddings": 1}), "placement.json has no list `stages`"),
        (lambda d: d["stages"][1].pop("ep"), "placement.json has no str `stages[1].ep`"),
        (
            lambda d: d["stages"][0].update(op_types_per_ep={CPU: ["Gather"]}),
            "has no object `stages[0].op_types_per_ep.",
        ),
        (lambda d: d["stages"][0].update(nodes_per_ep={CPU: True}), "has no int `stages[0].nodes_per_ep."),
        (lambda d: d.update(key=7), "placement.json has no str `key`"),
        (lambda d: d.clear(), "placement.json has no int `format_version`"),
    ],
)
def test_edited_or_misshapen_placement_json_is_measured_again(tiny_pipeline, bundle_copy, edit, why):
    """Valid JSON of the wrong shape, or an edit that keeps the shape, never crashes: it is measured again."""
    bundle = bundle_copy(tiny_pipeline)
    first = prepare_route(bundle, CPU_TARGET)
    path = first.path / pl.PLACEMENT_FILE
    doc = json.loads(path.read_text())
    edit(doc)
    path.write_text(json.dumps(doc))
    again = prepare_route(bundle, CPU_TARGET)
    assert again.cache == "hit" and again.placement_cache == "miss" and why in again.placement_reason
    assert again.placements[0].nodes_per_ep == {CPU: 1}
    assert prepare_route(bundle, CPU_TARGET).placement_cache == "hit"  # saved again, sealed


@needs_openvino_absent
def test_placement_with_an_ep_missing_here_is_reported_but_not_saved(tmp_path):
    bundle = strict_bundle(tmp_path / "strict")
    prepared = prepare_route(
        bundle, ABSENT_TARGET, require_available=False
    )  # `winml bundle prepare --ep openvino` here
    assert prepared.placement_cache is None and "not saved" in prepared.placement_reason
    assert not (prepared.path / pl.PLACEMENT_FILE).exists()
    assert prepared.to_dict()["stages"][0]["placement"]["status"] == pl.UNAVAILABLE


def test_config_route_measures_placement_without_writing_into_the_bundle(tiny_pipeline, bundle_copy):
    bundle = bundle_copy(tiny_pipeline)
    before = sorted(p.name for p in bundle.iterdir())
    first = prepare_route(bundle, Target("config", None, None, None, None))
    assert first.path == bundle and first.placement_cache == "miss"
    assert [p.stage for p in first.placements] == ["embeddings", "context", "iterator", "lm_head"]
    assert all(p.status == pl.OK and p.nodes > 0 for p in first.placements)
    assert all("placement" in s for s in first.to_dict()["stages"])
    assert not os.path.exists(bundle / pl.PLACEMENT_FILE)  # kept as a placement-only artifact, not in the bundle
    assert sorted(p.name for p in bundle.iterdir()) == sorted(before + ["_compiled"])
    again = prepare_route(bundle, Target("config", None, None, None, None))
    assert again.placement_cache == "hit" and again.placements == first.placements


def test_stages_sharing_a_model_file_and_ep_are_measured_once(tiny_pipeline, monkeypatch):
    calls = []
    real = pl._measure
    monkeypatch.setattr(pl, "_MEMO", {})
    monkeypatch.setattr(pl, "_measure", lambda model, *a: calls.append(model.name) or real(model, *a))
    placements = pl.measure_config(load_config(tiny_pipeline))
    assert [p.stage for p in placements] == ["embeddings", "context", "iterator", "lm_head"]
    assert sorted(calls) == ["embeddings.onnx", "lm_head.onnx", "transformer.onnx"]


# -- winml bundle show --placement ----------------------------------------------------------------------------
def test_bundle_show_placement_adds_nodes_per_ep_and_cpu_ops(tiny_pipeline):
    from typer.testing import CliRunner

    from winml_perf.cli import app

    table = CliRunner().invoke(app, ["bundle", "show", str(tiny_pipeline), "--placement", "--ep", "cpu"])
    assert table.exit_code == 0, table.output
    assert "nodes per EP" in table.output and "CPU fallback ops" in table.output
    assert [line.split("|")[6].strip() for line in table.output.splitlines() if "| context" in line] == ["cpu 29"]
    doc = CliRunner().invoke(app, ["bundle", "show", str(tiny_pipeline), "--placement", "--format", "json"])
    stages = {s["stage"]: s for s in json.loads(doc.stdout)["stages"]}
    assert stages["lm_head"]["placement"]["nodes_per_ep"] == {CPU: 1}
    assert not (tiny_pipeline / pl.PLACEMENT_FILE).exists()  # show writes nothing


def test_strict_holds_the_config_route_to_the_eps_its_config_names():
    mixed = pl.summarize("context", ["transformer.onnx"], WEBGPU, MIXED)
    config = Route(
        "config",
        "config",
        "config",
        (stage("context", WEBGPU, mixed, forced=False), stage("lm_head", CPU, None, forced=False)),
        BUNDLE,
        path="bundle",
    )
    with pytest.raises(BenchmarkFailure, match=r"route config would run nodes off the EP.*`context`.*on webgpu"):
        pl.enforce_strict(config)
    whole = pl.summarize("context", ["transformer.onnx"], WEBGPU, [(WEBGPU, "MatMul", "")])
    pl.enforce_strict(
        Route("config", "config", "config", (stage("context", WEBGPU, whole, forced=False),), BUNDLE, path="b")
    )


def test_a_compiled_stage_is_counted_in_the_source_nodes_its_partitions_hold():
    """Issue 23 finding 7: EPContext partitions were counted as nodes ("4 of 7 on CPU" where 4 of 33 ran there)."""
    from winml_perf.bundle.placement import _nodes_of_compiled, summarize

    qnn, cpu = "QNNExecutionProvider", "CPUExecutionProvider"
    compiled = summarize("s", (), qnn, [(qnn, "EPContext", "com.microsoft")] * 3 + [(cpu, "Shape", "")] * 4)
    source = summarize("s", (), qnn, [(qnn, "MatMul", "")] * 29 + [(cpu, "Shape", "")] * 4)
    assert _nodes_of_compiled(compiled, source).nodes_per_ep == {qnn: 29, cpu: 4}
    other = summarize("s", (), qnn, [(qnn, "MatMul", "")] * 30 + [(cpu, "Shape", "")] * 3)
    assert _nodes_of_compiled(compiled, other) == compiled  # sessions disagree: shown as measured
