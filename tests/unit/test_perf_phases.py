"""Issue 39: `winml perf` runs its phases in turn, each deciding once what the later ones read.

* validate first (measure/validate.py), then resolve; a plain ONNX model's --input/--shape/session
  options are checked once a run once its routes are resolved (session/onnx_session.preflight), not
  once for each route;
* the graph optimisation level is parsed once, where the request is made
  (session/onnx_options.options_from_flags): the prepare phase hands that value to the prepared
  model and to the placement check and parses none;
* prepare: the artifact cache a forced route loads from is held once a run (measure/prepare.py
  ``prepared_routes``), and each route is prepared under that hold.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from tests import models
from tests.conftest import TINY_FLAT
from tests.unit.test_orchestrate import _request
from winml_perf.bundle import cache, onnx_placement
from winml_perf.ep.route_request import RouteRequest
from winml_perf.measure import prepare as prepare_phase
from winml_perf.measure.orchestrate import run_benchmark
from winml_perf.measure.request import PerfRequest
from winml_perf.model.spec import IterationPolicy
from winml_perf.session import onnx_options, onnx_session
from winml_perf.session.onnx_options import options_from_flags
from winml_perf.support.errors import UsageError


def _count_level_parses(monkeypatch) -> list:
    """Every call of parse_graph_optimization_level from here on, through any module's binding of it."""
    import winml_perf.bundle.epcontext.compile  # noqa: F401  (every binding exists before counting)
    import winml_perf.bundle.onnx_prepare  # noqa: F401

    seen: list = []
    original = onnx_options.parse_graph_optimization_level

    def counted(text):
        seen.append(text)
        return original(text)

    for mod in list(sys.modules.values()):
        if (
            getattr(mod, "__name__", "").startswith("winml_perf")
            and getattr(mod, "parse_graph_optimization_level", None) is original
        ):
            monkeypatch.setattr(mod, "parse_graph_optimization_level", counted)
    return seen


def test_the_level_is_parsed_where_the_request_is_made_and_handed_down(tmp_path, monkeypatch):
    model = models.mlp(tmp_path / "mlp.onnx")
    seen = _count_level_parses(monkeypatch)
    placed_at: list[str] = []
    assigned = onnx_placement.assigned_nodes

    def recording(model, ep, options, entries, ort_level):
        placed_at.append(ort_level)
        return assigned(model, ep, options, entries, ort_level)

    monkeypatch.setattr(onnx_placement, "assigned_nodes", recording)
    # the checking session (its own options at level disable, parsed as every OnnxSession parses them)
    # is the next test's: here, what the prepare phase hands down
    monkeypatch.setattr(onnx_session, "preflight", lambda *a: None)
    options = options_from_flags(ep="cpu", graph_optimization_level="ORT_ENABLE_BASIC")
    assert seen == ["ORT_ENABLE_BASIC"]  # the flag, parsed at the request's edge
    req = PerfRequest(
        path=model, runtime="winml", routes=(RouteRequest(ep="cpu"),), onnx_options=options, prepare_model=True
    )
    assert req.graph_optimization_level == "basic"
    (spec,) = prepare_phase.prepare_request(req)
    assert seen == ["ORT_ENABLE_BASIC"]  # and never again: the prepare phase hands the value down
    assert spec.route.prepared["graph_optimization_level"] == "basic"
    assert Path(spec.route.prepared["path"]).name == "mlp_cpu_basic.onnx"
    assert placed_at == ["ORT_ENABLE_BASIC"]  # the placement session at the request's level
    assert spec.session.options["graph_optimization_level"] == "basic"


def test_a_request_that_names_no_level_runs_at_onnxruntimes_default(tmp_path):
    model = models.mlp(tmp_path / "mlp.onnx")
    req = PerfRequest(path=model, runtime="winml", routes=(RouteRequest(ep="cpu"),), prepare_model=True)
    assert req.graph_optimization_level == "all"
    (spec,) = prepare_phase.prepare_request(req)
    assert spec.route.prepared["graph_optimization_level"] == "all"


def test_a_plain_models_inputs_are_checked_once_a_run_not_once_a_route(tmp_path, monkeypatch):
    model = models.mlp(tmp_path / "mlp.onnx")
    calls: list = []
    preflight = onnx_session.preflight
    monkeypatch.setattr(onnx_session, "preflight", lambda *a: calls.append(a) or preflight(*a))
    two = (RouteRequest(ep="cpu"), RouteRequest(ep="cpu", options=(("intra_op_num_threads", "1"),)))
    req = PerfRequest(path=model, runtime="winml", routes=two)
    assert len(prepare_phase.prepare_request(req)) == 2
    assert calls == [(model, {})]  # once, with the request's options, for both routes
    bad = PerfRequest(path=model, runtime="winml", routes=two, onnx_options={"inputs": {"nope": "x.npy"}})
    with pytest.raises(UsageError, match="nope"):
        prepare_phase.prepare_request(bad)


def test_a_forced_run_holds_the_artifact_cache_once(tmp_path, monkeypatch):
    bundle = tmp_path / "tiny"
    shutil.copytree(TINY_FLAT, bundle, ignore=shutil.ignore_patterns("_compiled"))
    held: list[Path] = []
    holding = cache.holding

    def counted(source_dir):
        held.append(Path(source_dir))
        return holding(source_dir)

    monkeypatch.setattr(cache, "holding", counted)
    req = _request(
        bundle,
        routes=(RouteRequest(ep="cpu"),),
        max_new_tokens=(2,),
        iterations=IterationPolicy(iterations=1),
        no_store=True,
    )
    outcome = run_benchmark(req)
    assert [c.status for c in outcome.run.cells] == ["ok"]
    assert held == [bundle]  # once, by the prepare phase, for the whole run
    (cell,) = outcome.run.cells
    assert Path(cell.route.derived_path).parent.parent == bundle  # measured from the derived folder it held


def test_validate_reads_the_bundles_config_once_through_the_runs_book(monkeypatch):
    from winml_perf.bundle.config import ConfigBook
    from winml_perf.measure import validate

    def no_second_read(path, *a, **k):
        raise AssertionError(f"read again: {path}")

    monkeypatch.setattr(validate, "read_json", no_second_read)
    book = ConfigBook()
    context = book.of(TINY_FLAT).raw["search"]["max_length"]
    ok = PerfRequest(path=TINY_FLAT, prompt_tokens=(8,), max_new_tokens=(2,))
    validate.validate_request(ok, (128,), book.of(ok.path))
    too_long = PerfRequest(path=TINY_FLAT, prompt_tokens=(context,), max_new_tokens=(1,))
    with pytest.raises(UsageError, match=f"exceeds the bundle's context of {context} tokens"):
        validate.validate_request(too_long, (128,), book.of(too_long.path))
