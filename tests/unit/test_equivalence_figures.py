"""The equivalence verdict where the speed is (issue 24): the store's columns and --verdict filter,
an old store's migration, every exporter, `winml compare routes`, the run's own table and the
dashboard. A not-equivalent route is marked wherever its ratio is shown; a record without a check
reads 'not checked', never blank and never 'equivalent'."""

from __future__ import annotations

import json
import re

import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

from tests.results_fakes import GOLDEN_RUN_A, golden_cells, hex_id, logits_equivalence, make_cell
from winml_perf.cli import app
from winml_perf.model.equivalence_view import NOT_CHECKED, view_of, view_of_record, view_of_row
from winml_perf.results import load
from winml_perf.results import migrations as mig
from winml_perf.results.store import open_store
from winml_perf.support.errors import UsageError

runner = CliRunner()


@pytest.fixture(scope="module")
def golden_store(tmp_path_factory):
    path = tmp_path_factory.mktemp("eqfig") / "s.db"
    with open_store(path) as store:
        store.write_json_records(golden_cells())
    return path


# -- the view --------------------------------------------------------------------------------------
def test_no_check_reads_not_checked_and_missing_keys_are_tolerated():
    assert view_of(None).verdict == NOT_CHECKED and view_of({}).verdict == NOT_CHECKED
    assert view_of_record({"route": {"label": "ep=cpu"}}).label() == NOT_CHECKED
    assert view_of_row({}).verdict == NOT_CHECKED  # a row read before the columns existed
    # a record written by another version, without bands, stages or most figures
    partial = view_of({"reference": "config", "verdict": "not equivalent", "figures": {"top1_agreement": 0.5}})
    assert partial.not_equivalent and partial.top1_agreement == 0.5 and partial.kl_mean is None
    assert partial.label() == "NOT equivalent"
    outputs = view_of(
        {
            "kind": "outputs",
            "reference": "config",
            "verdict": "equivalent",
            "outputs": [
                {"name": "a", "max_abs": 1e-6, "max_rel": 1e-7, "cosine": 1.0},
                {"name": "b", "max_abs": 3e-6, "max_rel": 2e-7, "cosine": 0.99999},
            ],
        }
    )
    assert (outputs.max_abs_error, outputs.max_rel_error, outputs.cosine_min) == (3e-6, 2e-7, 0.99999)


# -- the store -------------------------------------------------------------------------------------
def test_the_store_holds_the_verdict_and_filters_on_it(golden_store):
    with open_store(golden_store, create=False) as store:
        rows = {r["route"]: r for r in store.records(run_id=GOLDEN_RUN_A)}
        assert rows["ep=webgpu"]["equivalence_verdict"] == "not equivalent"
        assert rows["ep=webgpu"]["equivalence_first_stage"] == "context"
        assert rows["ep=webgpu"]["equivalence_first_divergence_step"] == 1
        assert rows["ep=cpu"]["equivalence_verdict"] == "equivalent"
        assert rows["config"]["equivalence_verdict"] == NOT_CHECKED
        assert [r["route"] for r in store.records(verdict="not equivalent")] == ["ep=webgpu"]


def test_results_list_shows_and_filters_the_verdict(golden_store):
    out = runner.invoke(app, ["results", "list", "--store", str(golden_store), "--verdict", "not-equivalent"])
    assert out.exit_code == 0, out.output
    (line,) = [x for x in out.stdout.splitlines() if "tiny-qwen2" in x]
    assert "ep=webgpu" in line and "NOT equivalent" in line
    every = runner.invoke(app, ["results", "list", "--store", str(golden_store)])
    config_lines = [x for x in every.stdout.splitlines() if " config " in x]
    assert config_lines and all(NOT_CHECKED in x for x in config_lines)
    bad = runner.invoke(app, ["results", "list", "--store", str(golden_store), "--verdict", "same"])
    assert isinstance(bad.exception, UsageError) and bad.exception.exit_code == 2  # winml's main: exit 2
    assert "--verdict 'same'" in str(bad.exception) and "not-equivalent" in str(bad.exception)


def test_results_show_names_the_verdict(golden_store):
    with open_store(golden_store, create=False) as store:
        ids = {r["route"]: r["id"] for r in store.records(run_id=GOLDEN_RUN_A)}
    out = runner.invoke(app, ["results", "show", str(ids["ep=webgpu"]), "--store", str(golden_store)])
    assert "equivalence: NOT equivalent (KL 0.81, top-1 44%, diverges at step 1, first at stage context)" in out.stdout
    cfg = runner.invoke(app, ["results", "show", str(ids["config"]), "--store", str(golden_store)])
    assert f"equivalence: {NOT_CHECKED}" in cfg.stdout


def test_an_old_store_gets_its_verdicts_from_the_stored_json(tmp_path):
    """A store at schema 0006 (before the columns) is migrated on open and its records filled."""
    from winml_perf.results.rows import json_record_rows as record_rows

    path = tmp_path / "old.db"
    engine = sa.create_engine(f"sqlite:///{path}")
    old_cell = make_cell(hex_id("old"), route="ep=webgpu", equivalence=logits_equivalence("not equivalent", 0.5, 0.6))
    with engine.begin() as conn:
        mig.schema_migrations.create(conn)
        for m in mig.MIGRATIONS[:6]:
            m.apply(conn)
            conn.execute(mig.schema_migrations.insert().values(name=m.name, applied_utc="2025-01-01T00:00:00Z"))
        had = {c["name"] for c in sa.inspect(conn).get_columns("records")}
        assert not any(c.startswith("equivalence_") for c in had)
        row = {k: v for k, v in record_rows(old_cell).record.items() if k in had}
        cols = ", ".join(row)
        conn.execute(sa.text(f"INSERT INTO records ({cols}) VALUES ({', '.join(':' + k for k in row)})"), row)
    engine.dispose()
    with open_store(path) as store:
        assert "0007_equivalence_columns" in store.applied_migrations()
        (stored,) = store.records()
    assert stored["equivalence_verdict"] == "not equivalent" and stored["equivalence_kl_mean"] == 0.5


# -- exports ---------------------------------------------------------------------------------------
def test_every_exporter_marks_the_not_equivalent_route(golden_store):
    from winml_perf.publish.exporters import export, exporters

    df = load(golden_store)
    a = df[df["run_id"] == GOLDEN_RUN_A]
    csv_rows = {r.split(",")[8]: r for r in export(a, "csv").splitlines()[1:]}
    header = export(a, "csv").splitlines()[0].split(",")
    verdict_at = header.index("equivalence_verdict")
    assert csv_rows["ep=webgpu"].split(",")[verdict_at] == "not equivalent"
    assert csv_rows["config"].split(",")[verdict_at] == NOT_CHECKED
    json_rows = {r["route"]: r for r in json.loads(export(a, "json"))}
    assert json_rows["ep=webgpu"]["equivalence_top1_agreement"] == 0.44
    assert json_rows["config"]["equivalence_verdict"] == NOT_CHECKED
    assert all(r["equivalence_verdict"] for r in map(json.loads, export(a, "jsonl").splitlines()))
    md = {line.split("|")[5].strip(): line for line in export(a, "markdown").splitlines()[2:]}
    assert "NOT equivalent" in md["ep=webgpu"] and NOT_CHECKED in md["config"] and "NOT" not in md["ep=cpu"]
    bmf = json.loads(export(a, "bmf"))
    webgpu = next(v for k, v in bmf.items() if "ep=webgpu" in k)
    assert webgpu["equivalence_verdict"]["value"] == 0.0
    assert "equivalence_verdict" not in next(v for k, v in bmf.items() if " config " in k)  # not checked: none
    for direction in ("bigger", "smaller"):
        entries = json.loads(export(a, "gab", direction=direction))
        marked = [e for e in entries if "ep=webgpu" in e["name"]]
        assert marked and all("equivalence: NOT equivalent" in e["extra"] for e in marked)
    checked = {"csv", "json", "jsonl", "markdown", "bmf", "gab", "gab-bigger", "gab-smaller"}
    for name in set(exporters()) - checked:  # a format added since: its text says it in words
        assert "not equivalent" in export(a, name).lower(), f"--format {name} does not mark the route"


# -- compare routes --------------------------------------------------------------------------------
def test_compare_routes_marks_a_not_equivalent_route_and_says_against_what(golden_store):
    out = runner.invoke(app, ["compare", "routes", "--store", str(golden_store), "--run", GOLDEN_RUN_A[:8]])
    assert out.exit_code == 0, out.output
    webgpu_decode = next(x for x in out.stdout.splitlines() if x.startswith("ep=webgpu decode"))
    assert (
        "faster (NOT numerically equivalent)" in webgpu_decode
        and "NOT numerically equivalent to config" in webgpu_decode
    )
    cpu_decode = next(x for x in out.stdout.splitlines() if x.startswith("ep=cpu decode"))
    assert cpu_decode.endswith("numerically equivalent to config") and "NOT" not in cpu_decode
    assert "note: equivalence: whether each route computes the same model as config" in out.stderr
    csv = runner.invoke(
        app, ["compare", "routes", "--store", str(golden_store), "--run", GOLDEN_RUN_A[:8], "--format", "csv"]
    )
    rows = [r.split(",") for r in csv.stdout.splitlines()]
    head = rows[0]
    webgpu = [dict(zip(head, r)) for r in rows[1:] if r[4] == "ep=webgpu"]
    assert webgpu and all(r["equivalence"] == "NOT equivalent" and "NOT" in r["verdict"] for r in webgpu)
    assert all(r["equivalence against"] == "config" for r in webgpu)


def test_a_route_never_checked_reads_not_checked_in_compare_routes(tmp_path):
    from winml_perf.compare.cells import cells_of_run
    from winml_perf.compare.routes import compare_routes

    run = hex_id("unchecked")
    cells = [make_cell(run, route=r, index=i) for i, r in enumerate(("config", "ep=cpu"))]
    report = compare_routes(cells_of_run({"cells": cells}), run)
    assert report.rows and all(r.equivalence.verdict == NOT_CHECKED for r in report.rows)
    assert all(r.sentence().endswith("numerical equivalence not checked") for r in report.rows)
    assert all(r.to_dict()["equivalence_verdict"] == NOT_CHECKED for r in report.rows)
    assert any("not checked: ep=cpu" in n for n in report.notes)


# -- the run's own table ---------------------------------------------------------------------------
def test_the_run_table_and_its_exports_carry_the_verdict():
    from winml_perf.model.record import RunRecord
    from winml_perf.publish.render import render_run, run_rows

    run_id = hex_id("table")
    cells = [
        make_cell(run_id, route="config", index=0),
        make_cell(run_id, route="ep=webgpu", index=1, equivalence=logits_equivalence("not equivalent", 0.8, 0.4)),
    ]
    when = cells[0]["started_utc"]
    doc = {"schema_version": 1, "kind": "run", "run_id": run_id, "cells": cells, "started_utc": when}
    doc.update(finished_utc=when, status="ok")
    run = RunRecord.from_dict(doc)
    heads, rows = run_rows(run)
    by_route = {r[heads.index("route")]: dict(zip(heads, r)) for r in rows}
    assert by_route["ep=webgpu"]["equivalence_verdict"] == "not equivalent"
    assert by_route["config"]["equivalence_verdict"] == NOT_CHECKED
    screen = render_run(run, width=10_000)
    webgpu_line = next(x for x in screen.splitlines() if x.startswith("| ep=webgpu"))
    assert "NOT equivalent" in webgpu_line


# -- the dashboard ---------------------------------------------------------------------------------
def test_the_dashboard_shows_the_verdict_beside_the_ratio(golden_store, tmp_path):
    from winml_perf.publish.dashboard import write_dashboard

    with open_store(golden_store, create=False) as store:
        index = write_dashboard(store, tmp_path / "site")
    html = index.read_text()
    assert "<th>vs config</th><th>equivalence</th>" in html
    rows = re.findall(r"<tr data-testbed=.*?</tr>", html)
    cpu = next(r for r in rows if 'data-route="ep=cpu"' in r)
    webgpu = next(r for r in rows if 'data-route="ep=webgpu"' in r)
    config = next(r for r in rows if 'data-route="config"' in r)
    # webgpu's newest record failed: the verdict is its newest ok record's, the one whose ratio is shown
    # (issue 35) both the ratio and the verdict name run A, the run they come from
    run = r'<span class="sub">run a0000000</span>'
    assert re.search(
        rf'×[\d.]+ \[[\d., ]+\] {run}</td><td class="equivalence not-equivalent"[^>]*>NOT equivalent {run}</td>', webgpu
    )
    assert re.search(
        rf'<td class="equivalence equivalent" title="run a{"0" * 30}1 against config \(KL [^)]*top-1 [^)]*\)">equivalent {run}</td>',
        cpu,
    )
    assert f">{NOT_CHECKED}</td>" in config
    page = (index.parent / "pages" / "tb-linux" / "tiny-qwen2.html").read_text()
    assert re.search(
        r'ep=webgpu · p16 n8 <span class="equivalence not-equivalent"[^>]*>NOT equivalent run a0000000</span>', page
    )


def test_a_baseline_judged_against_another_bundle_is_named_in_the_note():
    from winml_perf.compare.cells import cells_of_run
    from winml_perf.compare.routes import compare_routes

    run = hex_id("baseline-judged")
    moved = logits_equivalence("not equivalent", 0.9, 0.5, reference="bundle:/tmp/moved")
    cells = [make_cell(run, route=r, index=i, equivalence=moved) for i, r in enumerate(("config", "ep=webgpu"))]
    report = compare_routes(cells_of_run({"cells": cells}), run)
    assert all(r.not_equivalent and "NOT numerically equivalent" in r.verdict_shown() for r in report.rows)
    (note,) = [n for n in report.notes if n.startswith("equivalence:")]
    assert "the same model as bundle:/tmp/moved" in note
    assert "the baseline config itself: NOT equivalent against bundle:/tmp/moved" in note
