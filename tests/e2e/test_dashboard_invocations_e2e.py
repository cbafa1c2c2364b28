"""The dashboard's change points come from the same mode-aware input as the regression gate: each
record's per-invocation medians (``metrics.invocations``), through the real `winml dashboard` and
`winml compare runs --fail-on-regression` on a real store (SQLite, and PostgreSQL in CI).

The nightly series are those of test_gate_invocations_e2e: 5 invocations x 4 iterations a night,
an invocation in a slow mode (decode steps 1 / 0.65 longer) 30 % of the time; one testbed flat,
one whose slow mode went from 10 % to 80 % of invocations, one whose decode got 10 % slower in
the newest nights (a seed where the records' medians, which
inherit the slow mode, show no change point: what the dashboard searched before)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import run_winml
from tests.e2e.test_gate_invocations_e2e import FRESH, INVOCATIONS, NIGHTS, _gate, _series
from tests.results_fakes import hex_id
from winml_perf.compare.gate import GATE_HISTORY, run_estimates
from winml_perf.publish.dashboard import write_dashboard
from winml_perf.publish.dashboard_page import page_path
from winml_perf.results import change_point_cache as cpc
from winml_perf.results import migrations as mig
from winml_perf.results.invocation_history import invocation_histories
from winml_perf.results.series import series_columns
from winml_perf.results.store import open_store
from winml_perf.stats.series import changepoint
from winml_perf.support.errors import UsageError

pytestmark = pytest.mark.e2e

METRIC = "decode_tokens_per_s"


@pytest.fixture
def mode_store(store_url):  # noqa: F811
    with open_store(store_url) as store:
        store.write_json_records(
            _series("tb-flat", 1)
            + _series("tb-slower", 5, fresh_slowdown=1.10)
            + _series("tb-slow-mode", 3, fresh_share=0.8)
        )
    return store_url


def _primary_change_points(site: Path, testbed: str) -> list[str]:
    page = (site / page_path(testbed, "tiny-qwen2")).read_text()
    card = re.search(r'<section class="card" data-primary data-metric="decode_tokens_per_s">.*?</section>', page, re.S)
    assert card is not None, "the page has no primary card"
    return re.findall(r'<li class="[^"]*" data-route="[^"]*">(.*?)</li>', card.group(0))


def test_the_dashboard_marks_the_step_the_gate_fails_and_nothing_in_a_mode_mixed_flat_series(mode_store, tmp_path):
    built = run_winml("dashboard", "--store", mode_store, "-o", tmp_path / "site")
    assert built.returncode == 0, built.stdout + built.stderr
    slower = _primary_change_points(tmp_path / "site", "tb-slower")
    assert len(slower) == 1 and "regression" in slower[0], slower
    first_slow_night = f"2025-02-{1 + (NIGHTS - FRESH) // 24:02d}"  # the nights of _series: 24 a "day"
    assert first_slow_night in slower[0] and f"(commit {hex_id('commit', NIGHTS - FRESH)[:14]})" in slower[0], slower
    shift = float(re.search(r": ([-+][0-9.]+)% \[", slower[0]).group(1))
    assert -12.0 < shift < -8.0, slower
    assert _primary_change_points(tmp_path / "site", "tb-flat") == []
    slow_mode = _primary_change_points(tmp_path / "site", "tb-slow-mode")
    assert any(
        re.search(r"regression \(lower mode in [0-9]+% → [89][0-9]% of invocations\)", cp) for cp in slow_mode
    ), slow_mode
    assert _gate(mode_store, "tb-slower").returncode == 1
    assert _gate(mode_store, "tb-flat").returncode == 0


def test_the_dashboard_searches_the_numbers_the_gate_judges(mode_store, tmp_path, monkeypatch):
    searched: list[list] = []
    real = changepoint.detect_change_points

    def recorded(values, *args, **kwargs):
        searched.append([list(v) for v in values])
        return real(values, *args, **kwargs)

    monkeypatch.setattr(changepoint, "detect_change_points", recorded)
    with open_store(mode_store) as store:
        write_dashboard(store, tmp_path / "site", jobs=1)
        key = store.records(testbed="tb-slower")[0]["series_key"]
        gate_values, _, _ = run_estimates(invocation_histories(store, key, [METRIC], newest=GATE_HISTORY)[METRIC])
    assert len(searched) == 3 and all(len(runs) == NIGHTS for runs in searched)
    assert all(len(run) == INVOCATIONS for runs in searched for run in runs)
    assert gate_values in searched  # the same per-invocation medians, in the same order


def test_a_change_point_kept_from_medians_is_not_reused_for_invocation_lists(mode_store):
    with open_store(mode_store) as store:
        key = store.records(testbed="tb-slower")[0]["series_key"]
        cols = series_columns(store, key, [METRIC], invocations_of=[METRIC], window=120)
        lists, _ = cpc.search_of(key, METRIC, cols, 120, {"higher_is_better": True})
        cols.invocations.clear()  # as before migration 0006: one median per record
        medians, _ = cpc.search_of(key, METRIC, cols, 120, {"higher_is_better": True})
    assert all(isinstance(v, float) for v in medians.values)
    assert all(len(v) == INVOCATIONS for v in lists.values) and lists.record_ids == medians.record_ids
    kept_from_medians = (medians.digest(cpc.detector_fingerprint()), "[]")
    assert cpc.current(medians, kept_from_medians) == []
    assert cpc.current(lists, kept_from_medians) is None  # recomputed, never read
    assert medians.detect() == []  # the medians miss the 10 % step ...
    assert [(cp["index"], cp["kind"]) for cp in lists.detect()] == [
        (NIGHTS - FRESH, changepoint.LEVEL)
    ]  # ... the invocations do not


def test_records_without_invocations_are_searched_by_their_median(store_url, tmp_path):  # noqa: F811
    cells = _series("tb-old", 4, fresh_slowdown=1.10)
    for cell in cells:  # records made before invocations existed
        for sample in cell["samples"]["iterations"]:
            sample.pop("invocation")
    with open_store(store_url) as store:
        store.write_json_records(cells)
        key = store.records()[0]["series_key"]
        cols = series_columns(store, key, [METRIC], invocations_of=[METRIC], window=120)
        search, where = cpc.search_of(key, METRIC, cols, 120, {"higher_is_better": True})
    assert cols.invocations[METRIC] == {}
    assert list(search.values) == cols.values[METRIC][0][where].tolist()  # one value per run: its median


def test_invocation_lists_are_read_exactly_and_a_damaged_one_is_named(mode_store):
    with open_store(mode_store) as store:
        key = store.records(testbed="tb-slower")[0]["series_key"]
        cols = series_columns(store, key, [METRIC], invocations_of=[METRIC], window=120)
        gate = invocation_histories(store, key, [METRIC], newest=GATE_HISTORY)[METRIC]
        lists = cols.invocations[METRIC]
        assert len(lists) == NIGHTS and all(len(v) == INVOCATIONS for v in lists.values())
        assert [lists[row["id"]] for row in gate] == [row["invocations"] for row in gate]  # the gate's numbers, exactly
        with store.engine.begin() as conn:
            conn.execute(
                mig.metrics.update()
                .where(mig.metrics.c.record_id == max(lists), mig.metrics.c.name == METRIC)
                .values(invocations='{"not": "a list"}')
            )
        with pytest.raises(UsageError, match="metrics.invocations of series .* not a JSON list"):
            series_columns(store, key, [METRIC], invocations_of=[METRIC], window=120)
