"""Intervals of a median measured in two levels: invocations (a fresh process each) x iterations.

Kalibera & Jones, "Rigorous Benchmarking in Reasonable Time", ISMM 2013: the variation between
invocations (process start, memory layout, clocks) does not shrink with more iterations, so an
interval over pooled iterations of one process covers that process only. Two intervals here
respect both levels:

- a hierarchical bootstrap of the pooled median: resample invocations with replacement, then
  iterations within each chosen invocation (Davison & Hinkley, "Bootstrap Methods and their
  Application", 1997, §3.8, two-stage sampling; percentile interval);
- order statistics over the invocation medians: the distribution-free binomial interval of
  median_ci, applied to one estimate per invocation (exact when invocations are independent);
- below the 6 invocations that interval needs at 95 %, Kalibera & Jones's own Student t interval
  over the invocation-level estimates (k - 1 degrees of freedom). The bootstrap is not used there:
  with 3 or 5 invocations it covered 80 % and 88 % in the unit test's simulation, t 94-96 %.

Cost is bounded: in a replicate every invocation is represented by the same number of points s
(the smallest invocation's count, capped so that k x s <= ``POOLED_CAP``); a larger invocation by
s of its quantiles. Invocations therefore weigh alike in a replicate, and when iterations are
resampled too, drawing s < n of them only widens the within-invocation part (conservative).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from winml_perf.stats.arrays import Values, finite
from winml_perf.stats.quantile_intervals import CONFIDENCE_LEVEL, median_ci, median_ci_ranks

#: Bootstrap resamples of every bootstrap interval (fixed, so results are reproducible).
BOOTSTRAP_RESAMPLES = 2000
#: Seed of every bootstrap unless a caller passes another.
BOOTSTRAP_SEED = 20130616  # ISMM 2013
#: Most points resampled per bootstrap replicate, all invocations together.
POOLED_CAP = 4096
#: Most array elements one batch of bootstrap replicates holds (memory bound).
BATCH_ELEMENTS = 1 << 22

ITERATIONS = "iterations"
INVOCATIONS = "invocations"


@dataclass(frozen=True)
class Coverage:
    """What an interval's variation covers: the levels that were resampled and how many of each."""

    levels: tuple[str, ...]
    invocations: int
    iterations: int

    def to_dict(self) -> dict[str, Any]:
        return {"levels": list(self.levels), INVOCATIONS: self.invocations, ITERATIONS: self.iterations}


@dataclass(frozen=True)
class Interval:
    """A point estimate with its confidence interval, the method that made it and what it covers."""

    estimate: float
    low: float
    high: float
    confidence: float
    method: str
    coverage: Coverage

    @property
    def half_width_pct(self) -> float:
        """The larger distance from the estimate to a bound, in percent of the estimate."""
        if not (math.isfinite(self.low) and math.isfinite(self.high)) or not self.estimate:
            return math.nan
        return max(self.estimate - self.low, self.high - self.estimate) / abs(self.estimate) * 100.0

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["coverage"] = self.coverage.to_dict()
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in d.items()}


def as_invocations(invocations: Sequence[Values]) -> list[np.ndarray]:
    """Each invocation's finite iteration values as a float array; empty invocations dropped."""
    arrays = [finite(inv) for inv in invocations]
    return [a for a in arrays if a.size]


def coverage_of(invocations: Sequence[Values]) -> Coverage:
    """What an interval over these samples covers: both levels from 2 invocations on."""
    invs = as_invocations(invocations)
    levels = (INVOCATIONS, ITERATIONS) if len(invs) >= 2 else (ITERATIONS,)
    return Coverage(levels, len(invs), int(sum(a.size for a in invs)))


def invocation_medians(invocations: Sequence[Values]) -> np.ndarray:
    """One median per (non-empty) invocation."""
    return np.array([np.median(a) for a in as_invocations(invocations)])


def sketch(invocations: list[np.ndarray], cap: int = POOLED_CAP) -> np.ndarray:
    """A (k, s) array: each invocation as s points, s = min(smallest invocation, cap // k).

    An invocation with exactly s values is kept as is; a larger one is replaced by its quantiles
    at the midpoints (j + 1/2) / s, which follow its distribution.
    """
    k = len(invocations)
    size = max(1, min(min(a.size for a in invocations), cap // k))
    levels = (np.arange(size) + 0.5) / size
    rows = [a if a.size == size else np.quantile(a, levels) for a in invocations]
    return np.vstack(rows)


def percentile_interval(replicates: np.ndarray, confidence: float) -> tuple[float, float]:
    alpha = 1.0 - confidence
    lo, hi = np.quantile(replicates, [alpha / 2.0, 1.0 - alpha / 2.0])
    return float(lo), float(hi)


def _draws(rng: np.random.Generator, points: np.ndarray, batch: int, resample_iterations: bool) -> np.ndarray:
    """(batch, k, s) values: k invocations drawn with replacement, then (optionally) s iterations
    drawn with replacement within each."""
    k, s = points.shape
    chosen = rng.integers(0, k, size=(batch, k, 1))
    if not resample_iterations:
        return points[chosen[:, :, 0]]
    return points[chosen, rng.integers(0, s, size=(batch, k, s))]


def spread_about(estimate: float, replicates: np.ndarray, k: int) -> np.ndarray:
    """Replicates spread about the estimate by sqrt(k / (k - 1)) (top-level bias correction)."""
    return estimate + (replicates - estimate) * math.sqrt(k / (k - 1)) if k > 1 else replicates


def batch_sizes(total: int, per_replicate: int, elements: int = BATCH_ELEMENTS) -> list[int]:
    """Replicates per batch so that a batch holds about ``elements`` values."""
    size = max(1, elements // max(1, per_replicate))
    return [min(size, total - start) for start in range(0, total, size)]


def hierarchical_bootstrap_median(
    invocations: Sequence[Values],
    confidence: float = CONFIDENCE_LEVEL,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
    resample_iterations: bool = False,
) -> Interval:
    """Median of all iterations with a bootstrap interval over invocations (and iterations, if asked)."""
    invs = as_invocations(invocations)
    cover = coverage_of(invs)
    if not invs:
        return Interval(math.nan, math.nan, math.nan, confidence, "hierarchical_bootstrap", cover)
    estimate = float(np.median(np.concatenate(invs)))
    points = sketch(invs)
    rng = np.random.default_rng(seed)
    replicates = np.concatenate(
        [
            np.median(_draws(rng, points, b, resample_iterations).reshape(b, -1), axis=1)
            for b in batch_sizes(resamples, points.size)
        ]
    )
    lo, hi = percentile_interval(spread_about(estimate, replicates, len(invs)), confidence)
    return Interval(estimate, lo, hi, confidence, "hierarchical_bootstrap", cover)


def order_statistic_median(invocations: Sequence[Values], confidence: float = CONFIDENCE_LEVEL) -> Interval:
    """Median of the invocation medians with the binomial order-statistic interval over them.

    NaN bounds when there are too few invocations (fewer than 6 at 95 %).
    """
    medians = invocation_medians(invocations)
    estimate = float(np.median(medians)) if medians.size else math.nan
    lo, hi = median_ci(medians, confidence)
    return Interval(estimate, lo, hi, confidence, "order_statistics_invocations", coverage_of(invocations))


def within_process_median(iterations: Values, confidence: float = CONFIDENCE_LEVEL) -> Interval:
    """The median of one invocation's iterations with its binomial interval: covers that process only."""
    xs = finite(iterations)
    estimate = float(np.median(xs)) if xs.size else math.nan
    lo, hi = median_ci(xs, confidence)
    return Interval(
        estimate, lo, hi, confidence, "order_statistics_iterations", Coverage((ITERATIONS,), 1, int(xs.size))
    )


def student_t_median(invocations: Sequence[Values], confidence: float = CONFIDENCE_LEVEL) -> Interval:
    """Mean of the invocation medians with a Student t interval over them (K&J 2013, two levels).

    Assumes roughly normal invocation medians; NaN bounds below 2 invocations.
    """
    medians = invocation_medians(invocations)
    cover = coverage_of(invocations)
    k = medians.size
    if k < 2:
        estimate = float(medians[0]) if k else math.nan
        return Interval(estimate, math.nan, math.nan, confidence, "student_t_invocations", cover)
    centre = float(medians.mean())
    from scipy.special import stdtrit  # Student's t quantile; loaded on first use

    half = float(stdtrit(k - 1, 0.5 + confidence / 2.0) * medians.std(ddof=1) / math.sqrt(k))
    return Interval(centre, centre - half, centre + half, confidence, "student_t_invocations", cover)


def enough_invocations_for_order_statistics(k: int, confidence: float = CONFIDENCE_LEVEL) -> bool:
    return median_ci_ranks(k, confidence) is not None


def median_interval(invocations: Sequence[Values], confidence: float = CONFIDENCE_LEVEL) -> Interval:
    """The interval a record reports for samples in invocations x iterations.

    One invocation: the within-process interval (its coverage says so). Enough invocations for the
    order-statistic interval: that one (distribution-free). Between: the Student t interval.
    """
    invs = as_invocations(invocations)
    if len(invs) <= 1:
        return within_process_median(invs[0] if invs else [], confidence)
    if enough_invocations_for_order_statistics(len(invs), confidence):
        return order_statistic_median(invs, confidence)
    return student_t_median(invs, confidence)
