"""Distribution-free confidence intervals of a median (or any quantile) from order statistics.

With B ~ Bin(n, q) the number of samples below the true q-quantile, the interval between the
order statistics x(l) and x(u) covers it with probability P(l <= B < u) (Conover, "Practical
Nonparametric Statistics", 3rd ed., 1999, §3.2; Hahn & Meeker, "Statistical Intervals", 1991,
§5.2). The ranks come from the binomial quantile function (the binomial CDF and its inverse, evaluated through
the regularised incomplete beta function: scipy.special.bdtr/bdtrik, which load in a third of
scipy.stats's import time), so finding them costs O(1) in n, never a sum over n;
picking the two order statistics is one O(n) partition.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from winml_perf.stats.arrays import Values, finite

#: Confidence level of every interval unless a caller asks for another.
CONFIDENCE_LEVEL = 0.95


def _largest_k_with_cdf_at_most(n: int, q: float, level: float) -> int:
    """Largest k in [-1, n] with P(Bin(n, q) <= k) <= level (-1: none)."""
    from scipy.special import bdtr, bdtrik  # loaded by the first interval, not by every import

    start = bdtrik(level, n, q)  # the continuous k with cdf(k) == level
    k = min(n, max(0, math.ceil(start))) if math.isfinite(start) else 0
    # the inverse is computed in floating point: step so that the defining inequality holds exactly as
    # evaluated, the same way the old exact sum compared cdf / 2**n against the level.
    while k >= 0 and bdtr(k, n, q) > level:
        k -= 1
    while k + 1 <= n and bdtr(k + 1, n, q) <= level:
        k += 1
    return k


@lru_cache(maxsize=4096)
def quantile_ci_ranks(n: int, q: float = 0.5, confidence: float = CONFIDENCE_LEVEL) -> tuple[int, int] | None:
    """1-based ranks (l, u) of the order statistics bounding the q-quantile at ``confidence``.

    Equal tails: l is the largest rank with P(B <= l - 1) <= alpha/2, u the smallest with
    P(B >= u) <= alpha/2. For q = 1/2 this gives u = n - l + 1. Returns None when even
    [x(1), x(n)] is too short (n < 6 for the median at 95 %).
    """
    if n < 1 or not 0.0 < q < 1.0:
        return None
    alpha_half = (1.0 - confidence) / 2.0
    low_k = _largest_k_with_cdf_at_most(n, q, alpha_half)
    if low_k < 0:
        return None
    if q == 0.5:
        # Symmetric; keep l at or below the middle as the old sum did.
        lo = min(low_k + 1, (n + 1) // 2)
        return lo, n - lo + 1
    # Upper tail of B is the lower tail of n - B ~ Bin(n, 1 - q).
    high_k = _largest_k_with_cdf_at_most(n, 1.0 - q, alpha_half)
    if high_k < 0:
        return None
    lo, hi = low_k + 1, n - high_k
    return (lo, hi) if lo <= hi else None


def median_ci_ranks(n: int, confidence: float = CONFIDENCE_LEVEL) -> tuple[int, int] | None:
    """Ranks (l, n - l + 1) of the distribution-free CI of the median; None below 6 samples at 95 %."""
    return quantile_ci_ranks(n, 0.5, confidence)


def quantile_ci(values: Values, q: float, confidence: float = CONFIDENCE_LEVEL) -> tuple[float, float]:
    """Distribution-free CI of the q-quantile (0 < q < 1); (nan, nan) when too few samples."""
    xs = finite(values)
    ranks = quantile_ci_ranks(len(xs), q, confidence)
    if ranks is None:
        return math.nan, math.nan
    lo, hi = ranks
    picked = np.partition(xs, (lo - 1, hi - 1))
    return float(picked[lo - 1]), float(picked[hi - 1])


def median_ci(values: Values, confidence: float = CONFIDENCE_LEVEL) -> tuple[float, float]:
    """Distribution-free CI of the median; (nan, nan) when too few samples. O(n)."""
    return quantile_ci(values, 0.5, confidence)
