"""Mode-aware per-run levels (results/run_levels.py) and change points given invocation values."""

from __future__ import annotations

import numpy as np
import pytest

from winml_perf.stats.series import changepoint as cp
from winml_perf.stats.series.run_levels import _comb_anchors, _padded, mode_aware_levels


def _mixed(
    seed: int,
    n: int,
    *,
    step_at: int | None = None,
    step: float = 0.0,
    share=0.3,
    k: int = 5,
    sigma: float = 0.05,
    slow: float = 0.65,
    level: float = 100.0,
) -> list[np.ndarray]:
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


# -- the vectorised levels against the method written out run by run ------------------------------
def _reference_levels(values, window: int = 5):
    """mode_aware_levels as its module doc states it, one run and one window at a time."""
    import math

    from winml_perf.stats.modes import detect_modes
    from winml_perf.stats.series.run_levels import CLIP, TIE

    logs = [np.log(np.atleast_1d(np.asarray(v, dtype=float))) for v in values]
    n = len(logs)
    tops = np.array([y.max() for y in logs])
    reference = np.array([np.median(tops[max(0, t - window) : t + window + 1]) for t in range(n)])
    report = detect_modes(np.exp(np.concatenate([y - r for y, r in zip(logs, reference)])))
    raw = np.array([math.exp(y.mean()) for y in logs])
    if not report.bimodal:
        return raw, None, None
    offset = math.log(report.modes[0].centre / report.modes[1].centre)

    def comb(y):
        candidates = np.concatenate([y, y - offset])
        cost = [np.minimum(np.minimum((y - a) ** 2, (y - a - offset) ** 2), CLIP**2).sum() for a in candidates]
        a = candidates[int(np.flatnonzero(np.asarray(cost) <= min(cost) + TIE * max(min(cost), CLIP**2))[0])]
        near = np.where(np.abs(y - a) <= np.abs(y - a - offset), y, y - offset)
        keep = np.abs(near - a) < CLIP
        return near[keep].mean() if keep.any() else a

    def in_lower(y, anchor):
        return np.abs(y - anchor - offset) < np.abs(y - anchor)

    level, share, anchors = [], [], []
    for t in range(n):
        anchor = comb(np.concatenate(logs[max(0, t - window) : t + window + 1]))
        anchors.append(anchor)
        own = comb(logs[t])
        if 0 < in_lower(logs[t], own).sum() < len(logs[t]):  # the run shows both modes itself
            anchor = own
        lower = in_lower(logs[t], anchor)
        level.append(math.exp(np.where(lower, logs[t] - offset, logs[t]).mean()))
        share.append(lower.mean())
    return np.array(level), np.array(share), (offset, np.array(anchors))


@pytest.mark.parametrize("seed", range(10))
def test_vectorised_levels_equal_the_run_by_run_method(seed):
    rng = np.random.default_rng(100 + seed)
    runs = _mixed(
        seed,
        int(rng.integers(12, 160)),
        step_at=40,
        step=0.08,
        k=1 if seed < 3 else int(rng.integers(2, 12)),
        share=rng.uniform(0.1, 0.6, 1)[0],
    )
    # ragged runs: some lose invocations, a few keep one (one invocation per run: windows in one mode tie)
    runs = [r[: max(1, len(r) - int(rng.integers(0, len(r))))] if rng.random() < 0.3 else r for r in runs]
    levels = mode_aware_levels(runs)
    level, share, comb = _reference_levels(runs)
    assert levels.bimodal == (share is not None)
    np.testing.assert_allclose(levels.level, level, rtol=1e-12)
    if share is not None:
        np.testing.assert_array_equal(levels.lower_share, share)
        offset, anchors = comb
        np.testing.assert_allclose(
            _comb_anchors(_padded([np.log(r) for r in runs]), offset, 5), anchors, rtol=0, atol=1e-12
        )


def test_night_after_night_the_gate_is_stricter_than_the_dashboards_search():
    """The gate re-searches a sliding window every night, so it tests at GATE_ALPHA: on this
    shift-free history two nights fail at the dashboard's alpha and none at the gate's."""
    runs = _mixed(22, 190, k=10)
    nights = range(40, 191)

    def failed(**alpha) -> int:
        return sum(
            cp.judge_newest(runs[t - 40 : t], higher_is_better=True, threshold=0.05, **alpha).is_regression
            for t in nights
        )

    assert cp.GATE_ALPHA < cp.DEFAULT_ALPHA
    assert failed(alpha=cp.DEFAULT_ALPHA) == 2 and failed() == 0


def _step_near_the_modes_gap() -> list[list[float]]:
    """30 runs at 100 (3 of 10 invocations in the slow mode, x0.65), then 3 runs at 78 of 4
    invocations, one slow in the middle run only. After the step the fast invocations (log -0.25)
    lie nearer the lower tooth (-0.43) of a comb anchored on the runs before it than the upper one
    (0)."""
    rng = np.random.default_rng(11)
    slow = np.r_[np.full(3, 0.65), np.ones(7)]
    before = [list(100.0 * slow * rng.lognormal(0.0, 0.005, 10)) for _ in range(30)]
    after = [
        list(78.0 * np.array(modes) * rng.lognormal(0.0, 0.005, 4)) for modes in ([1] * 4, [1, 1, 1, 0.65], [1] * 4)
    ]
    return before + after


def test_a_run_that_shows_both_modes_itself_keeps_its_own_comb():
    levels = mode_aware_levels(_step_near_the_modes_gap())
    assert levels.bimodal and levels.level[31] == pytest.approx(78.0, rel=0.02)  # (the modes' ratio is estimated)
    assert levels.lower_share[31] == 0.25
    # a run in one mode takes its window's comb, which reaches back across the step
    assert levels.level[30] > 100 and levels.level[32] > 100


def test_runs_all_in_the_slow_mode_are_read_as_slow_not_as_a_lower_level():
    # 30 runs with 3 of 10 invocations slow, then 3 runs all slow: alone, each looks like one mode
    # at a level 35 % lower; the window's comb reads them as slow, which they are
    rng = np.random.default_rng(12)
    slow = np.r_[np.full(3, 0.65), np.ones(7)]
    runs = [list(100.0 * slow * rng.lognormal(0.0, 0.005, 10)) for _ in range(30)]
    runs += [list(65.0 * rng.lognormal(0.0, 0.005, 10)) for _ in range(3)]
    levels = mode_aware_levels(runs)
    assert levels.lower_share[-3:] == pytest.approx([1.0, 1.0, 1.0])
    assert levels.level[-3:] == pytest.approx(np.full(3, 100.0), rel=0.03)


@pytest.mark.parametrize("seed", [0, 2, 3])
def test_a_quarter_step_in_the_newest_runs_is_a_level_change_not_a_change_of_modes(seed):
    # a comb reaching across the step reads its fast invocations (x0.75) as slow ones (x0.65), and
    # the step as the lower mode's share going from 30 % to most
    rng = np.random.default_rng(seed)
    runs = [
        list(level * np.where(rng.random(10) < 0.3, 0.65, 1.0) * rng.lognormal(0.0, 0.05, 10))
        for level in np.r_[np.full(36, 100.0), np.full(4, 75.0)]
    ]
    v = cp.judge_newest(runs, list(range(40)), higher_is_better=True)
    assert v.is_regression and v.change_point.kind == cp.LEVEL and v.change_point.index == 36
    assert v.change_point.shift == pytest.approx(-0.25, abs=0.02)
    assert not any(
        p.kind == cp.MODE_SHARE for p in cp.detect_change_points(runs, higher_is_better=True, alpha=cp.GATE_ALPHA)
    )


def test_a_true_change_of_the_modes_shares_stays_one():
    rng = np.random.default_rng(4)
    share = np.r_[np.full(40, 0.2), np.full(40, 0.7)]
    runs = [list(100.0 * np.where(rng.random(10) < s, 0.65, 1.0) * rng.lognormal(0.0, 0.03, 10)) for s in share]
    assert [(p.kind, p.index) for p in cp.detect_change_points(runs, higher_is_better=True)] == [(cp.MODE_SHARE, 40)]


@pytest.mark.parametrize("step", [0.3, 0.4, 0.5])
def test_a_real_slowdown_after_a_stretch_of_fast_runs_is_never_judged_an_improvement(step):
    """TTFT-like times in two modes 2x apart: slow processes now and then for 15 nights, none after,
    then every invocation `step` slower from night 30. Each night after the step the gate may say
    unchanged or regression, never improvement (a rule that read one-mode windows by the nearest
    earlier level said 'improvement -30 %' here and let the slowdown through)."""
    for seed in range(4):
        rng = np.random.default_rng(seed)
        runs = [
            100.0
            * (1 + step if t >= 30 else 1.0)
            * np.where(rng.random(5) < (0.35 if t < 15 else 0.0), 2.0, 1.0)
            * rng.lognormal(0.0, 0.03, 5)
            for t in range(40)
        ]
        verdicts = [
            cp.judge_newest(runs[:m], list(range(m)), higher_is_better=False, threshold=0.05).status
            for m in range(31, 41)
        ]
        assert cp.IMPROVEMENT not in verdicts, (seed, verdicts)
        assert cp.REGRESSION in verdicts, (seed, verdicts)
