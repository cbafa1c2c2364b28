"""`winml results import` and `winml results prune`, run as a user runs them (subprocesses)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from tests.conftest import run_winml
from tests.results_fakes import hex_id, make_cell
from winml_perf.results.store import open_store

pytestmark = pytest.mark.e2e


def _iso(days_ago: float) -> str:
    return (datetime.now(UTC) - timedelta(days=days_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")


def _run_record(run_id: str, cells: list[dict]) -> dict:
    return {"schema_version": 1, "kind": "run", "run_id": run_id, "cells": cells}


def test_import_is_idempotent_by_record_id_and_refuses_bad_files(tmp_path):
    store = tmp_path / "results" / "winml-perf.db"
    run = hex_id("imp")
    a = tmp_path / "night-1.json"
    a.write_text(json.dumps(_run_record(run, [make_cell(run, index=0), make_cell(run, route="ep=cpu", index=1)])))
    b = tmp_path / "cell.json"
    b.write_text(json.dumps(make_cell(hex_id("imp-2"), when="2025-01-02T02:00:00Z")))
    r = run_winml("results", "import", a, b, "--store", store)
    assert r.returncode == 0, r.stderr
    assert "imported 3 new cell(s) from 2 file(s)" in r.stderr and "(0 already stored)" in r.stderr
    again = run_winml("results", "import", a, b, "--store", store)
    assert again.returncode == 0 and "imported 0 new cell(s)" in again.stderr and "(3 already stored)" in again.stderr
    with open_store(store) as s:
        assert s.count() == 3 and {r["route"] for r in s.records(run_id=run)} == {"config", "ep=cpu"}
        assert s.get(make_cell(run, index=0)["cell_id"])["record"] == make_cell(run, index=0)

    bad = tmp_path / "bad.json"
    broken = make_cell(hex_id("imp-3"))
    del broken["status"]
    bad.write_text(json.dumps(_run_record(hex_id("imp-3"), [broken])))
    fresh = tmp_path / "fresh.json"
    fresh.write_text(json.dumps(make_cell(hex_id("imp-4"))))
    r = run_winml("results", "import", fresh, bad, "--store", store)
    assert r.returncode == 2 and "bad.json" in r.stderr
    notjson = tmp_path / "notes.txt"
    notjson.write_text("hello")
    r = run_winml("results", "import", notjson, "--store", store)
    assert r.returncode == 2 and "notes.txt: malformed JSON" in r.stderr and "not a record file" in r.stderr
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"kind": "something"}))
    r = run_winml("results", "import", other, "--store", store)
    assert r.returncode == 2 and "'kind' is 'something'" in r.stderr
    with open_store(store) as s:
        assert s.count() == 3  # a bad file in the batch stores nothing of the batch


def test_prune_keeps_what_is_younger_than_the_age(tmp_path):
    store = tmp_path / "results" / "winml-perf.db"
    with open_store(store) as s:
        for i, age in enumerate((200, 120, 91, 30, 1)):
            s.write_json_record(make_cell(hex_id("prune", i), index=i, when=_iso(age)))
    r = run_winml("results", "prune", "--older-than", "90d", "--store", store)
    assert r.returncode == 0, r.stderr
    assert "pruned 3 record(s)" in r.stderr
    with open_store(store) as s:
        assert s.count() == 2 and len(s.samples([x["id"] for x in s.records()])) == 2 * 6
    assert run_winml("results", "prune", "--older-than", "soon", "--store", store).returncode == 2
    assert run_winml("results", "prune", "--older-than", "90d", "--store", tmp_path / "nope.db").returncode == 2
