"""The typed record: sections are dataclasses, to_dict/from_dict give the same JSON back byte for
byte, and the renderers read the typed record (the same text as from a record read from JSON)."""

from __future__ import annotations

import json

import pytest

from tests.results_fakes import golden_cells
from tests.unit.fakes import FAKE_ENV, fake_spec, open_fake_session
from winml_perf.measure.sweep import CellExtras, RunFacts, run_sweep
from winml_perf.model.record import CellRecord, record_from_dict
from winml_perf.model.record_sections import Headline, MetricSummary, Policy, RecordSamples, RecordWarning, Shape
from winml_perf.model.result import CellFailure, LoadPhases
from winml_perf.model.route import CPU, Route, StageRoute
from winml_perf.model.sample import IterationSample
from winml_perf.model.spec import IterationPolicy, RouteSpec, expand_sweep
from winml_perf.publish.render import render_run, run_rows, run_text
from winml_perf.record.validation import validate_record


def _sweep(keep_token_ids: bool, iterations: IterationPolicy, runtime: str = "winml-genai"):
    routes = [
        RouteSpec("config", fake_spec(jitter_pct=1.0, runtime=runtime), route=Route("config", "config", "config")),
        RouteSpec(
            "ep=cpu",
            fake_spec(raise_on_call=3, runtime=runtime),
            route=Route("ep=cpu", "ep=cpu", "ep=cpu", (StageRoute("decoder", (), CPU, CPU),)),
        ),
    ]
    cells = expand_sweep(routes, [8], [1, 4], iterations=iterations)
    return run_sweep(
        cells,
        open_fake_session,
        isolate=False,
        facts=RunFacts(environment=FAKE_ENV, argv=["perf", "x"]),
        extras=CellExtras(roofline=False, keep_token_ids=keep_token_ids),
    )


@pytest.fixture(scope="module")
def run():
    return _sweep(True, IterationPolicy(iterations=6))


@pytest.fixture(scope="module")
def adaptive_run():
    return _sweep(False, IterationPolicy.until_ci(50.0, min_iterations=6, max_iterations=12))


@pytest.fixture(scope="module")
def plain_run():
    return _sweep(False, IterationPolicy(iterations=4), runtime="winml")


def test_every_section_of_a_measured_cell_is_typed(run):
    ok = next(c for c in run.cells if c.ok)
    failed = next(c for c in run.cells if not c.ok)
    assert isinstance(ok.route, Route) and isinstance(ok.shape, Shape) and isinstance(ok.policy, Policy)
    assert isinstance(ok.load, LoadPhases) and isinstance(ok.samples, RecordSamples)
    assert all(isinstance(s, IterationSample) for s in ok.samples.warmup + ok.samples.iterations)
    assert all(isinstance(m, MetricSummary) for m in ok.metrics.values()) and ok.metrics
    assert isinstance(ok.summary, Headline) and ok.summary.primary_metric == ok.summary["primary_metric"]
    assert all(isinstance(w, RecordWarning) for w in failed.warnings) and failed.warnings
    assert isinstance(failed.failure, CellFailure) and ok.failure is None


@pytest.mark.parametrize("name", ["run", "adaptive_run", "plain_run"])
def test_json_written_read_and_written_again_is_the_same_bytes(name, request):
    run = request.getfixturevalue(name)
    text = run.to_json(indent=2)
    validate_record(json.loads(text))
    back = record_from_dict(json.loads(text))
    assert back.to_json(indent=2) == text
    for cell in run.cells:
        again = CellRecord.from_dict(json.loads(cell.to_json()))
        assert again.to_json() == cell.to_json()
        assert again.failure == cell.failure and again.warnings == cell.warnings and again.load == cell.load
        assert again.shape == cell.shape and again.metrics == cell.metrics
        if cell.samples.keep_token_ids:  # else the ids measured here are not in the JSON
            assert again.samples == cell.samples


def test_token_ids_are_written_only_when_kept(run, adaptive_run):
    assert all("token_ids" in s for s in run.cells[0].to_dict()["samples"]["iterations"])
    assert not any("token_ids" in s for s in adaptive_run.cells[0].to_dict()["samples"]["iterations"])


def test_a_store_fixture_record_is_read_into_the_current_layout_and_stays_there():
    for d in golden_cells():
        once = CellRecord.from_dict(d).to_dict()
        validate_record(once)
        assert CellRecord.from_dict(json.loads(json.dumps(once))).to_dict() == once
        assert once["route"] == d["route"] and once["summary"] == d["summary"] and once["metrics"] == d["metrics"]


@pytest.mark.parametrize("name", ["run", "adaptive_run", "plain_run"])
def test_renderers_read_the_typed_record_as_they_read_one_from_json(name, request):
    run = request.getfixturevalue(name)
    back = record_from_dict(json.loads(run.to_json()))
    assert render_run(run) == render_run(back)
    assert render_run(run, warnings_only=True) == render_run(back, warnings_only=True)
    for fmt in ("markdown", "csv", "json", "jsonl"):
        assert run_text(run, fmt) == run_text(back, fmt)
    assert run_rows(run) == run_rows(back)


def test_the_table_says_what_the_record_holds(adaptive_run, plain_run):
    text = render_run(adaptive_run)
    assert "route config: effective config" in text and "| route " in text
    assert "stopped by" in text and "against --target-ci 50%" in text
    assert "FAILED [ep=cpu|p8|n1] error:" in text
    headers, rows = run_rows(plain_run)
    assert headers[1] == "latency_ms" and rows and all(r[1] is not None for r in rows)
