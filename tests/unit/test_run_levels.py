"""Mode-aware per-run levels (results/run_levels.py) and change points given invocation values."""

from __future__ import annotations

import numpy as np
import pytest

from winml_perf.results import changepoint as cp
from winml_perf.results.run_levels import mode_aware_levels


def _mixed(seed: int, n: int, *, step_at: int | None = None, step: float = 0.0, share=0.3, k: int = 5,
           sigma: float = 0.05, slow: float = 0.65, level: float = 100.0) -> list[np.ndarray]:
    """n runs of k invocations: a fraction ``share`` (scalar or per run) in a mode ``slow`` x slower."""
    rng = np.random.default_rng(seed)
    base = np.full(n, level)
    if step_at is not None:
        base[step_at:] *= 1 + step
    p = np.broadcast_to(np.asarray(share, dtype=float), (n,))
    mode = np.where(rng.random((n, k)) < p[:, None], slow, 1.0)
    return list(base[:, None] * mode * rng.lognormal(0.0, sigma, (n, k)))


def test_levels_sit_on_the_upper_mode_and_the_share_is_the_lower_modes():
    levels = mode_aware_levels(_mixed(1, 200))
    assert levels.bimodal and levels.ratio == pytest.approx(0.65, abs=0.02)
    assert float(np.exp(np.mean(np.log(levels.level)))) == pytest.approx(100.0, rel=0.01)
    assert float(levels.lower_share.mean()) == pytest.approx(0.3, abs=0.03)
    # the mixed per-run medians spread far more than the mode-aware levels
    medians = np.array([np.median(r) for r in _mixed(1, 200)])
    assert np.std(np.log(levels.level)) < 0.5 * np.std(np.log(medians))


def test_unimodal_invocations_give_geometric_means_and_no_share():
    runs = _mixed(2, 100, share=0.0)
    levels = mode_aware_levels(runs)
    assert not levels.bimodal and levels.lower_share is None and levels.ratio == 1.0
    assert np.allclose(levels.level, [np.exp(np.mean(np.log(r))) for r in runs])


def test_levels_follow_a_large_step_without_mistaking_modes():
    runs = _mixed(3, 120, step_at=60, step=-0.20)
    levels = mode_aware_levels(runs)
    assert np.median(levels.level[:55]) == pytest.approx(100.0, rel=0.02)
    assert np.median(levels.level[65:]) == pytest.approx(80.0, rel=0.02)
    assert abs(float(levels.lower_share[65:].mean()) - 0.3) < 0.06  # the post-step fast mode is not called slow


def test_a_5pct_step_in_mode_mixed_runs_is_found_within_2_runs():
    for seed in (4, 5, 6):
        points = cp.detect_change_points(_mixed(seed, 120, step_at=60, step=-0.05), higher_is_better=True)
        levels = [p for p in points if p.kind == cp.LEVEL]
        assert len(levels) == 1 and abs(levels[0].index - 60) <= 2, (seed, points)
        assert levels[0].direction == cp.REGRESSION and levels[0].shift == pytest.approx(-0.05, abs=0.02)
        assert not [p for p in points if p.kind == cp.MODE_SHARE]


def test_no_change_point_in_shift_free_mode_mixed_runs():
    for seed in range(7, 12):
        assert cp.detect_change_points(_mixed(seed, 150), higher_is_better=True) == []


def test_a_slow_mode_that_becomes_more_frequent_is_a_mode_share_regression():
    share = np.r_[np.full(60, 0.2), np.full(60, 0.7)]
    points = cp.detect_change_points(_mixed(13, 120, share=share), [f"r{i}" for i in range(120)], higher_is_better=True)
    (found,) = [p for p in points if p.kind == cp.MODE_SHARE]
    assert abs(found.index - 60) <= 3 and found.run_id == f"r{found.index}"
    assert found.share_before == pytest.approx(0.2, abs=0.08) and found.share_after == pytest.approx(0.7, abs=0.08)
    assert found.direction == cp.REGRESSION and found.shift_low < found.shift < found.shift_high < 0
    assert not [p for p in points if p.kind == cp.LEVEL]  # the level of each mode did not move


def test_the_gate_fails_on_a_fresh_mode_share_regression_and_a_fresh_step():
    share = np.r_[np.full(34, 0.1), np.full(6, 0.8)]
    v = cp.judge_newest(_mixed(14, 40, share=share), higher_is_better=True, threshold=0.05)
    assert v.is_regression and v.change_point.kind == cp.MODE_SHARE and "mode share" in v.reason
    v = cp.judge_newest(_mixed(15, 40, step_at=34, step=-0.10), higher_is_better=True, threshold=0.05)
    assert v.is_regression and v.change_point.kind == cp.LEVEL and abs(v.change_point.index - 34) <= 1



def test_the_gate_rarely_fails_a_shift_free_mode_mixed_history():
    # two tests (level, share) per segment at alpha 0.02 each: a few percent of histories at most
    verdicts = [cp.judge_newest(_mixed(seed, 40), higher_is_better=True, threshold=0.05) for seed in range(100, 140)]
    assert sum(v.is_regression for v in verdicts) <= 2


def test_slow_drift_is_not_a_change_point_with_the_local_shift_floor():
    n = 300
    drift = 1 + 0.015 * np.sin(2 * np.pi * np.arange(n) / 120)
    runs = [r * d for r, d in zip(_mixed(17, n, k=10, sigma=0.03), drift)]
    assert cp.detect_change_points(runs, higher_is_better=True) == []
    assert cp.detect_change_points(runs, higher_is_better=True, min_shift=0.0)  # significant, but not a step


def test_one_invocation_per_run_and_ragged_runs_are_accepted():
    runs = _mixed(18, 100, step_at=50, step=0.15, k=1)
    runs[10] = np.r_[runs[10], runs[10] * 1.01]
    (point,) = [p for p in cp.detect_change_points(runs, higher_is_better=True) if p.kind == cp.LEVEL]
    assert abs(point.index - 50) <= 2 and point.direction == cp.IMPROVEMENT
