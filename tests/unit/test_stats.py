"""Statistics: golden values computed by hand (comments show the arithmetic)."""

from __future__ import annotations

import math

import pytest

from winml_perf.stats import sample_stats as stats


def test_descriptive_statistics_of_a_small_sample():
    xs = [1.0, 2.0, 3.0, 4.0, 100.0]
    assert stats.mean(xs) == 22.0  # 110 / 5
    assert stats.median(xs) == 3.0
    # deviations from 22: -21 -20 -19 -18 78 -> squares sum 7610 -> / (5 - 1) = 1902.5
    assert stats.stdev(xs) == pytest.approx(math.sqrt(1902.5))
    assert stats.cv_pct(xs) == pytest.approx(math.sqrt(1902.5) / 22.0 * 100.0)


def test_percentiles_interpolate_linearly_between_order_statistics():
    xs = [100.0, 4.0, 3.0, 2.0, 1.0]  # order does not matter
    # h = (n - 1) q: p90 -> 3.6 -> x4 + 0.6 (x5 - x4) = 4 + 0.6 * 96
    assert stats.percentile(xs, 90) == pytest.approx(61.6)
    assert stats.percentile(xs, 95) == pytest.approx(80.8)  # 4 + 0.8 * 96
    assert stats.percentile(xs, 99) == pytest.approx(96.16)  # 4 + 0.96 * 96
    assert stats.percentile(xs, 0) == 1.0 and stats.percentile(xs, 100) == 100.0
    assert stats.percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5
    with pytest.raises(ValueError):
        stats.percentile(xs, 101)


def test_median_ci_ranks_match_the_binomial_table():
    # n = 5: even [x1, x5] covers only 1 - 2/32 = 93.75 % < 95 %
    assert stats.median_ci_ranks(5) is None
    # n = 6: P(B <= 0) = 1/64 <= 2.5 % -> [x1, x6], coverage 96.9 %
    assert stats.median_ci_ranks(6) == (1, 6)
    # n = 10: P(B <= 1) = 11/1024 = 1.07 %, P(B <= 2) = 56/1024 = 5.5 % -> [x2, x9]
    assert stats.median_ci_ranks(10) == (2, 9)
    # n = 20: P(B <= 5) = 21700/2^20 = 2.07 %, P(B <= 6) = 60460/2^20 = 5.8 % -> [x6, x15]
    assert stats.median_ci_ranks(20) == (6, 15)


def test_median_ci_and_its_half_width():
    xs = [float(i) for i in range(10, 0, -1)]  # 1..10 shuffled order
    assert stats.median_ci(xs) == (2.0, 9.0)
    # median 5.5; max(5.5 - 2, 9 - 5.5) / 5.5 = 63.6 %
    assert stats.ci_half_width_pct(xs) == pytest.approx(3.5 / 5.5 * 100)
    lo, hi = stats.median_ci([1.0, 2.0, 3.0])
    assert math.isnan(lo) and math.isnan(hi)
    assert math.isnan(stats.ci_half_width_pct([1.0, 2.0, 3.0]))


def test_modified_z_scores_and_outliers():
    xs = [1.0, 2.0, 3.0, 4.0, 100.0]
    # median 3, |x - 3| = 2 1 0 1 97, MAD = 1 -> z = 0.6745 (x - 3)
    z = stats.modified_z_scores(xs)
    assert z == pytest.approx([-1.349, -0.6745, 0.0, 0.6745, 65.4265])
    assert stats.outlier_indices(xs) == (4,)


def test_modified_z_uses_the_mean_absolute_deviation_when_mad_is_zero():
    xs = [5.0, 5.0, 5.0, 5.0, 9.0]
    # MAD = 0; mean |x - 5| = 0.8; scale 1.253314 * 0.8; z(9) = 4 / 1.0026512 = 3.989
    assert stats.modified_z_scores(xs)[4] == pytest.approx(4 / (1.253314 * 0.8))
    assert stats.outlier_indices(xs) == (4,)
    assert stats.outlier_indices([3.0, 3.0, 3.0]) == ()


def test_warmup_settles_when_the_last_window_is_flat():
    assert stats.warmup_settled([10.0, 5.0, 5.1, 5.0], window=3, tolerance_pct=5.0)  # (5.1 - 5) / 5 = 2 %
    assert not stats.warmup_settled([10.0, 5.0, 5.5], window=3, tolerance_pct=5.0)
    assert not stats.warmup_settled([5.0, 5.0], window=3)


def test_summary_collects_everything_and_serialises_nan_as_null():
    s = stats.summarize([1.0, 2.0, 3.0, 4.0, 100.0])
    assert (s.n, s.median, s.min, s.max, s.outlier_indices) == (5, 3.0, 1.0, 100.0, (4,))
    d = s.to_dict()
    assert d["ci95_low"] is None and d["ci95_half_width_pct"] is None  # n = 5 has no 95 % CI
    assert d["outlier_indices"] == [4]
    assert stats.Summary.from_dict(d).median == 3.0
    empty = stats.summarize([])
    assert empty.n == 0 and math.isnan(empty.median)
