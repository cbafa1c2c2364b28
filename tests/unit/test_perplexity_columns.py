"""A route's perplexity beside its equivalence verdict where people read results (issue 34): the store's
columns (migration 0010, filled from the stored JSON), `results list`, the exports and `compare routes`."""

from __future__ import annotations

import json
import math
import sqlite3
from dataclasses import replace

from typer.testing import CliRunner

from tests.results_fakes import hex_id, logits_equivalence, make_cell
from winml_perf.cli import app
from winml_perf.model.equivalence_view import view_of_record
from winml_perf.model.perplexity import PerplexityDifference
from winml_perf.results.store import open_store

RATIO = PerplexityDifference("config", 42.80, 42.74, 1.0014, 0.9967, 1.0062, 0.95, math.log(1.0014), 9, False)
AGREED = replace(
    RATIO, kl_mean=0.0045, kl_low=0.0031, kl_high=0.006, top1_agreement=0.962, top1_matches=2208, positions=2295
)


def _judged(run_id: str, route: str = "ep=webgpu", perplexity: PerplexityDifference = RATIO) -> list[dict]:
    """A run of config and ``route``, judged within precision tolerance with ``perplexity``."""
    with_ppl = {**logits_equivalence("within precision tolerance", 0.012, 1.0), "perplexity": perplexity.to_dict()}
    return [
        make_cell(run_id, route="config", index=0),
        make_cell(run_id, route=route, index=1, equivalence=with_ppl),
    ]


def test_the_view_reads_the_ratio_and_its_interval_and_says_them():
    view = view_of_record(_judged(hex_id("v"))[1])
    assert (view.perplexity, view.perplexity_ratio) == (42.80, 1.0014)
    assert (view.perplexity_ratio_low, view.perplexity_ratio_high) == (0.9967, 1.0062)
    assert "perplexity ×1.0014 [0.9967, 1.0062]" in view.figures_text()
    assert view_of_record(_judged(hex_id("w"))[0]).perplexity_ratio is None  # config: not judged


def test_results_list_and_the_csv_export_carry_the_ratio(tmp_path):
    db = tmp_path / "s.db"
    with open_store(db) as store:
        store.write_json_records(_judged(hex_id("r")))
    listed = CliRunner().invoke(app, ["results", "list", "--store", str(db), "--format", "json"])
    rows = {r["route"]: r for r in json.loads(listed.stdout)}
    assert rows["ep=webgpu"]["equivalence_perplexity_ratio"] == 1.0014
    assert rows["config"]["equivalence_perplexity_ratio"] is None
    out = tmp_path / "e.csv"
    exported = CliRunner().invoke(app, ["results", "export", "--store", str(db), "--format", "csv", "-o", str(out)])
    assert exported.exit_code == 0, exported.output
    header, *lines = out.read_text().splitlines()
    assert "equivalence_perplexity_ratio_low" in header.split(",") and any("0.9967" in line for line in lines)


def test_compare_routes_says_the_perplexity_ratio(tmp_path):
    db = tmp_path / "s.db"
    with open_store(db) as store:
        store.write_json_records(_judged(hex_id("c")))
    result = CliRunner().invoke(app, ["compare", "routes", "--store", str(db)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "perplexity ×1.0014 [0.9967, 1.0062]" in result.output


def test_migration_0010_fills_the_columns_of_records_stored_before_it(tmp_path):
    db = tmp_path / "old.db"
    with open_store(db) as store:
        store.write_json_records(_judged(hex_id("m")))
    con = sqlite3.connect(db)  # as a store before 0010 held them: no perplexity columns
    for column in ("perplexity", "perplexity_ratio", "perplexity_ratio_low", "perplexity_ratio_high"):
        con.execute(f"ALTER TABLE records DROP COLUMN equivalence_{column}")
    con.execute("DELETE FROM schema_migrations WHERE name = '0010_perplexity_columns'")
    con.commit()
    con.close()
    with open_store(db) as store:
        assert "0010_perplexity_columns" in store.applied_migrations()
        rows = {r["route"]: r for r in store.records()}
    assert rows["ep=webgpu"]["equivalence_perplexity_ratio_high"] == 1.0062
    assert rows["config"]["equivalence_perplexity"] is None


def test_the_dashboard_shows_the_perplexity_ratio_beside_the_verdict(tmp_path):
    """The index's equivalence cell and the series page's badge carry the route's perplexity and its ratio
    to the reference with the interval, and the hover names the KL and top-1; config's, not judged, none."""
    import re

    from winml_perf.publish.dashboard import write_dashboard

    db = tmp_path / "s.db"
    with open_store(db) as store:
        store.write_json_records(_judged(hex_id("d")))
        index = write_dashboard(store, tmp_path / "site")
    html = index.read_text()
    rows = re.findall(r"<tr data-testbed=.*?</tr>", html)
    webgpu = next(r for r in rows if 'data-route="ep=webgpu"' in r)
    config = next(r for r in rows if 'data-route="config"' in r)
    shown = "perplexity 42.8 (×1.0014 [0.9967, 1.0062] of the reference)"
    assert f'<span class="sub perplexity">{shown}</span>' in webgpu
    assert re.search(r'title="[^"]*\(KL 0\.012, top-1 100%, perplexity ×1\.0014 \[0\.9967, 1\.0062\]\)"', webgpu)
    assert "perplexity" not in config
    pages = list((index.parent / "pages").rglob("*.html"))
    assert any(shown in p.read_text() for p in pages)


def _agreed(run_id: str) -> list[dict]:
    return _judged(run_id, "ep=qnn", AGREED)


def test_the_view_reads_kl_and_top1_over_the_text_and_says_them_beside_the_ratio():
    view = view_of_record(_agreed(hex_id("k"))[1])
    assert (view.perplexity_kl, view.perplexity_kl_low, view.perplexity_kl_high) == (0.0045, 0.0031, 0.006)
    assert view.perplexity_top1 == 0.962
    figures = view.figures_text()
    assert "perplexity ×1.0014 [0.9967, 1.0062], text KL 0.0045 [0.0031, 0.006], text top-1 96.2 %" in figures
    assert view.perplexity_text() == (
        "perplexity 42.8 (×1.0014 [0.9967, 1.0062] of the reference; KL 0.0045 [0.0031, 0.006], top-1 96.2 %)"
    )
    older = view_of_record(_judged(hex_id("o"))[1])  # a record from before: None, and nothing said
    assert older.perplexity_kl is None and older.perplexity_top1 is None and "text KL" not in older.figures_text()


def test_results_list_export_and_compare_routes_carry_kl_and_top1(tmp_path):
    db = tmp_path / "s.db"
    with open_store(db) as store:
        store.write_json_records(_agreed(hex_id("l")))
    listed = CliRunner().invoke(app, ["results", "list", "--store", str(db), "--format", "json"])
    rows = {r["route"]: r for r in json.loads(listed.stdout)}
    assert rows["ep=qnn"]["equivalence_perplexity_kl"] == 0.0045 and rows["ep=qnn"]["equivalence_perplexity_top1"]
    assert rows["config"]["equivalence_perplexity_kl_high"] is None
    out = tmp_path / "e.csv"
    exported = CliRunner().invoke(app, ["results", "export", "--store", str(db), "--format", "csv", "-o", str(out)])
    assert exported.exit_code == 0, exported.output
    header = out.read_text().splitlines()[0].split(",")
    assert {"equivalence_perplexity_kl_low", "equivalence_perplexity_top1"} <= set(header)
    result = CliRunner().invoke(app, ["compare", "routes", "--store", str(db)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "text KL 0.0045 [0.0031, 0.006], text top-1 96.2 %" in " ".join(result.output.split())


def test_migration_0011_fills_kl_and_top1_of_records_stored_before_it(tmp_path):
    db = tmp_path / "old.db"
    with open_store(db) as store:
        store.write_json_records(_agreed(hex_id("n")) + _judged(hex_id("p")))
    con = sqlite3.connect(db)  # as a store at 0010 held them: no KL or top-1 columns
    for column in ("kl", "kl_low", "kl_high", "top1"):
        con.execute(f"ALTER TABLE records DROP COLUMN equivalence_perplexity_{column}")
    con.execute("DELETE FROM schema_migrations WHERE name = '0011_text_agreement_columns'")
    con.commit()
    con.close()
    with open_store(db) as store:
        assert "0011_text_agreement_columns" in store.applied_migrations()
        rows = [(r["run_id"], r["route"], r) for r in store.records()]
    by = {(run, route): r for run, route, r in rows}
    qnn = by[(hex_id("n"), "ep=qnn")]
    assert (qnn["equivalence_perplexity_kl"], qnn["equivalence_perplexity_kl_low"]) == (0.0045, 0.0031)
    assert (qnn["equivalence_perplexity_kl_high"], qnn["equivalence_perplexity_top1"]) == (0.006, 0.962)
    webgpu = by[(hex_id("p"), "ep=webgpu")]  # its ratio kept, its KL never measured: NULL
    assert webgpu["equivalence_perplexity_ratio"] == 1.0014 and webgpu["equivalence_perplexity_kl"] is None


def test_the_dashboard_shows_kl_and_top1_beside_the_perplexity_ratio(tmp_path):
    import re

    from winml_perf.publish.dashboard import write_dashboard

    db = tmp_path / "s.db"
    with open_store(db) as store:
        store.write_json_records(_agreed(hex_id("e")))
        index = write_dashboard(store, tmp_path / "site")
    rows = re.findall(r"<tr data-testbed=.*?</tr>", index.read_text())
    qnn = next(r for r in rows if 'data-route="ep=qnn"' in r)
    shown = "perplexity 42.8 (×1.0014 [0.9967, 1.0062] of the reference; KL 0.0045 [0.0031, 0.006], top-1 96.2 %)"
    assert f'<span class="sub perplexity">{shown}</span>' in qnn
    pages = list((index.parent / "pages").rglob("*.html"))
    assert any(shown in p.read_text() for p in pages)
