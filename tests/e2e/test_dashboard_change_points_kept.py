"""Change points kept in the store (results/change_point_cache.py), through the dashboard, on SQLite
and PostgreSQL: a rebuild with nothing new runs the detector on no series and writes the same pages;
a record added, pruned, imported into a series or changed in place, or a changed detector, makes
exactly the affected series searched again, and what the dashboard shows then equals a build from an
empty cache (a kept change point is never stale). Pages written by worker processes equal pages
written in one process."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import sqlalchemy as sa

from tests.results_fakes import hex_id, make_cell, noisy
from winml_perf.publish.dashboard import write_dashboard
from winml_perf.publish.dashboard_page import page_path
from winml_perf.results import change_point_cache as cpc
from winml_perf.results import migrations as mig
from winml_perf.results.importing import import_files
from winml_perf.results.store import open_store
from winml_perf.stats.series import changepoint

pytestmark = pytest.mark.e2e

NIGHTS = 24
BUNDLE = "bundles/nightly"


def _night(day: int) -> str:
    return f"2025-02-{1 + day:02d}T02:00:00Z"


def _cells(route: str, day: int, step_ms: float, index: int) -> dict:
    return make_cell(
        hex_id("kept", route, day),
        route=route,
        bundle=BUNDLE,
        when=_night(day),
        commit=f"{day:02d}" * 6,
        step_ms=noisy(step_ms, 6, 0.004, 100 * index + day),
        index=index,
    )


def _fill(store) -> None:
    """Two series of one page: 'config' steps 15 % slower from night 14, 'ep=cpu' flat."""
    for day in range(NIGHTS):
        store.write_json_record(_cells("config", day, 2.0 if day < 14 else 2.3, 0))
        store.write_json_record(_cells("ep=cpu", day, 2.6, 1))


class Counting:
    """detect_change_points wrapped: how many series it searched."""

    def __init__(self, monkeypatch) -> None:
        self.calls = 0
        real = changepoint.detect_change_points

        def counted(*args, **kwargs):
            self.calls += 1
            return real(*args, **kwargs)

        monkeypatch.setattr(changepoint, "detect_change_points", counted)

    def take(self) -> int:
        n, self.calls = self.calls, 0
        return n


def _page(site: Path) -> str:
    return (site / page_path("tb-linux", "nightly")).read_text()


def _index_body(site: Path) -> str:
    return re.sub(r"generated [^.]*\.", "", (site / "index.html").read_text())


def _kept_rows(store) -> dict:
    c = mig.change_point_cache.c
    with store.engine.connect() as conn:
        return {
            (k, m): json.loads(t) for k, m, t in conn.execute(sa.select(c.series_key, c.metric, c.change_points_json))
        }


def _forget(store) -> None:
    with store.engine.begin() as conn:
        conn.execute(mig.change_point_cache.delete())


def _fresh_build(store, site: Path) -> tuple[str, str]:
    """The page and index a build from an empty cache writes (the truth a kept row must equal);
    the cache is refilled by it."""
    _forget(store)
    write_dashboard(store, site, jobs=1)
    return _page(site), _index_body(site)


def _assert_current(store, tmp_path: Path, site: Path) -> None:
    page, index = _page(site), _index_body(site)
    assert (page, index) == _fresh_build(store, tmp_path / "fresh")


def test_a_rebuild_with_nothing_new_searches_no_series_and_writes_the_same_pages(store_url, tmp_path, monkeypatch):
    counting = Counting(monkeypatch)
    with open_store(store_url) as store:
        _fill(store)
        write_dashboard(store, tmp_path / "cold", jobs=1)
        assert counting.take() == 2  # two series, each searched once
        rows = _kept_rows(store)
        assert len(rows) == 2 and sum(len(cps) for cps in rows.values()) == 1  # the step of 'config', kept
        write_dashboard(store, tmp_path / "warm", jobs=1)
        assert counting.take() == 0
        assert _page(tmp_path / "warm") == _page(tmp_path / "cold")
        assert _index_body(tmp_path / "warm") == _index_body(tmp_path / "cold")
        assert '<g class="cp regression">' in _page(tmp_path / "warm")


def test_a_new_record_makes_only_its_series_searched_again(store_url, tmp_path, monkeypatch):
    counting = Counting(monkeypatch)
    with open_store(store_url) as store:
        _fill(store)
        write_dashboard(store, tmp_path / "s", jobs=1)
        counting.take()
        store.write_json_record(_cells("config", NIGHTS, 2.0, 0))  # the step reverts on the newest night
        write_dashboard(store, tmp_path / "s", jobs=1)
        assert counting.take() == 1
        assert 'data-records="49"' in _page(tmp_path / "s")
        _assert_current(store, tmp_path, tmp_path / "s")


def test_pruning_records_of_a_series_searches_it_again_and_drops_rows_of_emptied_series(
    store_url, tmp_path, monkeypatch
):
    counting = Counting(monkeypatch)
    with open_store(store_url) as store:
        _fill(store)
        store.write_json_record(
            make_cell(
                hex_id("old"), route="ep=gpu", bundle=BUNDLE, when="2025-01-01T02:00:00Z", step_ms=[2.0] * 6, index=2
            )
        )
        for day in range(10):  # a third series, long enough to be searched, then pruned away
            store.write_json_record(
                make_cell(
                    hex_id("old", day),
                    route="ep=gpu",
                    bundle=BUNDLE,
                    when=f"2025-01-{2 + day:02d}T02:00:00Z",
                    step_ms=noisy(2.0, 6, 0.004, day),
                    index=2,
                )
            )
        write_dashboard(store, tmp_path / "s", jobs=1)
        assert counting.take() == 3 and len(_kept_rows(store)) == 3
        assert store.prune("2025-02-05T00:00:00.000000Z") == 11 + 2 * 4  # the gpu series and four nights of the others
        assert len(_kept_rows(store)) == 2  # the emptied series' row is gone
        write_dashboard(store, tmp_path / "s", jobs=1)
        assert counting.take() == 2  # both remaining windows lost their oldest records
        _assert_current(store, tmp_path, tmp_path / "s")


def test_an_imported_record_in_the_middle_of_a_series_searches_it_again(store_url, tmp_path, monkeypatch):
    counting = Counting(monkeypatch)
    with open_store(store_url) as store:
        for day in range(NIGHTS):
            if day != 7:  # night 7 of 'config' was written to a file on a testbed that could not reach the store
                store.write_json_record(_cells("config", day, 2.0 if day < 14 else 2.3, 0))
            store.write_json_record(_cells("ep=cpu", day, 2.6, 1))
        write_dashboard(store, tmp_path / "s", jobs=1)
        counting.take()
        late = tmp_path / "late.json"
        late.write_text(json.dumps(_cells("config", 7, 2.3, 0)))
        import_files(store, [late])
        write_dashboard(store, tmp_path / "s", jobs=1)
        assert counting.take() == 1
        _assert_current(store, tmp_path, tmp_path / "s")


def test_a_value_changed_in_place_searches_the_series_again(store_url, tmp_path, monkeypatch):
    """Same record ids, another median: the kept row's digest covers the values, not only the ids."""
    counting = Counting(monkeypatch)
    with open_store(store_url) as store:
        _fill(store)
        write_dashboard(store, tmp_path / "s", jobs=1)
        counting.take()
        newest = store.records(route="config")[-1]["id"]
        m = mig.metrics.c
        with store.engine.begin() as conn:
            conn.execute(
                mig.metrics.update().where(m.record_id == newest, m.name == "decode_tokens_per_s").values(median=100.0)
            )
        write_dashboard(store, tmp_path / "s", jobs=1)
        assert counting.take() == 1
        _assert_current(store, tmp_path, tmp_path / "s")


def test_a_changed_detector_searches_every_series_again(store_url, tmp_path, monkeypatch):
    counting = Counting(monkeypatch)
    with open_store(store_url) as store:
        _fill(store)
        write_dashboard(store, tmp_path / "s", jobs=1)
        counting.take()
        monkeypatch.setattr(cpc, "detector_fingerprint", lambda: "another detector")
        write_dashboard(store, tmp_path / "s", jobs=1)
        assert counting.take() == 2
        write_dashboard(store, tmp_path / "s", jobs=1)
        assert counting.take() == 0  # kept again, under the new detector


def test_the_fingerprint_follows_the_detector_code(tmp_path, monkeypatch):
    assert "winml_perf.stats.series.changepoint" in cpc._detector_sources()
    fake = tmp_path / "changepoint.py"
    fake.write_text("# method A\n")
    monkeypatch.setattr(cpc, "_detector_sources", lambda: {"winml_perf.stats.series.changepoint": fake})
    cpc.detector_fingerprint.cache_clear()
    try:
        first = cpc.detector_fingerprint()
        fake.write_text("# method B\n")
        cpc.detector_fingerprint.cache_clear()
        assert cpc.detector_fingerprint() != first
    finally:
        cpc.detector_fingerprint.cache_clear()


def test_pages_written_by_worker_processes_equal_pages_written_here(store_url, tmp_path):
    with open_store(store_url) as store:
        _fill(store)
        for day in range(12):  # a second page
            store.write_json_record(
                make_cell(hex_id("p2", day), bundle="bundles/other", when=_night(day), step_ms=noisy(3.0, 6, 0.01, day))
            )
        write_dashboard(store, tmp_path / "one", jobs=1)
        _forget(store)
        write_dashboard(store, tmp_path / "two", jobs=2)  # cold: the workers search, this process keeps
        assert len(_kept_rows(store)) == 3
        for rel in ("pages/tb-linux/nightly.html", "pages/tb-linux/other.html"):
            assert (tmp_path / "two" / rel).read_text() == (tmp_path / "one" / rel).read_text()
        assert _index_body(tmp_path / "two") == _index_body(tmp_path / "one")


def test_the_dashboard_command_keeps_change_points_and_takes_jobs(tmp_path):
    from tests.conftest import run_winml

    db = tmp_path / "perf.db"
    with open_store(db) as store:
        _fill(store)
    first = run_winml("dashboard", "--store", db, "-o", tmp_path / "one", "--jobs", "1")
    assert first.returncode == 0, first.stderr
    with open_store(db) as store:
        assert len(_kept_rows(store)) == 2
    second = run_winml("dashboard", "--store", db, "-o", tmp_path / "two", "--jobs", "2")
    assert second.returncode == 0, second.stderr
    assert _page(tmp_path / "two") == _page(tmp_path / "one")
    bad = run_winml("dashboard", "--store", db, "-o", tmp_path / "three", "--jobs", "0")
    assert bad.returncode == 2 and "--jobs" in bad.stderr
