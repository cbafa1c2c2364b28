"""The overview's shared run found in a page's columns (results/series.newest_shared_run_of) is the
one the store's query finds (newest_shared_run): runs config missed, failed records, a run id
missing, the newest-runs limit; and the dashboard's ratios are the same with and without filters."""

from __future__ import annotations

import re

from tests.results_fakes import hex_id, make_cell
from winml_perf.publish.dashboard import write_dashboard
from winml_perf.publish.dashboard_page import HISTORY_METRICS
from winml_perf.results.series import newest_shared_run, newest_shared_run_of, page_columns
from winml_perf.results.store import open_store


def _cells() -> list[dict]:
    cells = []
    for night in range(12):
        run = hex_id("night", night)
        when = f"2025-02-{night + 1:02d}T02:00:00Z"
        if night not in (10, 11):  # config missed the two newest nights
            status = "failed" if night == 9 else "ok"  # and failed on the one before
            cells.append(make_cell(run, route="config", when=when, status=status, index=0))
        cells.append(make_cell(run, route="ep=cpu", when=when, index=1, status="failed" if night == 8 else "ok"))
    return cells


def test_the_shared_run_from_columns_is_the_stores(tmp_path):
    with open_store(tmp_path / "s.db") as store:
        store.write_json_records(_cells())
        keys = {r["route"]: r["series_key"] for r in store.records()}
        cols = page_columns(store, list(keys.values()), HISTORY_METRICS)
        for newest in (200, 5, 3, 2, 1):
            for a, b in ((keys["ep=cpu"], keys["config"]), (keys["config"], keys["ep=cpu"])):
                found = newest_shared_run(store, a, b, newest=newest)
                assert newest_shared_run_of(cols[a], cols[b], newest=newest) == found, (newest, a)
        assert newest_shared_run(store, keys["ep=cpu"], keys["config"]) == hex_id("night", 7)


def test_the_overviews_ratios_are_the_same_with_a_filter(tmp_path):
    with open_store(tmp_path / "s.db") as store:
        store.write_json_records(_cells())
        plain = write_dashboard(store, tmp_path / "a", jobs=1).read_text()
        filtered = write_dashboard(store, tmp_path / "b", jobs=1, testbed="tb-linux").read_text()
    ratio = re.compile(r'<td class="num [a-z]+" title="[^"]*" data-run="([0-9a-f]+)" data-ratio="([^"]+)"')
    assert ratio.findall(plain) == ratio.findall(filtered) == ratio.findall(plain)[:1]
    assert ratio.findall(plain)[0][0] == hex_id("night", 7)
