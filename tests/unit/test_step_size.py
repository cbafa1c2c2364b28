"""The step between two short runs of values and its exact interval (results/step_size.py)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from winml_perf.stats.series import changepoint as cp
from winml_perf.stats.series.step_size import _u_cdf, step


@pytest.mark.parametrize("m, n", [(1, 1), (2, 3), (3, 4), (4, 4), (5, 2)])
def test_the_mann_whitney_null_distribution_is_counted_exactly(m, n):
    # U = pairs (i in the first sample, j in the second) with the first's value above
    counts = np.zeros(m * n + 1)
    for first in itertools.combinations(range(m + n), m):
        second = sorted(set(range(m + n)) - set(first))
        counts[sum(a > b for a in first for b in second)] += 1
    assert np.allclose(_u_cdf(m, n), np.cumsum(counts) / math.comb(m + n, m))


def test_the_step_is_the_hodges_lehmann_ratio_of_the_logs():
    before, after = np.array([100.0, 102.0, 98.0]), np.array([90.0, 91.8])
    diffs = np.log(after)[:, None] - np.log(before)[None, :]
    s = step(before, after, 0.95)
    assert s.shift == pytest.approx(math.expm1(np.median(diffs)))
    assert s.low <= s.shift <= s.high


def test_too_few_runs_give_the_whole_range_and_say_what_it_covers():
    before, after = np.array([100.0, 101.0, 99.0, 100.5]), np.array([90.0, 91.0, 89.0])
    s = step(before, after, 0.95)
    assert (s.low, s.high) == pytest.approx((89.0 / 101.0 - 1, 91.0 / 99.0 - 1))
    assert s.coverage == pytest.approx(1 - 2 / math.comb(7, 3))  # < 0.95: no narrower interval reaches it
    assert step(np.full(10, 100.0) * np.linspace(0.99, 1.01, 10), np.array([90.0, 91.0, 89.0]), 0.95).coverage >= 0.95


@pytest.mark.parametrize("n_before, n_after", [(10, 10), (10, 3), (4, 4)])
def test_the_interval_covers_a_true_step_as_often_as_it_says(n_before, n_after):
    rng = np.random.default_rng(31)
    trials, hits, said = 600, 0, []
    for _ in range(trials):
        s = step(rng.lognormal(0.0, 0.05, n_before), rng.lognormal(math.log(0.9), 0.05, n_after), 0.95)
        hits += s.low <= -0.1 <= s.high
        said.append(s.coverage)
    # 600 trials: a binomial SD of 0.9 points at 95 %
    assert abs(hits / trials - said[0]) < 0.03 and said[0] >= 0.95


def test_a_level_change_point_is_sized_as_the_step_not_the_drifting_segments():
    rng = np.random.default_rng(5)
    n, at = 200, 120
    drift = 1.0 + 0.001 * np.arange(n)  # +0.1 % a run: the segments' medians lie ~10 % apart from it alone
    x = 100.0 * drift * np.where(np.arange(n) >= at, 0.9, 1.0) * rng.lognormal(0.0, 0.005, n)
    # the floor keeps the drift from being cut into steps, as with invocation input
    (p,) = cp.detect_change_points(x, higher_is_better=True, min_shift=0.03)
    assert abs(p.index - at) <= 1
    local = 0.9 * (1.0 + 0.001 * cp.LOCAL_RUNS) - 1.0  # the step, and the drift between runs ~10 apart
    assert p.shift == pytest.approx(local, abs=0.005) and p.shift_low <= local <= p.shift_high


def test_a_change_point_between_close_ones_says_its_interval_covers_less():
    x = np.r_[np.full(40, 100.0), np.full(3, 90.0), np.full(3, 80.0), np.full(40, 70.0)] * np.random.default_rng(
        8
    ).lognormal(0, 0.01, 86)
    points = cp._points(x, {40: 0.001, 43: 0.001, 46: 0.001}, None, True, cp.DEFAULT_SEED)
    middle = points[1]  # 3 runs either side: the widest interval covers 1 - 2 / C(6, 3) = 90 %
    assert middle.shift_coverage == pytest.approx(1 - 2 / math.comb(6, 3))
    assert middle.shift_low <= middle.shift <= middle.shift_high
    assert "a 90% interval: too few runs either side for 95%" in cp.shift_text(middle.to_dict())
    assert points[0].shift_coverage is None and "too few" not in cp.shift_text(points[0].to_dict())
