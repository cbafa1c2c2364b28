"""Ratios of two routes over paired invocations, with a verdict at the interval's confidence.

Invocations of routes A and B are interleaved (A1 B1 A2 B2 ...), so slow drift of the machine hits
both members of a pair alike and cancels in their ratio (Kalibera & Jones 2013, §"comparing
systems"). Each pair gives one ratio of medians; the route ratio is the median of those ratios.
Its interval: order statistics over the pair ratios when there are enough pairs (6 at 95 %),
otherwise a Student t interval over the log pair ratios (estimate: their geometric mean), as
hierarchical.median_interval does for one route. A paired two-stage bootstrap (the same pairs drawn
for both routes, then iterations within each member) is offered too.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

import numpy as np

from winml_perf.stats.arrays import Values
from winml_perf.stats.hierarchical import (
    BOOTSTRAP_RESAMPLES,
    BOOTSTRAP_SEED,
    POOLED_CAP,
    as_invocations,
    batch_sizes,
    enough_invocations_for_order_statistics,
    percentile_interval,
    sketch,
    spread_about,
)
from winml_perf.stats.quantile_intervals import CONFIDENCE_LEVEL, median_ci


class Verdict(str, Enum):  # noqa: UP042  (str() keeps 'Verdict.X'; StrEnum would change it)
    FASTER = "faster"
    SLOWER = "slower"
    NO_DIFFERENCE = "no difference"
    INSUFFICIENT = "insufficient data"


@dataclass(frozen=True)
class RatioResult:
    """A over B as the median of per-pair ratios of medians, its interval and the verdict for A."""

    estimate: float
    low: float
    high: float
    confidence: float
    method: str
    pairs: int
    higher_is_better: bool
    verdict: Verdict

    def describe(self) -> str:
        if not math.isfinite(self.low):
            return f"ratio {self.estimate:.3f} ({self.pairs} pairs): {self.verdict.value}"
        level = f"{self.confidence * 100:g}%"
        return (
            f"ratio {self.estimate:.3f} [{self.low:.3f}, {self.high:.3f}] over {self.pairs} paired "
            f"invocations: {self.verdict.value} at {level}"
        )


def verdict(low: float, high: float, higher_is_better: bool) -> Verdict:
    """FASTER when the whole interval of A/B lies on A's good side of 1, SLOWER on the bad side."""
    if not (math.isfinite(low) and math.isfinite(high)):
        return Verdict.INSUFFICIENT
    if low > 1.0:
        return Verdict.FASTER if higher_is_better else Verdict.SLOWER
    if high < 1.0:
        return Verdict.SLOWER if higher_is_better else Verdict.FASTER
    return Verdict.NO_DIFFERENCE


def _pairs(a: Sequence[Values], b: Sequence[Values]) -> tuple[list[np.ndarray], list[np.ndarray]]:
    inv_a, inv_b = as_invocations(a), as_invocations(b)
    if len(inv_a) != len(a) or len(inv_b) != len(b):
        raise ValueError("every paired invocation needs at least one finite sample")
    if len(inv_a) != len(inv_b):
        raise ValueError(f"paired invocations differ in number: {len(inv_a)} for A, {len(inv_b)} for B")
    return inv_a, inv_b


def pair_ratios(a: Sequence[Values], b: Sequence[Values]) -> np.ndarray:
    """median(A_j) / median(B_j) for every pair j."""
    inv_a, inv_b = _pairs(a, b)
    return np.array([np.median(x) / np.median(y) for x, y in zip(inv_a, inv_b)])


def paired_order_statistic_ratio(
    a: Sequence[Values], b: Sequence[Values], confidence: float = CONFIDENCE_LEVEL, higher_is_better: bool = True
) -> RatioResult:
    """Median pair ratio with the binomial order-statistic interval over the pair ratios."""
    ratios = pair_ratios(a, b)
    estimate = float(np.median(ratios)) if ratios.size else math.nan
    lo, hi = median_ci(ratios, confidence)
    return RatioResult(
        estimate,
        lo,
        hi,
        confidence,
        "order_statistics_pairs",
        int(ratios.size),
        higher_is_better,
        verdict(lo, hi, higher_is_better),
    )


def paired_bootstrap_ratio(
    a: Sequence[Values],
    b: Sequence[Values],
    confidence: float = CONFIDENCE_LEVEL,
    higher_is_better: bool = True,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> RatioResult:
    """Median pair ratio with a paired two-stage bootstrap interval."""
    inv_a, inv_b = _pairs(a, b)
    k = len(inv_a)
    if k == 0:
        return RatioResult(
            math.nan, math.nan, math.nan, confidence, "paired_bootstrap", 0, higher_is_better, Verdict.INSUFFICIENT
        )
    estimate = float(np.median(pair_ratios(inv_a, inv_b)))
    pts_a, pts_b = sketch(inv_a, POOLED_CAP // 2), sketch(inv_b, POOLED_CAP // 2)
    rng = np.random.default_rng(seed)
    replicates = []
    for batch in batch_sizes(resamples, pts_a.size + pts_b.size):
        chosen = rng.integers(0, k, size=(batch, k, 1))  # the same pairs for both routes
        med_a = np.median(pts_a[chosen, rng.integers(0, pts_a.shape[1], size=(batch, k, pts_a.shape[1]))], axis=2)
        med_b = np.median(pts_b[chosen, rng.integers(0, pts_b.shape[1], size=(batch, k, pts_b.shape[1]))], axis=2)
        replicates.append(np.median(med_a / med_b, axis=1))
    lo, hi = percentile_interval(spread_about(estimate, np.concatenate(replicates), k), confidence)
    return RatioResult(
        estimate, lo, hi, confidence, "paired_bootstrap", k, higher_is_better, verdict(lo, hi, higher_is_better)
    )


def paired_student_t_ratio(
    a: Sequence[Values], b: Sequence[Values], confidence: float = CONFIDENCE_LEVEL, higher_is_better: bool = True
) -> RatioResult:
    """Geometric mean of the pair ratios with a Student t interval on their logs (2 pairs or more)."""
    logs = np.log(pair_ratios(a, b))
    k = int(logs.size)
    if k < 2:
        estimate = float(np.exp(logs[0])) if k else math.nan
        return RatioResult(
            estimate, math.nan, math.nan, confidence, "student_t_log_pairs", k, higher_is_better, Verdict.INSUFFICIENT
        )
    centre = float(logs.mean())
    from scipy.special import stdtrit  # Student's t quantile; loaded on first use

    half = float(stdtrit(k - 1, 0.5 + confidence / 2.0) * logs.std(ddof=1) / math.sqrt(k))
    lo, hi = math.exp(centre - half), math.exp(centre + half)
    return RatioResult(
        math.exp(centre),
        lo,
        hi,
        confidence,
        "student_t_log_pairs",
        k,
        higher_is_better,
        verdict(lo, hi, higher_is_better),
    )


def paired_ratio(
    a: Sequence[Values], b: Sequence[Values], confidence: float = CONFIDENCE_LEVEL, higher_is_better: bool = True
) -> RatioResult:
    """A/B over paired invocations: order statistics from 6 pairs (at 95 %), Student t below."""
    if enough_invocations_for_order_statistics(len(a), confidence):
        return paired_order_statistic_ratio(a, b, confidence, higher_is_better)
    return paired_student_t_ratio(a, b, confidence, higher_is_better)
