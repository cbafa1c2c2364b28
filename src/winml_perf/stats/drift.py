"""Drift between invocations: medians that differ by more than their own intervals allow.

Each invocation's median gets its distribution-free interval at the Bonferroni level
1 - alpha / k (Dunn, JASA 56, 1961), so when nothing differs between invocations all k intervals
cover the common median together with probability >= 1 - alpha. Intervals with no point in common
(the largest lower bound above the smallest upper bound) therefore show, at level 1 - alpha, that
the invocations do not share one median. A spread below ``MIN_RELATIVE_SPREAD`` of the median is
not reported, however certain: long runs resolve differences too small to matter.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from winml_perf.stats.arrays import Values
from winml_perf.stats.hierarchical import as_invocations
from winml_perf.stats.quantile_intervals import CONFIDENCE_LEVEL, median_ci

MIN_RELATIVE_SPREAD = 0.02


@dataclass(frozen=True)
class DriftReport:
    """Whether invocation medians drift, and their range."""

    drifting: bool
    low: float
    high: float
    relative_spread: float  # (high - low) / median of the invocation medians
    invocations: int
    reason: str
    method: str = "bonferroni_median_intervals"

    def describe(self, unit: str = "tok/s", digits: int = 0) -> str:
        if not self.drifting:
            return f"no drift between invocations ({self.reason})"
        return f"invocation medians drift {self.low:.{digits}f}–{self.high:.{digits}f} {unit}"


def detect_drift(
    invocations: Sequence[Values],
    confidence: float = CONFIDENCE_LEVEL,
    min_relative_spread: float = MIN_RELATIVE_SPREAD,
) -> DriftReport:
    invs = as_invocations(invocations)
    k = len(invs)
    if k < 2:
        return DriftReport(False, math.nan, math.nan, math.nan, k, "fewer than 2 invocations")
    medians = np.array([np.median(a) for a in invs])
    low, high = float(medians.min()), float(medians.max())
    centre = float(np.median(medians))
    spread = (high - low) / abs(centre) if centre else math.nan
    level = 1.0 - (1.0 - confidence) / k
    bounds = np.array([median_ci(a, level) for a in invs])
    known = np.isfinite(bounds).all(axis=1)
    if known.sum() < 2:
        return DriftReport(False, low, high, spread, k, f"too few iterations per invocation for {level:.2%} intervals")
    disjoint = bool(bounds[known, 0].max() > bounds[known, 1].min())
    if not disjoint:
        return DriftReport(False, low, high, spread, k, "invocation intervals overlap")
    if not spread >= min_relative_spread:
        return DriftReport(False, low, high, spread, k, f"spread {spread:.1%} below {min_relative_spread:.0%}")
    return DriftReport(True, low, high, spread, k, "invocation intervals do not overlap")
