"""Records: round trips, JSON without NaN, schema validation, version checks."""

from __future__ import annotations

import copy
import gc
import json

import pytest

from tests.unit.fakes import FAKE_ENV, fake_spec, open_fake_session
from winml_perf.measure.sweep import CellExtras, RunFacts, collector_paused, run_sweep
from winml_perf.model.metrics import session_metrics
from winml_perf.model.record import SCHEMA_VERSION, CellRecord, RunRecord, load_schema, record_from_dict
from winml_perf.model.record_sections import Shape
from winml_perf.model.route import CPU, Route, StageRoute
from winml_perf.model.spec import IterationPolicy, RouteSpec, expand_sweep
from winml_perf.record.validation import validate_record
from winml_perf.support.errors import StoreError


@pytest.fixture(scope="module")
def run():
    routes = [
        RouteSpec("config", fake_spec(jitter_pct=1.0), route=Route("config", "config", "config")),
        RouteSpec(
            "ep=cpu",
            fake_spec(raise_on_call=3),
            route=Route("ep=cpu", "ep=cpu", "ep=cpu", (StageRoute("decoder", (), CPU, CPU),)),
        ),
    ]
    cells = expand_sweep(routes, [8], [1, 4], iterations=IterationPolicy(iterations=6))
    return run_sweep(
        cells,
        open_fake_session,
        isolate=False,
        facts=RunFacts(environment=FAKE_ENV, argv=["perf", "x"]),
        extras=CellExtras(roofline=False, sample_memory=True),
    )


def test_run_and_cell_records_validate_and_round_trip(run):
    d = run.to_dict()
    validate_record(d)
    text = json.dumps(d, allow_nan=False)  # no NaN anywhere
    back = record_from_dict(json.loads(text))
    assert isinstance(back, RunRecord) and back.to_dict() == d
    for c in run.cells:
        cd = c.to_dict()
        validate_record(cd)
        again = CellRecord.from_dict(json.loads(c.to_json()))
        assert again.to_dict() == cd
    assert d["schema_version"] == SCHEMA_VERSION and d["kind"] == "run" and d["argv"] == ["perf", "x"]


def test_cell_record_content(run):
    ok = next(c for c in run.cells if c.cell_key == "config|p8|n4")
    assert ok.status == "ok" and ok.stop_reason == "iterations" and ok.failure is None
    assert ok.route.label == "config" and ok.shape == Shape(
        prompt_tokens=8, max_new_tokens=4, requested_prompt_tokens=8
    )
    assert len(ok.samples.iterations) == 6 and len(ok.samples.iterations[0].decode_step_ms) == 3
    assert set(ok.metrics) == {m.name for m in session_metrics(True)}  # pinned: tests/unit/test_metrics.py's TABLE
    assert ok.summary["primary_metric"] == "decode_tokens_per_s"
    assert ok.summary["itl_ms_p99"] is not None and ok.summary["generated_tokens_total"] == 4 * 7  # 1 warmup + 6
    assert ok.memory.peak_rss_bytes is not None and ok.memory.peak_rss_bytes > 0
    assert ok.memory.device_memory_note is not None
    assert ok.output.identical_across_iterations is True
    one = next(c for c in run.cells if c.cell_key == "config|p8|n1")
    assert one.summary["primary_metric"] == "e2e_ms" and "decode_tokens_per_s" not in one.metrics


def test_failed_and_no_effect_cells(run):
    first, second = [c for c in run.cells if c.route.label == "ep=cpu"]
    # call 3 raises: the first cell fails; the session lives on and serves the second cell
    assert first.status == "failed" and first.failure.kind == "error" and first.failure.phase == "measure"
    assert second.status == "ok"
    assert all("route_no_effect" in {w.code for w in c.warnings} for c in (first, second))
    assert run.status == "failed"


def test_schema_rejects_damaged_records_naming_the_place(run):
    d = run.cells[0].to_dict()
    bad = copy.deepcopy(d)
    bad["samples"]["iterations"][0]["e2e_ms"] = "fast"
    with pytest.raises(StoreError, match=r"samples/iterations/0/e2e_ms"):
        validate_record(bad)
    bad = copy.deepcopy(d)
    bad["status"] = "failed"  # failed without a failure
    with pytest.raises(StoreError):
        validate_record(bad)
    bad = copy.deepcopy(d)
    del bad["environment"]["testbed_id"]
    with pytest.raises(StoreError, match="testbed_id"):
        validate_record(bad)
    bad = copy.deepcopy(d)
    bad["surprise"] = 1
    with pytest.raises(StoreError):
        validate_record(bad)


def test_newer_schema_version_is_refused(run):
    d = run.cells[0].to_dict()
    d["schema_version"] = SCHEMA_VERSION + 1
    with pytest.raises(StoreError, match="newer"):
        CellRecord.from_dict(d)
    with pytest.raises(StoreError, match="schema_version"):
        RunRecord.from_dict({"kind": "run"})


def test_schema_is_package_data():
    schema = load_schema()
    assert schema["$defs"]["cell"]["properties"]["schema_version"]["const"] == SCHEMA_VERSION


def test_records_are_built_and_handed_on_with_the_collector_paused_and_it_resumes_after():
    cells = expand_sweep(
        [RouteSpec("config", fake_spec(), route=Route("config", "config", "config"))],
        [8],
        [4],
        iterations=IterationPolicy(iterations=3),
    )
    seen = []
    run_sweep(
        cells,
        open_fake_session,
        isolate=False,
        on_cell_done=lambda rec: seen.append((rec.cell_key, gc.isenabled())),
        facts=RunFacts(environment=FAKE_ENV),
        extras=CellExtras(roofline=False),
    )
    assert seen == [("config|p8|n4", False)] and gc.isenabled()


def test_the_collector_resumes_after_a_failure_and_stays_off_when_it_was_off():
    with pytest.raises(RuntimeError):
        with collector_paused():
            raise RuntimeError("store failed")
    assert gc.isenabled()
    gc.disable()
    try:
        with collector_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
