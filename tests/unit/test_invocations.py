"""Two levels of repetition: invocation rounds, per-invocation records, coverage, the two-level
stopping rule, mode and drift warnings (fake sessions, one fresh session per invocation)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from tests.unit.fakes import FAKE_ENV, fake_spec, open_fake_session
from winml_perf.measure import stopping
from winml_perf.measure.sweep import CellExtras, RunFacts, run_sweep
from winml_perf.model.spec import IterationPolicy, RouteSpec, WarmupPolicy, expand_sweep
from winml_perf.record.validation import validate_record


def routes(tmp_path: Path, **per_route) -> list[RouteSpec]:
    log = str(tmp_path / "loads.log")
    return [
        RouteSpec(label, fake_spec(f"fake-{label}", label=label, load_log_path=log, **opts), bundle="fake")
        for label, opts in per_route.items()
    ]


def sweep(rs, policy, *, prompt=(16,), new=(8,), seed=0, isolate=False, warmup=WarmupPolicy(count=1)):
    cells = expand_sweep(rs, list(prompt), list(new), warmup=warmup, iterations=policy)
    return run_sweep(
        cells,
        open_fake_session,
        seed=seed,
        isolate=isolate,
        facts=RunFacts(environment=FAKE_ENV),
        extras=CellExtras(roofline=False, sample_memory=False),
    )


def loads(tmp_path: Path) -> list[str]:
    return (tmp_path / "loads.log").read_text().splitlines()


def test_invocations_of_routes_interleave_in_a_seeded_shuffled_order_per_round(tmp_path):
    rs = routes(tmp_path, a={}, b={}, c={})
    run = sweep(rs, IterationPolicy(iterations=2, invocations=4), seed=11)
    order = run.sweep["order"]
    assert [o["invocation"] for o in order] == [0, 1, 2, 3]
    rng = random.Random(11)
    expected = [rng.sample(["a", "b", "c"], 3) for _ in range(4)]
    assert [[key.split("|")[0] for key in o["order"]] for o in order] == expected
    assert len({tuple(e) for e in expected}) > 1  # the order really changes between rounds
    assert loads(tmp_path) == [label for e in expected for label in e]  # one fresh session per route and round
    (tmp_path / "again").mkdir()
    again = sweep(routes(tmp_path / "again", a={}, b={}, c={}), IterationPolicy(iterations=2, invocations=4), seed=11)
    assert [o["order"] for o in again.sweep["order"]] == [o["order"] for o in order]


def test_an_invocation_serves_every_shape_of_its_route_after_one_load(tmp_path):
    rs = routes(tmp_path, a={}, b={})
    run = sweep(rs, IterationPolicy(iterations=3, invocations=2), prompt=(8, 16), new=(4, 6))
    assert len(run.cells) == 8
    assert sorted(loads(tmp_path)) == ["a", "a", "b", "b"]  # 2 invocations x 2 routes, not x 4 shapes
    for o in run.sweep["order"]:
        labels = [key.split("|")[0] for key in o["order"]]
        assert labels in (["a"] * 4 + ["b"] * 4, ["b"] * 4 + ["a"] * 4)  # a route's cells together


def test_each_sample_records_its_invocation_and_the_record_keeps_per_invocation_figures(tmp_path):
    rs = routes(tmp_path, a=dict(session_scales=[1.0, 2.0, 4.0], decode_ms=10.0))
    run = sweep(rs, IterationPolicy(iterations=4, invocations=3), warmup=WarmupPolicy(count=2))
    rec = run.cells[0].to_dict()
    validate_record(rec)
    its = rec["samples"]["iterations"]
    assert [s["invocation"] for s in its] == [0] * 4 + [1] * 4 + [2] * 4
    assert [s["round_index"] for s in its] == [0] * 4 + [1] * 4 + [2] * 4  # the round pairs routes' invocations
    assert [s["invocation"] for s in rec["samples"]["warmup"]] == [0, 0, 1, 1, 2, 2]
    figures = rec["invocations"]
    assert [f["index"] for f in figures] == [0, 1, 2] and all(f["iterations"] == 4 for f in figures)
    # decode 7 steps of 10, 20, 40 ms -> 100, 50, 25 tok/s
    assert [f["medians"]["decode_tokens_per_s"] for f in figures] == pytest.approx([100.0, 50.0, 25.0])
    assert all(f["model_load_ms"] is not None and f["warmup_iterations"] == 2 for f in figures)
    assert rec["stop_reason"] == "iterations" and rec["summary"]["invocations"] == 3


@pytest.mark.parametrize(
    "k, levels, method",
    [
        (1, ["iterations"], "order_statistics_iterations"),
        (3, ["invocations", "iterations"], "student_t_invocations"),
        (6, ["invocations", "iterations"], "order_statistics_invocations"),
    ],
)
def test_the_interval_says_what_it_covers(tmp_path, k, levels, method):
    rs = routes(tmp_path, a=dict(jitter_pct=2.0, session_scales=[1.0, 1.1, 0.95, 1.05, 1.02, 0.98]))
    rec = sweep(rs, IterationPolicy(iterations=6, invocations=k)).cells[0].to_dict()
    u = rec["uncertainty"]
    assert u["coverage"] == {"levels": levels, "invocations": k, "iterations": 6 * k}
    assert u["primary"]["method"] == method
    assert rec["summary"]["primary_ci95_covers"] == ("in-proc" if k == 1 else f"{k} proc")
    assert rec["summary"]["primary_ci95_low"] == u["primary"]["low"]
    assert u["within_process"]["coverage"]["levels"] == ["iterations"]  # kept beside it for comparison
    if k > 1:  # between-invocation spread makes the two-level interval wider than the pooled one
        width = u["primary"]["high"] - u["primary"]["low"]
        assert width > u["within_process"]["high"] - u["within_process"]["low"]


def test_itl_percentiles_have_generation_bootstrap_intervals(tmp_path):
    rs = routes(tmp_path, a=dict(jitter_pct=10.0, jitter_seed=3))
    rec = sweep(rs, IterationPolicy(iterations=10, invocations=2), new=(16,)).cells[0].to_dict()
    pcts = {p["percentile"]: p for p in rec["uncertainty"]["itl_percentiles"]}
    assert sorted(pcts) == [50.0, 90.0, 95.0, 99.0]
    for p in pcts.values():
        assert p["method"] == "generation_bootstrap" and p["generations"] == 20 and p["steps"] == 20 * 15
        assert p["low"] <= p["estimate"] <= p["high"]
    assert rec["summary"]["itl_ms_p99_ci95_high"] == pcts[99.0]["high"]


# -- the two-level stopping rule ----------------------------------------------------------------------
def adaptive(target=1.0, **kw):
    kw.setdefault("min_iterations", 3)
    kw.setdefault("invocations", 2)
    kw.setdefault("max_invocations", 10)
    return IterationPolicy.until_ci(target, **kw)


def test_decide_iterates_until_the_invocation_has_its_minimum_then_starts_a_second():
    policy = adaptive(target=0.001)
    assert stopping.decide(policy, [[1.0, 2.0]], 0.0, 0.01, 1.0).action == "iteration"
    d = stopping.decide(policy, [[1.0, 2.0, 3.0]], 0.0, 0.01, 1.0)
    assert d.action == "invocation" and "second" in d.reason


def test_decide_buys_iterations_when_they_vary_most_and_invocations_when_processes_differ():
    policy = adaptive(target=0.001)
    noisy_within = [[90.0, 110.0, 95.0, 105.0], [92.0, 108.0, 97.0, 103.0], [91.0, 109.0, 96.0]]
    assert stopping.decide(policy, noisy_within, 0.0, 0.01, 1.0).action == "iteration"
    noisy_between = [[100.0, 100.1, 99.9], [120.0, 120.1, 119.9], [80.0, 80.1, 79.9]]
    d = stopping.decide(policy, noisy_between, 0.0, 0.01, 1.0)
    assert d.action == "invocation" and "between-invocation" in d.reason
    # the same variances, but an invocation costs 10^6 iterations: iterate
    assert stopping.decide(policy, noisy_between, 0.0, 1e-6, 1.0).action == "iteration"


@pytest.mark.parametrize(
    "invocations, spent, policy_kw, reason",
    [
        ([[100.0] * 3, [100.0] * 3], 0.0, {}, "ci_target"),
        (
            [[100.0, 100.1, 99.9], [120.0, 120.1, 119.9], [80.0, 80.1, 79.9]],
            0.0,
            {"max_invocations": 3},
            "max_invocations",
        ),
        ([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], 0.0, {"max_iterations": 6}, "max_iterations"),
        ([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], 9.0, {"max_time_s": 5.0}, "max_time"),
    ],
)
def test_decide_stops_at_the_target_or_at_a_cap_and_says_which(invocations, spent, policy_kw, reason):
    d = stopping.decide(adaptive(**policy_kw), invocations, spent, 0.01, 1.0)
    assert (d.action, d.reason) == ("stop", reason)


def test_one_invocation_is_the_within_process_rule():
    policy = IterationPolicy.until_ci(1.0, min_iterations=3)
    assert policy.max_invocations == 1 and not policy.multi_invocation
    assert stopping.decide(policy, [[1.0, 2.0, 3.0]], 0.0, 0.01, 1.0).action == "iteration"


def test_adaptive_sweep_adds_invocations_when_processes_differ_and_stops_at_its_cap(tmp_path):
    rs = routes(tmp_path, a=dict(session_scales=[1.0, 1.3, 0.8, 1.2], jitter_pct=0.5))
    rec = sweep(rs, adaptive(target=0.5, max_invocations=4, max_iterations=400)).cells[0].to_dict()
    assert rec["stop_reason"] == "max_invocations"
    assert len(rec["invocations"]) == 4 and loads(tmp_path) == ["a"] * 4
    assert all(f["iterations"] >= 3 for f in rec["invocations"])
    assert "ci_target_not_reached" in [w["code"] for w in rec["warnings"]]


def test_adaptive_sweep_stops_at_the_target_when_invocations_agree(tmp_path):
    rs = routes(tmp_path, a=dict(jitter_pct=0.2, jitter_seed=1))
    rec = sweep(rs, adaptive(target=2.0, max_invocations=10)).cells[0].to_dict()
    assert rec["stop_reason"] == "ci_target"
    assert len(rec["invocations"]) == 2  # two invocations of 3 that agree reach ±2 %
    assert rec["summary"]["primary_ci95_half_width_pct"] <= 2.0


# -- modes and drift -----------------------------------------------------------------------------------
def test_bimodal_decode_steps_are_warned_with_both_modes(tmp_path):
    rs = routes(tmp_path, a=dict(decode_ms=6.2, scales=[1.0, 1.0, 1.0, 9.8 / 6.2, 9.8 / 6.2], jitter_pct=1.0))
    rec = sweep(rs, IterationPolicy(iterations=10, invocations=2), new=(16,)).cells[0].to_dict()
    w = next(w for w in rec["warnings"] if w["code"] == "bimodal")
    assert w["message"].startswith("decode steps are bimodal: 6.2")
    centres = [m["centre"] for m in w["data"]["modes"]]
    assert centres == pytest.approx([6.2, 9.8], rel=0.02)
    assert [round(m["share"], 1) for m in w["data"]["modes"]] == [0.6, 0.4]


def test_invocation_medians_that_drift_are_warned_with_their_range(tmp_path):
    rs = routes(tmp_path, a=dict(decode_ms=10.0, session_scales=[1.0, 1.1, 1.25], jitter_pct=0.5))
    rec = sweep(rs, IterationPolicy(iterations=10, invocations=3)).cells[0].to_dict()
    w = next(w for w in rec["warnings"] if w["code"] == "drift")
    # 100 / 1.25 = 80 ... 100 tok/s
    assert "drift 80.00–100.0 tok/s" in w["message"]  # four significant digits, as every number a person reads
    assert w["data"]["low"] == pytest.approx(80.0, rel=0.01) and w["data"]["high"] == pytest.approx(100.0, rel=0.01)
    (tmp_path / "steady").mkdir()
    steady = (
        sweep(routes(tmp_path / "steady", a=dict(jitter_pct=0.5)), IterationPolicy(iterations=10, invocations=3))
        .cells[0]
        .to_dict()
    )
    assert not any(w["code"] in ("drift", "bimodal") for w in steady["warnings"])


def test_invocations_in_fresh_processes(tmp_path):
    rs = routes(tmp_path, a={}, b={})
    run = sweep(rs, IterationPolicy(iterations=2, invocations=2), isolate=True)
    for cell in run.cells:
        pids = [f.pid for f in cell.invocations]
        assert len(set(pids)) == 2 and None not in pids  # a fresh process each
        assert cell.to_dict()["memory"] == {} or "each invocation" in (cell.memory.scope or "")
    assert sorted(loads(tmp_path)) == ["a", "a", "b", "b"]


# -- route ratios over paired invocations ----------------------------------------------------------------
def test_compare_routes_pairs_invocations_of_the_same_round_so_drift_cancels(tmp_path):
    from winml_perf.commands.compare_store import compare_stored_routes
    from winml_perf.results.store import open_store

    drift = [1.0, 1.0, 1.4, 1.4, 2.0, 2.0, 1.2, 1.2]  # the n-th session loaded: both routes of a round alike
    rs = routes(
        tmp_path, config=dict(decode_ms=10.0, session_scales=drift), fast=dict(decode_ms=5.0, session_scales=drift)
    )
    run = sweep(rs, IterationPolicy(iterations=4, invocations=4), seed=3)
    store = open_store(str(tmp_path / "r.db"))
    for cell in run.cells:
        store.write_record(cell)
    report = compare_stored_routes(store, metrics=["decode_tokens_per_s"])
    store.close()
    (row,) = report.rows
    assert row.pairing == "invocations" and row.rounds == 4
    # every pair: 2x faster exactly, although invocation medians range over 2x
    assert (row.speedup, row.ci_low, row.ci_high) == pytest.approx((2.0, 2.0, 2.0))
    assert "4 paired invocations" in row.sentence() and row.verdict == "faster"


def test_decide_starts_an_invocation_when_two_alike_invocations_cannot_narrow_by_iterating():
    # T2^2 = 0: K&J's r1* alone would iterate forever, but with 2 invocations the t quantile (12.7)
    # dominates and only a third invocation (t = 4.3) narrows the interval much
    alike = [[99.0, 101.0] * 200, [99.05, 101.05] * 200]
    policy = adaptive(target=0.001, max_iterations=10_000)
    d = stopping.decide(policy, alike, 0.0, 0.01, 1.0)
    assert d.action == "invocation" and "t quantile" in d.reason
    few = [[99.0, 101.0] * 3, [99.05, 101.05] * 3]
    assert stopping.decide(policy, few, 0.0, 0.01, 1.0).action == "iteration"  # cheap iterations first
