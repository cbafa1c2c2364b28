"""The binomial-quantile median CI: same ranks as the exact sum it replaces, and it scales."""

import math

import numpy as np
import pytest
from scipy.stats import binom

from winml_perf.stats import sample_stats as exact_sum
from winml_perf.stats.quantile_intervals import median_ci, median_ci_ranks, quantile_ci, quantile_ci_ranks


def exact_lower_rank(n: int, alpha_half: float = (1.0 - 0.95) / 2.0) -> int | None:
    """The old definition (largest l with P(B <= l - 1) <= alpha/2, as cdf / 2**n in exact
    integers), with C(n, i) built incrementally so that every n up to 2000 takes milliseconds."""
    total, term, cdf, best = 2**n, 1, 0, None
    for k in range(0, (n + 1) // 2):
        cdf += term
        if cdf / total > alpha_half:
            break
        best = k + 1
        term = term * (n - k) // (k + 1)
    return best


def test_ranks_equal_the_exact_binomial_sum_for_n_6_to_2000():
    mismatched = [n for n in range(6, 2001) if median_ci_ranks(n) != (exact_lower_rank(n), n - exact_lower_rank(n) + 1)]
    assert mismatched == []


def test_ranks_equal_todays_implementation():
    # Today's sum costs O(n^2) big-integer work per n: every n to 300, then a stride to 2000.
    ns = list(range(6, 301)) + list(range(301, 2001, 97)) + [2000]
    assert [median_ci_ranks(n) for n in ns] == [exact_sum.median_ci_ranks(n) for n in ns]


@pytest.mark.parametrize("confidence", [0.90, 0.99])
def test_ranks_equal_the_exact_sum_at_other_levels(confidence):
    assert all(median_ci_ranks(n, confidence) == exact_sum.median_ci_ranks(n, confidence) for n in range(1, 400))


def test_too_few_samples_give_no_ranks_and_nan_bounds():
    assert [median_ci_ranks(n) for n in range(1, 6)] == [None] * 5
    assert all(math.isnan(b) for b in median_ci([1.0, 2.0, 3.0, 4.0, 5.0]))


@pytest.mark.parametrize("n", [7, 100, 1001])
def test_bounds_equal_the_old_implementation_on_data(n):
    xs = np.random.default_rng(n).lognormal(2.0, 0.4, n)
    assert median_ci(xs) == exact_sum.median_ci(list(xs))


def test_ten_million_samples_ranks_are_exact_and_tight():
    n = 10**7
    lo, hi = median_ci_ranks(n)
    assert hi == n - lo + 1
    # Defining inequality at the rank found and one rank further in.
    assert binom.cdf(lo - 1, n, 0.5) <= 0.025 < binom.cdf(lo, n, 0.5)
    assert abs((n / 2 - lo) - 1.96 * math.sqrt(n) / 2) < 3  # the normal approximation agrees


def test_nan_and_inf_are_ignored():
    xs = list(np.arange(1.0, 21.0)) + [math.nan, math.inf]
    assert median_ci(xs) == median_ci(np.arange(1.0, 21.0))


@pytest.mark.parametrize("n,q", [(50, 0.9), (2000, 0.99), (1000, 0.95), (37, 0.25)])
def test_quantile_ranks_cover_at_least_the_level_and_are_tightest(n, q):
    lo, hi = quantile_ci_ranks(n, q)
    coverage = binom.cdf(hi - 1, n, q) - binom.cdf(lo - 1, n, q)
    assert coverage >= 0.95
    # Each tail holds at most 2.5 %, and moving either bound inwards would break that.
    assert binom.cdf(lo - 1, n, q) <= 0.025 < binom.cdf(lo, n, q)
    assert binom.sf(hi - 1, n, q) <= 0.025 < binom.sf(hi - 2, n, q)


def test_quantile_ci_coverage_on_simulated_data():
    rng = np.random.default_rng(3)
    true_p90 = math.exp(0.5 * 1.2815515655446004)
    hits = 0
    for _ in range(400):
        lo, hi = quantile_ci(rng.lognormal(0.0, 0.5, 300), 0.9)
        hits += lo <= true_p90 <= hi
    assert hits / 400 >= 0.92


def test_no_quantile_interval_when_the_tail_is_too_thin():
    assert quantile_ci_ranks(30, 0.99) is None
