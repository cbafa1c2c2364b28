"""The closing summary of a multi-route `winml perf` compares the run in memory: the same report as
`winml compare routes` over the stored run, and no store (nor any file) is opened for it."""

from __future__ import annotations

import sqlite3
import tempfile

import sqlalchemy

from tests.unit.test_invocations import routes, sweep
from winml_perf.commands.compare_store import compare_stored_routes
from winml_perf.compare.run_summary import summarize_routes, summary_lines
from winml_perf.model.metrics import sort_key
from winml_perf.model.record import RunRecord
from winml_perf.model.spec import IterationPolicy
from winml_perf.results.store import open_store


def _run(tmp_path) -> dict:
    rs = routes(tmp_path, config=dict(decode_ms=10.0), fast=dict(decode_ms=5.0))
    return sweep(rs, IterationPolicy(iterations=4, invocations=3), seed=3).to_dict()


def test_the_summary_is_the_stored_comparison(tmp_path):
    doc = _run(tmp_path)
    report = summarize_routes(doc)
    with open_store(str(tmp_path / "r.db")) as store:
        store.write_run(RunRecord.from_dict(doc))
        stored = compare_stored_routes(store, doc["run_id"])
    rows = sorted(stored.rows, key=lambda r: (sort_key(r.metric), r.prompt_tokens or 0, r.max_new_tokens or 0, r.route))
    assert report is not None and report.rows
    assert [r.to_dict() for r in report.rows] == [r.to_dict() for r in rows] and report.notes == stored.notes
    assert summary_lines(report)[0] == "summary: routes against config (95% CI, over paired invocations)"


def test_the_summary_needs_no_store(tmp_path, monkeypatch):
    doc = _run(tmp_path)

    def refused(*_, **__):
        raise AssertionError("the summary opened a store or a file")

    for target, name in (
        (sqlite3, "connect"),
        (sqlalchemy, "create_engine"),
        (tempfile, "mkdtemp"),
        (tempfile, "TemporaryDirectory"),
        (tempfile, "NamedTemporaryFile"),
    ):
        monkeypatch.setattr(target, name, refused)
    monkeypatch.setattr("winml_perf.results.store.open_store", refused)
    monkeypatch.chdir(tmp_path)
    before = sorted(tmp_path.rglob("*"))
    report = summarize_routes(doc)
    assert report is not None and {r.route for r in report.rows} == {"fast"}
    assert sorted(tmp_path.rglob("*")) == before


def test_no_summary_without_the_baseline_route(tmp_path):
    doc = _run(tmp_path)
    assert summarize_routes(doc, baseline_route="device=npu") is None
