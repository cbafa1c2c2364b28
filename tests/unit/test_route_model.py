"""model/route.py: the typed route writes and reads exactly the route section records have always had."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from winml_perf.model import route as model_route
from winml_perf.model.route import (
    BUNDLE,
    CPU,
    MODEL,
    OK,
    CompileOutcome,
    OutputCheck,
    Route,
    StagePlacement,
    StageRoute,
    with_placements,
)

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "record_routes.json"
ROUTES = json.loads(GOLDEN.read_text())["routes"]
WEBGPU = "WebGpuExecutionProvider"


def _key_order(x):
    if isinstance(x, dict):
        return [(k, _key_order(v)) for k, v in x.items()]
    if isinstance(x, list):
        return [_key_order(v) for v in x]
    return type(x).__name__


@pytest.mark.parametrize("d", ROUTES, ids=lambda d: f"{d['label']}:{d.get('prepared') is not None}:{'path' in d}")
def test_every_stored_route_shape_round_trips_exactly(d):
    route = Route.from_dict(json.loads(json.dumps(d)))
    again = route.to_dict()
    assert again == d
    assert _key_order(again) == _key_order(d)  # same keys, same order, same value types
    assert Route.from_dict(again) == route


def test_a_forced_bundle_route_reads_back_as_attributes():
    d = next(r for r in ROUTES if r["label"] == "ep=cpu" and "path" in r)
    route = Route.from_dict(d)
    # the tiny bundle already runs on CPU: the forced route moves nothing and is reported as config
    assert route.kind == BUNDLE and route.requested == "ep=cpu" and route.effective == "config"
    assert isinstance(route.path, Path) and route.path == route.derived_path and route.cache == "miss"
    assert [s.stage for s in route.stages] == ["embeddings", "context", "iterator", "lm_head"]
    assert all(s.forced and s.planned and s.ep_after == CPU for s in route.stages)
    assert [p.stage for p in route.placements] == [s.stage for s in route.stages]
    assert route.stages[1].placement.nodes == 29 and route.stages[1].run_on_token_gen is False
    assert route.target["kind"] == "ep" and route.output_check.equal and route.output_check.seed == 0


def test_a_model_route_keeps_its_four_stage_keys_and_a_null_prepared():
    d = next(r for r in ROUTES if "prepared" in r and r["prepared"] is None)
    route = Route.from_dict(d)
    assert route.kind == MODEL and route.prepared is None and route.actual
    [stage] = route.stages
    assert not stage.planned and stage.ep_before is None
    assert list(stage.to_dict()) == ["stage", "files", "ep_before", "ep_after"]


def test_a_route_named_only_writes_only_its_label():
    bare = Route("config")
    assert not bare.resolved and bare.to_dict() == {"label": "config"}
    assert Route.from_dict({"label": "config"}) == bare


def test_stage_ep_actual_comes_from_its_placement_and_is_written_only_when_set():
    fell_back = StagePlacement("lm_head", ("lm_head.onnx",), WEBGPU, OK, {CPU: 3}, {CPU: {"MatMul": 3}})
    mixed = StagePlacement(
        "context", ("t.onnx",), WEBGPU, OK, {WEBGPU: 5, CPU: 1}, {WEBGPU: {"MatMul": 5}, CPU: {"Cast": 1}}
    )
    stages = (
        StageRoute("lm_head", ("lm_head.onnx",), CPU, WEBGPU, forced=True, options_source="default"),
        StageRoute("context", ("t.onnx",), CPU, WEBGPU, forced=True, options_source="default"),
        StageRoute("embeddings", ("e.onnx",), CPU, CPU, options_source="config"),
    )
    placed = with_placements(stages, [mixed, fell_back])
    assert [s.placement for s in placed] == [fell_back, mixed, None]
    assert placed[0].ep_actual == CPU and placed[0].to_dict()["ep_actual"] == CPU
    assert placed[1].ep_actual is None and "ep_actual" not in placed[1].to_dict()
    assert placed[1].placement.nodes_off(WEBGPU) == {CPU: 1}
    assert "placement" not in placed[2].to_dict()
    assert tuple(StageRoute.from_dict(s.to_dict()) for s in placed) == placed


def test_compile_outcomes_and_output_checks_round_trip():
    outcome = CompileOutcome(
        ("context", "iterator"),
        "transformer.onnx",
        "QNNExecutionProvider",
        "context_qnn_ctx.onnx",
        "compiled",
        "",
        812.5,
    )
    assert CompileOutcome.from_dict(json.loads(json.dumps(outcome.to_dict()))) == outcome
    check = OutputCheck(16, 4, 7, (1, 2, 3, 4), (1, 2, 9, 4), 2)
    assert not check.equal and OutputCheck.from_dict(check.to_dict()) == check
    assert check.to_dict()["equal"] is False


def test_a_route_is_frozen_and_rejects_an_unknown_kind():
    route = Route("config", "config", "config")
    with pytest.raises(AttributeError):
        route.label = "x"  # type: ignore[misc]
    with pytest.raises(ValueError, match="kind"):
        Route("config", kind="genai")


def test_model_route_imports_nothing_of_winml_perf_but_errors_and_model():
    tree = ast.parse(Path(model_route.__file__).read_text())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)} | {
        a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names
    }
    ours = {m for m in imported if m and m.startswith("winml_perf")}
    assert all(m == "winml_perf.support.errors" or m.startswith("winml_perf.model") for m in ours), ours


def test_a_route_spec_carries_a_route_named_as_it_is():
    from winml_perf.model.spec import RouteSpec, SessionSpec

    session = SessionSpec("winml-genai", "bundle")
    assert RouteSpec("config", session).route == Route("config")
    with pytest.raises(ValueError, match="'ep=cpu'"):
        RouteSpec("config", session, route=Route("ep=cpu", "ep=cpu", "ep=cpu"))
