"""The store-wide dashboard over a store holding serving cells: serving.html draws the newest serving
run of each testbed and bundle (an older run is not drawn), the overview links to each card, and the
serving series stay off the single-stream table and history pages (they have no decode tok/s)."""

from __future__ import annotations

import json
import re

import pytest

from tests.results_fakes import hex_id, make_cell
from tests.unit.test_serving import _cell, _load
from winml_perf.model.serving import SEQUENTIAL
from winml_perf.publish.dashboard import write_dashboard
from winml_perf.results.store import open_store


def _serving_run(run_id: str, when: str, tokens_per_s: float) -> list[dict]:
    cells = [
        _cell("config", _load("sequential"), [tokens_per_s], SEQUENTIAL, index=0),
        _cell("config", _load(c=1), [tokens_per_s], index=1),
        _cell("config", _load(c=4), [3 * tokens_per_s], index=2),
        _cell("ep=webgpu", _load(c=4), [tokens_per_s / 2], index=3),
    ]
    out = []
    for c in cells:
        d = json.loads(c.to_json())
        d.update(run_id=run_id, cell_id=hex_id(run_id, d["cell_index"]), started_utc=when, finished_utc=when)
        out.append(d)
    return out


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    root = tmp_path_factory.mktemp("serving-site")
    with open_store(root / "store.db") as store:
        store.write_json_records(_serving_run("1" * 32, "2026-12-01T00:00:00Z", 111.0))  # older: not drawn
        store.write_json_records(_serving_run("2" * 32, "2026-12-04T00:00:00Z", 222.0))
        store.write_json_record(make_cell(hex_id("single"), bundle="bundles/tiny-qwen2", testbed="t"))
        index = write_dashboard(store, root / "site")
    return root / "site", index.read_text()


def test_the_serving_page_draws_the_newest_serving_run_of_each_bundle_and_testbed(site):
    out, _ = site
    page = (out / "serving.html").read_text()
    assert 'id="serving-t-tiny-qwen2"' in page and "newest serving run in the store: 22222222" in page
    assert page.count('class="route"') == 2  # config's line through c1 and c4, in the TTFT and TPOT charts
    assert page.count('class="point"') == 2 * 3  # and ep=webgpu's one point; the baseline is not a point
    assert "config c4: 666.0 tok/s" in page and "333.0" not in page  # the older run is not drawn
    assert 'href="index.html"' in page
    assert re.search(r'data-charts="2"', page)


def test_the_overview_links_to_the_serving_card_and_keeps_serving_series_off_its_table(site):
    out, index = site
    assert '<a href="serving.html#serving-t-tiny-qwen2">tiny-qwen2</a>' in index
    assert "<td>config, ep=webgpu</td><td>22222222</td>" in index
    rows = re.findall(r'<tr data-testbed="[^"]*" data-route=.*?</tr>', index)
    assert len(rows) == 1  # the single-stream series alone; 4 serving series are on serving.html
    assert 'data-serving-charts="2"' in index
    detail = next((out / "pages").rglob("*.html")).read_text()
    assert "seq" not in re.findall(r"<h3[^>]*>(.*?)</h3>", detail)


def test_a_store_without_serving_cells_writes_no_serving_page(tmp_path):
    with open_store(tmp_path / "store.db") as store:
        store.write_json_record(make_cell(hex_id("single")))
        index = write_dashboard(store, tmp_path / "site")
    assert not (tmp_path / "site" / "serving.html").exists()
    assert "serving.html" not in index.read_text()


def _plan(store, filters=None) -> str:
    """SQLite's plan of the serving cells' search, as the dashboard runs it."""
    import sqlalchemy as sa

    from winml_perf.publish import serving_pages

    captured = []

    @sa.event.listens_for(store.engine, "before_cursor_execute")
    def keep(conn, cursor, statement, parameters, context, executemany):
        if "record_json" in statement and "n_samples" in statement:
            captured.append((statement, parameters))

    serving_pages.find_serving(store, filters or {})
    sa.event.remove(store.engine, "before_cursor_execute", keep)
    ((statement, parameters),) = captured
    with store.engine.connect() as conn:
        rows = conn.exec_driver_sql("EXPLAIN QUERY PLAN " + statement, parameters).fetchall()
    return " ".join(str(r[-1]) for r in rows)


def test_the_serving_search_reads_the_sample_count_index_not_the_whole_table(tmp_path):
    """Every record here has 10 samples and ANALYZE says so: left to that, SQLite would read the whole
    records table (2 GB at 10^6 records) for serving cells that are not there."""
    with open_store(tmp_path / "store.db") as store:
        store.write_json_records(
            [make_cell(hex_id("c", i), bundle="bundles/tiny-qwen2", testbed="t") for i in range(200)]
        )
        store.analyze()
        plan = _plan(store)
        assert "USING INDEX ix_records_n_samples" in plan and "SCAN records" not in plan, plan
        assert find_serving_keys(store) == set()
        store.write_json_records(_serving_run("2" * 32, "2026-12-04T00:00:00Z", 222.0))
        assert len(find_serving_keys(store)) == 4


def find_serving_keys(store) -> set[str]:
    from winml_perf.publish.serving_pages import find_serving

    return find_serving(store, {})[0]


def test_migration_0012_indexes_the_sample_count_of_a_store_made_before_it(tmp_path):
    import sqlite3

    db = tmp_path / "old.db"
    with open_store(db) as store:
        store.write_json_records(_serving_run("2" * 32, "2026-12-04T00:00:00Z", 222.0))
    con = sqlite3.connect(db)  # as a store at 0011 was
    con.execute("DROP INDEX ix_records_n_samples")
    con.execute("DELETE FROM schema_migrations WHERE name = '0012_samples_count_index'")
    con.commit()
    con.close()
    with open_store(db) as store:
        assert "0012_samples_count_index" in store.applied_migrations()
        assert "USING INDEX ix_records_n_samples" in _plan(store)
        assert len(find_serving_keys(store)) == 4
    con = sqlite3.connect(db)
    assert con.execute("SELECT stat FROM sqlite_stat1 WHERE idx = 'ix_records_n_samples'").fetchone() is not None
    con.close()
