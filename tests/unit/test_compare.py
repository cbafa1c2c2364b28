"""Comparison statistics (Mann-Whitney U against reference values, the paired-round bootstrap,
verdicts, the regression gate) and compare routes / runs on hand-made records, with golden files."""

from __future__ import annotations

import json
import math
import random

import pytest

from tests.results_fakes import (
    GOLDEN_RUN_A,
    GOLDEN_RUN_B,
    assert_golden,
    golden_cells,
    hex_id,
    interleaved_run,
    make_cell,
    noisy,
)
from winml_perf.commands.compare_store import compare_stored_routes, compare_stored_runs
from winml_perf.compare.routes import RouteComparison
from winml_perf.compare.text import parse_pct
from winml_perf.results.selectors import resolve_run_id, select
from winml_perf.results.store import open_store
from winml_perf.stats import significance as sig
from winml_perf.support.errors import EXIT_USAGE, StoreError, UsageError

# scipy.stats.mannwhitneyu(x, y, alternative="two-sided", method="asymptotic", use_continuity=True), scipy 1.17.1
MW_REFERENCE = [
    ([1.1, 2.3, 3.5, 4.2, 5.9], [2.0, 6.1, 7.3, 8.8, 9.4, 10.2], 4.0, 0.05523425371806383),
    ([1, 2, 2, 3, 3, 3, 4], [3, 3, 4, 4, 5, 5, 6, 7], 6.0, 0.010834422131524878),
    ([10.0] * 5 + [11.0] * 5, [10.0] * 3 + [12.0] * 7, 22.5, 0.02954824075106704),
    (
        [100.0, 100.909, 101.818, 102.727, 103.636, 104.545, 105.455, 106.364, 107.273, 108.182, 109.091, 110.0],
        [104.0, 105.5, 107.0, 108.5, 110.0, 111.5, 113.0, 114.5, 116.0],
        18.5,
        0.012840968245285333,
    ),
    ([1, 2, 3], [4, 5, 6], 0.0, 0.08085559837005224),
]


@pytest.mark.parametrize("x, y, u, p", MW_REFERENCE)
def test_mann_whitney_matches_reference_values(x, y, u, p):
    r = sig.mann_whitney_u(x, y)
    assert r.u == u
    assert r.p_value == pytest.approx(p, rel=1e-12)
    assert sig.mann_whitney_u(y, x).p_value == pytest.approx(p, rel=1e-12)  # two-sided: symmetric


def test_mann_whitney_by_hand_and_degenerate_samples():
    # x=[1,2,3], y=[4,5,6]: U=0, mu=4.5, var=3*3/12*7=5.25, z=(4.5-0.5)/sqrt(5.25)
    z = 4.0 / math.sqrt(5.25)
    assert sig.mann_whitney_u([1, 2, 3], [4, 5, 6]).p_value == pytest.approx(math.erfc(z / math.sqrt(2)))
    assert sig.mann_whitney_u([5, 5, 5], [5, 5, 5, 5]).p_value == 1.0  # every value tied
    assert sig.mann_whitney_u([], [1.0, 2.0]).p_value == 1.0
    assert sig.mann_whitney_u([1.0, float("nan"), None], [3.0]).n_x == 1


def test_rank_with_ties_gives_mid_ranks():
    import numpy as np

    ranks, ties = sig.rank_with_ties(np.array([3.0, 1.0, 3.0, 2.0]))
    assert list(ranks) == [3.5, 1.0, 3.5, 2.0]
    assert sorted(ties) == [1, 1, 2]


def test_paired_bootstrap_is_seeded_and_pairing_cancels_shared_drift():
    rng = random.Random(7)
    drift = [1 + 0.2 * math.sin(r) for r in range(30)]  # machine drift hitting both routes each round
    base = {r: [100 * drift[r] * (1 + 0.005 * rng.gauss(0, 1))] for r in range(30)}
    cand = {r: [150 * drift[r] * (1 + 0.005 * rng.gauss(0, 1))] for r in range(30)}
    a, b = sig.paired_ratio_ci(base, cand), sig.paired_ratio_ci(base, cand)
    assert a == b  # same data, same seed: same interval
    assert a.ci_low < 1.5 < a.ci_high and a.rounds == 30
    # Without pairing (each route's rounds shuffled against the other), the same drift widens the interval.
    keys = list(cand)
    rng.shuffle(keys)
    unpaired = sig.paired_ratio_ci(base, {r: cand[k] for r, k in zip(range(30), keys)})
    assert (a.ci_high - a.ci_low) * 3 < unpaired.ci_high - unpaired.ci_low


def test_bootstrap_uses_common_rounds_and_batches_within_rounds():
    base = {0: [10.0, 10.2, 9.8], 1: [10.1, 9.9, 10.0], 2: [10.0]}
    cand = {0: [5.0, 5.1, 4.9], 1: [5.0, 5.05, 4.95]}  # round 2 has no candidate: left out
    ci = sig.paired_ratio_ci(base, cand)
    assert (ci.rounds, ci.n_baseline, ci.n_candidate) == (2, 6, 6)
    assert ci.ratio == pytest.approx(0.5, rel=0.01) and ci.ci_low <= ci.ratio <= ci.ci_high
    assert math.isnan(sig.paired_ratio_ci({0: [1.0]}, {1: [1.0]}).ratio)


@pytest.mark.parametrize(
    "low, high, verdict",
    [
        (1.05, 1.20, sig.FASTER),
        (0.80, 0.95, sig.SLOWER),
        (0.99, 1.015, sig.EQUIVALENT),
        (1.005, 1.03, sig.FASTER),
        (0.95, 1.10, sig.INCONCLUSIVE),
        (float("nan"), 1.0, sig.INCONCLUSIVE),
    ],
)
def test_ci_verdicts(low, high, verdict):
    assert sig.ci_verdict(low, high, 0.02) == verdict


def test_speedup_orientation_for_throughputs_and_times():
    ci = sig.RatioCI(0.5, 0.45, 0.55, 4, 4, 4, 100)  # candidate / baseline
    assert sig.speedup_ci(ci, bigger_is_better=False) == pytest.approx(
        (2.0, 1 / 0.55, 1 / 0.45)
    )  # half the time: 2x faster
    assert sig.speedup_ci(ci, bigger_is_better=True) == pytest.approx((0.5, 0.45, 0.55))  # half the tokens/s: slower


def _route_row(speedup, lo, hi, verdict):
    return RouteComparison(
        "b", "tb", 16, 8, "ep=webgpu", "config", "decode_tokens_per_s", speedup, lo, hi, verdict, 8, 64, 64, 2.0
    )


def test_route_sentence_prints_an_asymmetric_ci_as_it_is():
    # CI [1.01, 1.94] lies wholly above 1: "faster" is right, and "1.04 ± 0.90" would read as a CI down to 0.14
    text = _route_row(1.04, 1.01, 1.94, sig.ci_verdict(1.01, 1.94)).speed_sentence()
    assert "ran 1.04 times faster than config (95% CI +0.90/−0.03; p16 n8" in text and "±" not in text.split(":")[0]
    assert text.endswith(": faster")
    # a CI spanning 1 is never "faster", and says so
    assert sig.ci_verdict(0.14, 1.94) == sig.INCONCLUSIVE
    assert (
        _route_row(1.04, 0.14, 1.94, sig.INCONCLUSIVE)
        .speed_sentence()
        .endswith("spans both sides; raise --iterations (more rounds))")
    )
    # symmetric at two decimals keeps the plain "±"
    assert "ran 1.84 ± 0.01 times faster than config (p16" in _route_row(1.84, 1.83, 1.85, sig.FASTER).sentence()


def test_route_sentence_direction_follows_the_verdict_not_a_point_outside_the_ci():
    slower = _route_row(1.01, 0.5, 0.99, sig.SLOWER).speed_sentence()
    assert "times slower than config" in slower and slower.endswith(": slower")
    assert "ran 0.99 " in slower  # 1 / 1.01 on the "times slower" scale
    faster = _route_row(0.99, 1.01, 2.0, sig.FASTER).speed_sentence()
    assert "times faster than config" in faster and faster.endswith(": faster")


def test_change_verdicts_and_the_regression_gate():
    assert sig.change_verdict(-10.0, 0.001, bigger_is_better=True) == sig.SLOWER
    assert sig.change_verdict(+10.0, 0.001, bigger_is_better=False) == sig.SLOWER
    assert sig.change_verdict(-10.0, 0.2, bigger_is_better=True) == sig.UNCHANGED
    assert sig.change_verdict(-1.0, 0.001, bigger_is_better=True) == sig.EQUIVALENT
    assert sig.is_regression(-6.0, 0.01, True, 5.0) and not sig.is_regression(-4.0, 0.01, True, 5.0)
    assert not sig.is_regression(-6.0, 0.06, True, 5.0)  # not significant
    assert not sig.is_regression(+6.0, 0.01, True, 5.0)  # an improvement
    assert sig.is_regression(+6.0, 0.01, False, 5.0)  # a time that grew


def test_parse_pct():
    assert (
        parse_pct("2%", "--equivalence") == 2.0 and parse_pct(" 0.5 %", "--x") == 0.5 and parse_pct(None, "--x") is None
    )
    with pytest.raises(UsageError, match="--fail-on-regression"):
        parse_pct("five%", "--fail-on-regression")
    assert parse_pct("5%", "--fail-on-regression") == 5.0
    for flag in ("--fail-on-regression", "--equivalence"):  # 0.02 is 2 % to one reader, 0.02 % to another
        with pytest.raises(UsageError, match="'0.05' has no unit") as err:
            parse_pct("0.05", flag)
        assert err.value.exit_code == EXIT_USAGE and f"{flag} 5%" in str(err.value.remedy)


# -- on a store ------------------------------------------------------------------------------------
@pytest.fixture
def golden_store(store_url):
    with open_store(store_url) as store:
        store.write_json_records(golden_cells())
        yield store


def test_compare_routes_golden(golden_store):
    report = compare_stored_routes(golden_store)
    assert report.run_id == GOLDEN_RUN_A
    by = {(r.route, r.metric): r for r in report.rows}
    webgpu = by[("ep=webgpu", "decode_tokens_per_s")]
    assert webgpu.verdict == sig.FASTER and 1.80 < webgpu.speedup < 1.88 and webgpu.rounds == 8
    assert webgpu.sentence().startswith("ep=webgpu decode ran 1.8")
    s, lo, hi = webgpu.speedup, webgpu.ci_low, webgpu.ci_high  # the printed interval is the CI's own two sides
    assert (
        f"{s:.2f} times faster than config (95% CI +{hi - s:.2f}/−{s - lo:.2f};" in webgpu.sentence()
        and f"{s - lo:.2f}" != f"{hi - s:.2f}"
    )
    assert by[("ep=cpu", "decode_tokens_per_s")].verdict == sig.EQUIVALENT
    assert_golden(
        "compare_routes.json", json.dumps(report.to_dict(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    )


def test_compare_routes_in_memory_equals_the_stored_comparison(golden_store):
    from winml_perf.compare.cells import cells_of_run
    from winml_perf.compare.routes import compare_routes

    run = {"kind": "run", "run_id": GOLDEN_RUN_A, "cells": [c for c in golden_cells() if c["run_id"] == GOLDEN_RUN_A]}
    in_memory = compare_routes(cells_of_run(run), GOLDEN_RUN_A)
    assert in_memory.rows and in_memory.to_dict() == compare_stored_routes(golden_store, GOLDEN_RUN_A).to_dict()


def test_compare_runs_golden_and_gate(golden_store):
    report = compare_stored_runs(
        golden_store, f"run:{GOLDEN_RUN_A[:8]}", "commit:bbbb", route="config", fail_threshold_pct=5.0
    )
    by = {r.metric: r for r in report.rows}
    decode = by["decode_tokens_per_s"]
    # one invocation a side: the table cannot judge the change (iterations of one process are not
    # independent replicates), the gate can (by the candidate's interval: two runs of history)
    assert decode.verdict == sig.INCONCLUSIVE and "1 vs 1 invocations" in decode.verdict_reason
    assert decode.delta_pct == pytest.approx((1 / 2.205 - 1 / 2.005) / (1 / 2.005) * 100, abs=0.5)
    assert not by["ttft_ms"].regression  # identical prompt timings
    assert decode.regression and decode.gate == "regression" and "wholly on the worse side" in decode.gate_reason
    assert not by["tpot_ms"].regression and by["tpot_ms"].gate == "counted once"
    # one verdict a line, the one that decides the exit code: the gate's, not also the two runs' (issue 37)
    assert decode.sentence().endswith(f"invocations): REGRESSION ({decode.gate_reason})")
    assert "inconclusive" not in decode.sentence() and by["ttft_ms"].sentence().endswith(
        "): unchanged (" + by["ttft_ms"].gate_reason + ")"
    )
    assert report.notes == ()  # the failed ep=webgpu cell is not a config cell
    assert_golden(
        "compare_runs.json", json.dumps(report.to_dict(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    )
    relaxed = compare_stored_runs(
        golden_store, "version:0.1.0", "version:0.1.1", route="config", fail_threshold_pct=15.0
    )
    assert not relaxed.regressions


def test_compare_runs_refuses_mismatched_series_unless_forced(golden_store):
    with pytest.raises(UsageError, match="only in baseline: tiny-qwen2 ep=cpu") as err:
        compare_stored_runs(golden_store, "date:2025-01-01", "date:2025-01-02")
    assert err.value.exit_code == EXIT_USAGE
    forced = compare_stored_runs(golden_store, "date:2025-01-01", "date:2025-01-02", force=True)
    assert {r.key[2] for r in forced.rows} == {"config"}
    assert any("only in baseline" in n for n in forced.notes) and "candidate: 1 failed cell(s) left out" in forced.notes


def test_forced_comparison_of_two_different_shapes(store_url):
    with open_store(store_url) as store:
        store.write_json_record(make_cell(hex_id("s1"), prompt_tokens=16))
        store.write_json_record(make_cell(hex_id("s2"), prompt_tokens=128, when="2025-01-02T00:00:00Z"))
        s1, s2 = f"run:{hex_id('s1')}", f"run:{hex_id('s2')}"  # 'previous'/'latest' are per series: two series here
        with pytest.raises(UsageError, match="--force"):
            compare_stored_runs(store, s1, s2)
        report = compare_stored_runs(store, s1, s2, force=True)
        assert report.rows[0].key[3] == 16 and report.rows[0].candidate_key[3] == 128
        assert "--force: comparing" in report.notes[0]


def test_selectors_and_unknown_ids(golden_store):
    assert select(golden_store, GOLDEN_RUN_A[:6], "--baseline").meaning == f"run {GOLDEN_RUN_A}"
    assert select(golden_store, "aaaa1111", "--baseline").meaning == "git commit aaaa1111*"
    assert select(golden_store, "0.1.1", "--baseline").meaning == "winml-perf 0.1.1"
    assert len(select(golden_store, "2025-01-01", "--baseline").records) == 3
    latest = select(golden_store, "latest", "--candidate")  # per series: run B's config and ep=webgpu, run A's ep=cpu
    assert latest.meaning == "latest run of each of 3 series (2 runs)"
    assert sorted((r["route"], r["run_id"]) for r in latest.records) == [
        ("config", GOLDEN_RUN_B),
        ("ep=cpu", GOLDEN_RUN_A),
        ("ep=webgpu", GOLDEN_RUN_B),
    ]
    assert select(golden_store, "latest", "--candidate", route="config").meaning == f"latest run {GOLDEN_RUN_B}"
    assert [r["run_id"] for r in select(golden_store, "previous", "--baseline", route="config").records] == [
        GOLDEN_RUN_A
    ]
    with pytest.raises(StoreError, match="--baseline 'deadbeef' matches no records") as err:
        compare_stored_runs(golden_store, "deadbeef", "latest")
    assert err.value.exit_code == EXIT_USAGE
    with pytest.raises(StoreError, match="no run 'ffff'"):
        compare_stored_routes(golden_store, "ffff")
    with pytest.raises(UsageError, match="same records"):
        compare_stored_runs(golden_store, "latest", f"run:{GOLDEN_RUN_B}")


def test_compare_routes_needs_the_baseline_route(golden_store):
    with pytest.raises(UsageError, match="--baseline-route"):
        compare_stored_routes(golden_store, GOLDEN_RUN_A, baseline_route="device=npu")
    report = compare_stored_routes(
        golden_store, GOLDEN_RUN_A, baseline_route="ep=cpu", routes=["ep=webgpu"], metrics=["decode_tokens_per_s"]
    )
    assert [(r.route, r.baseline_route, r.metric) for r in report.rows] == [
        ("ep=webgpu", "ep=cpu", "decode_tokens_per_s")
    ]


def test_compare_routes_without_a_run_of_two_routes_gives_a_remedy_that_measures_two(store_url):
    """The remedy once said `--route config --route ep=cpu`: on a bundle whose config runs on the CPU
    EP (every bundle here) that route is the config route, measured once, and the command failed again."""
    with open_store(store_url) as store:
        store.write_json_record(make_cell(hex_id("one")))
        with pytest.raises(StoreError, match="together with another route") as err:
            compare_stored_routes(store)
    remedy = err.value.remedy
    assert "ep=cpu" not in remedy, remedy
    assert "winml devices" in remedy and "--route config --route ep=EP" in remedy, remedy


def test_a_filter_that_matches_nothing_is_named_not_the_selector_or_run(golden_store):
    """A typo in --testbed said "--baseline 'previous' matches no records" (compare runs), "no run '1a2b'
    ... it holds no runs" (--run) or that no run measured two routes (compare routes)."""
    with pytest.raises(StoreError, match=r"no record in .* matches --testbed 'tb-linx'") as err:
        compare_stored_runs(golden_store, "previous", "latest", testbed="tb-linx", route="config")
    assert "--baseline" not in str(err.value) and err.value.exit_code == EXIT_USAGE
    with pytest.raises(StoreError, match=r"matches --testbed 'tb-linx' --prompt-tokens 16") as err:
        resolve_run_id(golden_store, GOLDEN_RUN_A[:4], "--run", testbed="tb-linx", prompt_tokens=16)
    assert "holds no runs" not in str(err.value)
    with pytest.raises(StoreError, match=r"matches --testbed 'tb-linx'") as err:
        compare_stored_routes(golden_store, testbed="tb-linx")
    assert "together with another route" not in str(err.value)
    with pytest.raises(
        StoreError, match="--baseline 'deadbeef' matches no records"
    ):  # the filters match: the selector is at fault
        compare_stored_runs(golden_store, "deadbeef", "latest", route="config")


def test_compare_routes_on_a_noisy_sweep_with_batches(store_url):
    run = hex_id("noisy")
    rounds = [r for r in range(10) for _ in range(2)]  # two iterations per round
    with open_store(store_url) as store:
        for cell in interleaved_run(
            run, {"config": noisy(2.0, 20, 0.02, 1), "ep=cpu": noisy(2.0 / 1.3, 20, 0.02, 2)}, rounds=rounds
        ):
            store.write_json_record(cell)
        (row,) = compare_stored_routes(store, metrics=["decode_tokens_per_s"]).rows
    assert row.rounds == 10 and row.n_baseline == 20 and row.verdict == sig.FASTER
    assert row.ci_low < 1.3 < row.ci_high


def test_rolling_baseline_flags_a_step_and_not_noise():
    from winml_perf.stats.significance import rolling_flags

    rng = random.Random(3)
    centers = [100.0] * 6 + [90.0] * 2 + [100.0] * 2 + [112.0]  # tokens/s: a 10 % drop, recovery, a 12 % gain
    points = [{"id": i, "status": "ok"} for i in range(len(centers))] + [{"id": 99, "status": "failed"}]
    samples = {
        i: [{"decode_tokens_per_s": c * (1 + rng.gauss(0, 0.005))} for _ in range(8)] for i, c in enumerate(centers)
    }
    flags = rolling_flags(points, samples, "decode_tokens_per_s", window=5, threshold_pct=5.0)
    assert flags[6]["flag"] == "regression" and flags[6]["delta_pct"] == pytest.approx(-10, abs=1.0)
    assert flags[10]["flag"] == "improvement"
    assert not any(i in flags for i in range(6))  # noise within 1 % is never flagged
    # for a time, up is bad: the same step in ms is a regression
    ms = {i: [{"ttft_ms": 1000.0 / s["decode_tokens_per_s"]} for s in v] for i, v in samples.items()}
    assert rolling_flags(points, ms, "ttft_ms", window=5, threshold_pct=5.0)[10]["flag"] == "improvement"


def _nightly(store, testbed: str, levels: list[float], start_day: int = 1, route: str = "config") -> None:
    """One cell per night on ``testbed``: decode step times around 1000 / level ms."""
    for night, level in enumerate(levels):
        day = start_day + night
        store.write_json_record(
            make_cell(
                hex_id("night", testbed, route, night),
                testbed=testbed,
                route=route,
                when=f"2025-{1 + day // 28:02d}-{1 + day % 28:02d}T02:00:00Z",
                step_ms=noisy(1000.0 / level, 6, 0.004, hash((testbed, night)) % 1000),
            )
        )


def test_the_gate_fails_on_a_change_point_of_the_newest_runs_not_on_one_bad_night(store_url):
    rng = random.Random(5)
    flat = [500 * (1 + rng.gauss(0, 0.01)) for _ in range(20)]
    with open_store(store_url) as store:
        _nightly(store, "tb-shift", flat + [450 * (1 + rng.gauss(0, 0.01)) for _ in range(6)])  # -10 % for 6 nights
        _nightly(store, "tb-blip", flat + [450.0])  # one slow night at the end
        shifted = compare_stored_runs(
            store, "previous", "latest", testbed="tb-shift", metrics=["decode_tokens_per_s"], fail_threshold_pct=5.0
        )
        (row,) = shifted.rows
        assert row.regression and row.gate == "regression" and "change point at index 20" in row.gate_reason
        blip = compare_stored_runs(
            store, "previous", "latest", testbed="tb-blip", metrics=["decode_tokens_per_s"], fail_threshold_pct=5.0
        )
        (row,) = blip.rows
        assert row.delta_pct < -5  # the table shows it (one invocation a side: no verdict) ...
        assert not row.regression and row.gate == "unchanged"  # ... the gate waits for a change point
        relaxed = compare_stored_runs(
            store, "previous", "latest", testbed="tb-shift", metrics=["decode_tokens_per_s"], fail_threshold_pct=15.0
        )
        assert not relaxed.regressions and "within the 15.0% threshold" in relaxed.rows[0].gate_reason


def test_the_unfiltered_gate_works_in_a_fleet(store_url):
    with open_store(store_url) as store:
        _nightly(store, "tb-a", [500, 501, 499])
        _nightly(store, "tb-b", [300, 301, 250])  # tb-b's newest night is 17 % slower
        _nightly(store, "tb-new", [400], start_day=3)  # a testbed with one night so far
        report = compare_stored_runs(
            store, "previous", "latest", metrics=["decode_tokens_per_s"], fail_threshold_pct=5.0
        )
        assert sorted(r.key[0] for r in report.rows) == ["tb-a", "tb-b"]
        assert [r.key[0] for r in report.regressions] == ["tb-b"]
        assert any("one run of this series so far" in n and "tb-new" in n for n in report.notes)


def test_the_runs_csv_carries_the_intervals_digits_as_json_does(capsys):
    """The runs CSV gave the shift's interval as one text cell rounded to 0.1 % ("'-36.4%, -17.3%",
    the quote a spreadsheet guard); it has the two bounds as numbers now, as JSON has them (none: empty)."""
    import csv
    import io

    from winml_perf.commands.compare import _print_runs
    from winml_perf.compare.runs import RunChange, RunsReport

    key = ("lab-a", "smollm2", "config", 32, 8, "f3d2e1")
    measured = RunChange(key, key, "decode_tokens_per_s", 5, 5, 58.09, 45.64, -21.43534, -36.429013349, -17.29688499, 0.0122, sig.SLOWER, False)  # fmt: skip
    too_few = RunChange(key, key, "ttft_ms", 1, 1, 103.6, 122.7, 18.49, math.nan, math.nan, 1.0, sig.INCONCLUSIVE, False)  # fmt: skip
    report = RunsReport("run:a", "run:b", (measured, too_few), None, 2.0)
    _print_runs(report, "csv")
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [(r["Δ 95% CI low %"], r["Δ 95% CI high %"]) for r in rows] == [("-36.429013349", "-17.29688499"), ("", "")]
    assert "Δ 95% CI" not in rows[0] and not any(v.startswith("'") for r in rows for v in r.values()), rows
    doc = report.to_dict()["changes"]
    assert [(c["delta_low_pct"], c["delta_high_pct"]) for c in doc] == [(-36.429013349, -17.29688499), (None, None)]


def test_previous_on_the_first_night_says_each_series_has_one_run(store_url):
    """The first night: "--baseline 'previous' matches no records ...; use run:ID, ..., latest or
    previous", the selector given as its own remedy. It says why now, and what to do (docs/nightly.md)."""
    with open_store(store_url) as store:
        store.write_json_record(make_cell(hex_id("night-1")))
        with pytest.raises(StoreError, match="--baseline 'previous' matches no records") as err:
            compare_stored_runs(store, "previous", "latest")
    assert "one run so far" in str(err.value) and err.value.exit_code == EXIT_USAGE
    assert "latest or previous" not in err.value.remedy and "second night" in err.value.remedy, err.value.remedy
