"""Issue 35 without hardware: a series is what the user tracks (its --series label or its bundle's
path, route as shown, shape, testbed), the content digest an event on it; migration 0009 moves an
existing store there without losing anything; the gate judges across a model change; labels keep
(compiled) / (emulated); an equivalence verdict belongs to its route and run."""

from __future__ import annotations

import json
import re
import sqlite3

import pytest
from typer.testing import CliRunner

from tests.conftest import TINY_FLAT, run_winml
from tests.results_fakes import hex_id, logits_equivalence, make_cell
from winml_perf.cli import app
from winml_perf.compare.cells import cell_of_record
from winml_perf.compare.gate import BY_MODEL_CHANGE, at_model_change
from winml_perf.compare.runs import Side, compare_runs, model_change
from winml_perf.model.route import bare_label, shown_label
from winml_perf.record.validation import validated_cell
from winml_perf.results import rows as R
from winml_perf.results.store import open_store


def series_key(doc: dict) -> str:
    """The series key the store gives a record file's JSON (results/rows.py reads it typed)."""
    return R.series_key(R.typed_record(doc))


A, B = "a1b2c3d4e5f6", "d4e5f6a7b8c9"


def _cell(name: str, when: str, digest: str | None = A, path: str = "/nightly/tiny-qwen2", **kw) -> dict:
    cell = make_cell(hex_id(name, when, path), bundle=path, when=when, **kw)
    if digest:
        cell["bundle_id"] = digest
    return cell


def _route(cell: dict, **route) -> dict:
    cell["route"].update(route)
    return cell


# -- labels ------------------------------------------------------------------------------------------
def test_shown_label_adds_compiled_and_emulated_and_bare_label_takes_them_off():
    compiled = {"label": "ep=openvino", "compile": [{"status": "compiled"}]}
    assert shown_label(compiled) == "ep=openvino (compiled)"
    assert shown_label({"label": "ep=openvino", "compile": [{"status": "nothing to compile"}]}) == "ep=openvino"
    assert shown_label({"label": "ep=qnn", "emulated": ["QNNExecutionProvider"]}) == "ep=qnn (emulated)"
    both = shown_label({**compiled, "label": "ep=qnn", "emulated": ["QNNExecutionProvider"]})
    assert both == "ep=qnn (compiled) (emulated)" and bare_label(both) == "ep=qnn"


def test_a_compiled_and_an_uncompiled_route_are_two_series_and_listed_apart(tmp_path):
    plain = _cell("p", "2025-01-01T02:00:00Z", route="ep=openvino")
    compiled = _route(
        _cell("c", "2025-01-01T02:00:01Z", route="ep=openvino", index=1),
        compile=[
            {"stages": ["decoder"], "source": "model.onnx", "ep": "openvino", "output": "x.onnx", "status": "compiled"}
        ],
    )
    validated_cell(compiled)
    assert series_key(plain) != series_key(compiled)
    with open_store(tmp_path / "s.db") as store:
        store.write_json_records([plain, compiled])
        assert [r["route"] for r in store.records()] == ["ep=openvino", "ep=openvino (compiled)"]
        assert len(store.records(route="ep=openvino")) == 2  # the route named without marks: both
        assert len(store.records(route="ep=openvino (compiled)")) == 1


def test_tune_standings_show_the_marked_label():
    from types import SimpleNamespace

    from winml_perf.model.route import Route
    from winml_perf.tune.session import with_shown_routes
    from winml_perf.tune.standings import Standing

    specs = {"ep=qnn": SimpleNamespace(recorded_route=Route("ep=qnn", emulated=("QNNExecutionProvider",)))}
    rows = [Standing(1, "ep=qnn", "leader", 1.2, 1.1, 1.3, 4, "equivalent", "")]
    assert [s.route for s in with_shown_routes(rows, specs)] == ["ep=qnn (emulated)"]


# -- a series is what the user tracks ----------------------------------------------------------------
def test_a_rebuild_in_the_same_folder_is_the_same_series_and_a_label_joins_folders():
    night1, night2 = _cell("1", "2025-01-01T02:00:00Z", A), _cell("2", "2025-01-02T02:00:00Z", B)
    assert series_key(night1) == series_key(night2)
    elsewhere = _cell("3", "2025-01-03T02:00:00Z", B, path="/builds/42/tiny-qwen2")
    assert series_key(elsewhere) != series_key(night1)
    labelled = [{**c, "series_label": "qwen-nightly"} for c in (night1, elsewhere)]
    assert series_key(labelled[0]) == series_key(labelled[1])
    validated_cell(labelled[0])


def test_perf_refuses_a_blank_series_name():
    result = run_winml("perf", TINY_FLAT, "--series", "  ", "--no-store")
    assert result.returncode == 2 and "--series" in result.stderr


def test_a_labelled_series_is_listed_and_filtered_by_its_label(tmp_path):
    db = tmp_path / "s.db"
    cells = [
        {**_cell("1", "2025-01-01T02:00:00Z", A, path="/builds/1/m"), "series_label": "qwen-nightly"},
        {**_cell("2", "2025-01-02T02:00:00Z", B, path="/builds/2/m"), "series_label": "qwen-nightly"},
    ]
    with open_store(db) as store:
        store.write_json_records(cells)
        assert {r["series_key"] for r in store.records()} == {series_key(cells[0])}
    rows = json.loads(
        CliRunner()
        .invoke(app, ["results", "list", "--store", str(db), "--bundle", "qwen-nightly", "--format", "json"])
        .stdout
    )
    assert [r["bundle"] for r in rows] == ["qwen-nightly"] * 2 and [r["series_label"] for r in rows] == [
        "qwen-nightly"
    ] * 2


# -- migration 0009 ----------------------------------------------------------------------------------
def test_migration_0009_recomputes_series_and_routes_and_loses_nothing(tmp_path):
    db = tmp_path / "old.db"
    emulated = _route(_cell("q", "2025-01-01T02:00:00Z", A, route="ep=qnn"), emulated=["QNNExecutionProvider"])
    rebuilt = _cell("n", "2025-01-02T02:00:00Z", B)
    first = _cell("f", "2025-01-01T02:00:00Z", A)
    with open_store(db) as store:
        store.write_json_records([first, emulated, rebuilt])
    con = sqlite3.connect(db)  # as a store before 0009 held them: series by digest, bare route labels
    before = {rid: (j, m) for rid, j, m in con.execute(
        "SELECT r.id, r.record_json, (SELECT count(*) FROM metrics WHERE record_id = r.id) FROM records r"
    )}  # fmt: skip
    con.execute("DROP INDEX ix_records_series_shown_digest")
    con.execute(
        "CREATE INDEX ix_records_series_shown ON records (series_key, created_utc, id, status, run_id,"
        " git_commit, winml_perf_version, testbed_id)"
    )
    con.execute("ALTER TABLE records DROP COLUMN series_label")
    con.execute("UPDATE records SET series_key = 'old-' || bundle_id, route = 'ep=qnn' WHERE route LIKE 'ep=qnn%'")
    con.execute("UPDATE records SET series_key = 'old-' || bundle_id WHERE route = 'config'")
    con.execute("INSERT INTO change_point_cache VALUES ('old-x', 'm', 'd', 1, NULL, '[]', '2025-01-01')")
    con.execute("DELETE FROM schema_migrations WHERE name = '0009_series_by_what_is_tracked'")
    con.commit()
    con.close()
    with open_store(db) as store:
        assert "0009_series_by_what_is_tracked" in store.applied_migrations()
        rows = store.records()
        assert [r["route"] for r in rows] == ["config", "ep=qnn (emulated)", "config"]
        assert rows[0]["series_key"] == rows[2]["series_key"] == series_key(first)  # the rebuild joined its series
        assert rows[1]["series_key"] == series_key(emulated) and rows[1]["series_label"] is None
        assert [r["bundle_id"] for r in rows] == [A, A, B]  # the digests stay, each with its run
    con = sqlite3.connect(db)
    after = {rid: (j, m) for rid, j, m in con.execute(
        "SELECT r.id, r.record_json, (SELECT count(*) FROM metrics WHERE record_id = r.id) FROM records r"
    )}  # fmt: skip
    assert after == before  # the records' JSON and metric rows, unchanged
    assert con.execute("SELECT count(*) FROM change_point_cache").fetchone() == (0,)  # derived: recomputed


# -- the model change: compare runs and the gate -----------------------------------------------------
def test_compare_runs_names_the_model_change_between_the_sides():
    base = cell_of_record(_cell("1", "2025-01-01T02:00:00Z", A, step_ms=[2.0] * 6))
    cand = cell_of_record(_cell("2", "2025-01-02T02:00:00Z", B, step_ms=[6.0] * 6))
    assert model_change([base], [cand]) == "model changed between baseline and candidate: a1b2c3 → d4e5f6"
    assert model_change([base], [base]) is None
    report = compare_runs(Side("previous", "previous", (base,)), Side("latest", "latest", (cand,)))
    assert report.to_dict()["model_changes"] == [
        {"series": report.label(cand.key), "change": "model changed between baseline and candidate: a1b2c3 → d4e5f6"}
    ]
    assert any(n.endswith("a1b2c3 → d4e5f6") for n in report.notes)


def test_a_forced_comparison_of_two_bundles_names_no_model_change():
    """`compare runs A B --force` across two bundles said 'model changed between baseline and
    candidate' under the table: the digests of two bundles differ, no model of a series changed."""
    base = cell_of_record(_cell("1", "2025-01-01T02:00:00Z", A, step_ms=[2.0] * 6))
    other = cell_of_record(_cell("2", "2025-01-02T02:00:00Z", B, path="/nightly/smollm2", step_ms=[6.0] * 6))
    assert model_change([base], [other]) is None
    report = compare_runs(Side("run:1", "run 1", (base,)), Side("run:2", "run 2", (other,)), force=True)
    assert report.rows and "model_changes" not in report.to_dict()
    assert not any("model changed" in n for n in report.notes), report.notes
    assert any(n.startswith("--force: comparing") for n in report.notes), report.notes


def _history(values_by_run: list[tuple[str, list[float]]]) -> list[dict]:
    return [
        {"id": i, "run_id": f"run{i:04d}", "bundle_id": digest, "median": sorted(v)[len(v) // 2], "invocations": v,
         "ci95_low": None, "ci95_high": None}
        for i, (digest, v) in enumerate(values_by_run)
    ]  # fmt: skip


def test_the_gate_judges_the_first_run_after_a_model_change_against_the_previous_model():
    nights = [(A, [100.0 + k, 97.0, 103.0]) for k in range(8)]
    slower = _history([*nights, (B, [40.0, 38.0, 45.0])])
    verdict = at_model_change(slower, "decode_tokens_per_s", 10.0)
    assert verdict is not None and verdict.is_regression and verdict.method == BY_MODEL_CHANGE
    assert "model changed between runs run0007 and run0008: a1b2c3 → d4e5f6" in verdict.reason
    assert at_model_change(_history([*nights, (B, [99.0, 101.0, 100.0])]), "decode_tokens_per_s", 10.0) is None
    assert at_model_change(_history([*nights, (A, [40.0, 38.0, 45.0])]), "decode_tokens_per_s", 10.0) is None
    unknown = _history([*nights, (None, [40.0, 38.0, 45.0])])
    assert at_model_change(unknown, "decode_tokens_per_s", 10.0) is None  # a digest unknown: no event known
    slower_ms = _history([*[(A, [10.0, 10.2, 9.9])] * 8, (B, [30.0, 29.0, 31.0])])
    assert at_model_change(slower_ms, "ttft_ms", 10.0).is_regression  # lower is better: a rise is worse


# -- equivalence belongs to its route and run --------------------------------------------------------
def test_a_not_equivalent_verdict_is_shown_with_its_run_and_does_not_stay_on_the_series(tmp_path):
    from winml_perf.publish.dashboard import write_dashboard

    judged = _cell("j", "2025-01-01T02:00:00Z", equivalence=logits_equivalence("not equivalent", 0.8, 0.4))
    with open_store(tmp_path / "s.db") as store:
        store.write_json_records([judged])
        html = write_dashboard(store, tmp_path / "one").read_text()
        assert re.search(r'class="equivalence not-equivalent" title="run [0-9a-f]+[^"]*">NOT equivalent <span', html)
        store.write_json_records([_cell("n", "2025-01-02T02:00:00Z")])  # the next night: not checked
        html = write_dashboard(store, tmp_path / "two").read_text()
    assert "NOT equivalent" not in html and "not checked" in html


@pytest.mark.parametrize("digest", ["zz", "a1b2c3d4e5f6a1b2c3d4e5f6a1b2c3d4e5f6a1b2c"])
def test_a_digest_filter_that_is_not_hex_is_refused(tmp_path, digest):
    with open_store(tmp_path / "s.db") as store:
        store.write_json_records([_cell("1", "2025-01-01T02:00:00Z")])
    result = run_winml("results", "list", "--store", tmp_path / "s.db", "--digest", digest)
    assert result.returncode == 2 and "--digest" in result.stderr
