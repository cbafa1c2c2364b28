"""The size of a step between two short runs of per-run values, with an exact interval.

The estimate is the Hodges-Lehmann shift of the logs, the median of every difference
log(after_j) - log(before_i), reported as a ratio exp(.) - 1. Its interval is the one that inverts
the Mann-Whitney test (Moses; Hollander & Wolfe, "Nonparametric Statistical Methods", 3rd ed.,
§4.3): with the pairwise differences sorted, [d_(k), d_(N+1-k)] covers the true shift with
probability 1 - 2 P(U < k) when the two samples differ by a shift alone, whatever their
distribution; U's null distribution is counted exactly. With samples too small for the level
asked, the interval is the whole range of differences and ``coverage`` says what it holds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np


@dataclass(frozen=True)
class Step:
    shift: float  # after / before - 1
    low: float
    high: float
    coverage: float  # of the interval under the shift model, exactly


@lru_cache(maxsize=256)
def _u_cdf(m: int, n: int) -> tuple[float, ...]:
    """P(U <= u) for u = 0 .. m n, U the Mann-Whitney count of samples of sizes m and n (no ties)."""
    counts: list[list[list[int]]] = [[[1] if i == 0 or j == 0 else [] for j in range(n + 1)] for i in range(m + 1)]
    for i in range(1, m + 1):
        for j in range(1, n + 1):
            # the largest value is in the first sample (adds j to U) or in the second
            a, b = counts[i - 1][j], counts[i][j - 1]
            size = i * j + 1
            row = [0] * size
            for u, c in enumerate(a):
                row[u + j] += c
            for u, c in enumerate(b):
                row[u] += c
            counts[i][j] = row
    total = math.comb(m + n, m)
    return tuple(np.cumsum(counts[m][n]) / total)


def step(before: np.ndarray, after: np.ndarray, confidence: float) -> Step:
    """The step from ``before`` to ``after`` (positive values, at least one of each)."""
    d = np.sort((np.log(after)[:, None] - np.log(before)[None, :]).ravel())
    cdf = _u_cdf(len(after), len(before))
    # the widest k with P(U <= k - 1) <= the tail; the whole range when even k = 1 is too narrow
    k = max(1, int(np.searchsorted(cdf, (1.0 - confidence) / 2.0, side="right")))
    low, high = d[k - 1], d[len(d) - k]
    return Step(
        math.expm1(float(np.median(d))), math.expm1(float(low)), math.expm1(float(high)), 1.0 - 2.0 * cdf[k - 1]
    )
