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

    anchors, final, one_mode = [], [], []
    for t in range(n):
        near = np.concatenate(logs[max(0, t - window) : t + window + 1])
        anchor = comb(near)
        anchors.append(anchor)
        own = comb(logs[t])
        both = 0 < in_lower(logs[t], own).sum() < len(logs[t])  # the run shows both modes itself
        final.append(own if both else anchor)
        one_mode.append(not both and not in_lower(near, anchor).any())
    decided = [t for t in range(n) if not one_mode[t]]
    if decided and len(decided) < n:  # a window in one mode: the tooth nearer the run before (or after)
        first = decided[0]
        for t in [*range(first + 1, n), *reversed(range(first))]:
            if one_mode[t]:
                before = final[t - 1] if t > first else final[t + 1]
                other = final[t] - offset
                final[t] = other if abs(other - before) < abs(final[t] - before) else final[t]
    level, share = [], []
    for t in range(n):
        lower = in_lower(logs[t], final[t])
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


@pytest.mark.parametrize("seed", range(4))
def test_vectorised_levels_equal_the_run_by_run_method_where_windows_hold_one_mode(seed):
    """Times (higher is worse) whose slow mode stops for a stretch: windows in one mode, read by the
    run before them."""
    rng = np.random.default_rng(200 + seed)
    n = int(rng.integers(30, 60))
    share = np.where(np.arange(n) < 0.4 * n, 0.35, 0.0)
    if seed % 2:
        share[int(0.8 * n) :] = 0.35  # and comes back
    runs = [1000.0 / r for r in _mixed(seed, n, share=share, k=int(rng.integers(3, 8)))]
    levels = mode_aware_levels(runs)
    level, lower_share, _ = _reference_levels(runs)
    assert levels.bimodal and lower_share is not None
    assert lower_share[int(0.6 * n)] == 1.0  # a fast run far from any slow one: the lower mode, as the runs before
    np.testing.assert_allclose(levels.level, level, rtol=1e-12)
    np.testing.assert_array_equal(levels.lower_share, lower_share)


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


#: TTFT ms of 18 nights of SmolLM2-135M (5 invocations each, `winml perf BUNDLE --iterations 3 --warmup 1
#: --max-new-tokens 8 --prompt-tokens 32`) on a shared 2-core machine: processes of the first 9 nights
#: now and then ran at half speed (~190 ms), none after; nothing else changed.
NIGHTS_TTFT_MS = [
    [97.48, 110.74, 88.82, 86.95, 108.02], [185.4, 215.34, 113.48, 122.47, 226.48],
    [191.77, 195.26, 175.59, 187.96, 94.72], [110.51, 98.57, 108.33, 97.08, 131.62],
    [223.42, 212.61, 93.99, 180.49, 186.46], [86.57, 93.62, 96.05, 89.08, 98.57],
    [90.68, 90.45, 90.52, 96.07, 181.34], [91.81, 96.29, 92.64, 188.03, 203.4],
    [187.0, 110.09, 99.59, 238.12, 190.49], [90.14, 100.51, 93.19, 114.87, 110.6],
    [97.72, 101.74, 109.29, 108.37, 109.92], [97.82, 98.96, 92.44, 101.84, 108.16],
    [87.19, 90.51, 89.56, 86.33, 87.81], [88.95, 89.77, 104.09, 92.73, 93.47],
    [102.69, 102.14, 90.98, 106.6, 91.63], [98.25, 93.54, 96.49, 104.55, 98.72],
    [107.75, 116.29, 103.97, 99.18, 111.61], [102.71, 105.8, 110.08, 103.6, 89.8],
]  # fmt: skip


def test_runs_in_one_mode_whose_window_holds_no_other_read_as_the_mode_of_the_runs_before():
    """Nights 9-17 all ran in the fast mode. A comb through a window of nights in one mode fits
    either tooth equally; the upper one was taken, which for a time is the slow mode: nights 14-17
    (whose windows no longer reached a slow night) read as slow processes at ~100 ms, nights 9-13 as
    fast ones at ~180 ms on the slow scale, and the gate called a -43 % step at night 14 an improvement."""
    times = NIGHTS_TTFT_MS
    rates = [[1000.0 / v for v in night] for night in times]
    levels = mode_aware_levels(times)
    assert levels.bimodal and list(levels.lower_share[9:]) == [1.0] * 9  # every fast invocation, on either side of 14
    assert np.ptp(np.log(levels.level[9:])) < 0.25  # no level step among nights of one mode
    as_time = [(p.index, p.kind) for p in cp.detect_change_points(times, higher_is_better=False, alpha=cp.GATE_ALPHA)]
    as_rate = [(p.index, p.kind) for p in cp.detect_change_points(rates, higher_is_better=True, alpha=cp.GATE_ALPHA)]
    assert as_time == as_rate, (as_time, as_rate)  # a time and its rate: one history
    assert (14, cp.LEVEL) not in as_time
    verdict = cp.judge_newest(times, list(range(18)), higher_is_better=False, threshold=0.05)
    assert verdict.change_point is None or verdict.change_point.index != 14, verdict.reason
