"""Per-token latency percentiles with intervals that respect within-generation correlation.

The steps of one generation share a KV-cache length, clocks and cache state, so they are not
independent samples: an interval that treats them so is too narrow. Here the unit resampled is
the whole generation (the cluster bootstrap, Davison & Hinkley, "Bootstrap Methods and their
Application", 1997, §3.8; Field & Welsh, "Bootstrapping clustered data", JRSS B 69, 2007).

Vectorised: the pooled steps are sorted once and cut into B bins of equal rank; each generation
becomes a row of counts per bin (G x B). A replicate draws G generations with replacement, which
is a row of multiplicities (R x G); its pooled histogram is one matrix product. The percentile of
a replicate is read from its cumulative histogram, interpolating by rank inside the bin. When B
equals the number of steps every bin is one step and the replicate's percentile is exact; B is
capped so that R x G x B stays within ``WORK_BUDGET``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from winml_perf.stats.arrays import Values, finite
from winml_perf.stats.hierarchical import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, batch_sizes, percentile_interval
from winml_perf.stats.quantile_intervals import CONFIDENCE_LEVEL, quantile_ci

#: Percentiles reported for per-token latency.
PERCENTILES = (50.0, 90.0, 95.0, 99.0)
#: Bounds on the number of rank bins and on the multiply-adds of the replicate histograms.
MAX_BINS = 4096
MIN_BINS = 256
WORK_BUDGET = 4_000_000_000
EXACT_FLOAT32 = 1 << 24


@dataclass(frozen=True)
class PercentileInterval:
    """One percentile of pooled step latencies with its interval."""

    percentile: float
    estimate: float
    low: float
    high: float
    confidence: float
    method: str
    generations: int
    steps: int


def _generations(generations: Sequence[Values]) -> list[np.ndarray]:
    arrays = [finite(g) for g in generations]
    return [a for a in arrays if a.size]


def iid_percentiles(
    generations: Sequence[Values], percentiles: Sequence[float] = PERCENTILES, confidence: float = CONFIDENCE_LEVEL
) -> tuple[PercentileInterval, ...]:
    """Binomial order-statistic intervals over pooled steps, as if every step were independent.

    Kept for comparison: it is what a within-generation-blind interval looks like.
    """
    gens = _generations(generations)
    pooled = np.concatenate(gens) if gens else np.array([])
    out = []
    for q in percentiles:
        estimate = float(np.percentile(pooled, q)) if pooled.size else math.nan
        lo, hi = quantile_ci(pooled, q / 100.0, confidence)
        out.append(
            PercentileInterval(q, estimate, lo, hi, confidence, "order_statistics_steps", len(gens), int(pooled.size))
        )
    return tuple(out)


def _sorted_percentile(ordered: np.ndarray, q: float) -> float:
    """Hyndman & Fan definition 7 (numpy's default) on already sorted values."""
    h = (ordered.size - 1) * q / 100.0
    lo = int(math.floor(h))
    hi = min(lo + 1, ordered.size - 1)
    return float(ordered[lo] + (h - lo) * (ordered[hi] - ordered[lo]))


def _bin_count(steps: int, generations: int, resamples: int, work_budget: int = WORK_BUDGET) -> int:
    by_budget = work_budget // max(1, resamples * generations)
    return int(min(steps, MAX_BINS, max(MIN_BINS, by_budget)))


def _replicate_quantiles(
    weights: np.ndarray, starts: np.ndarray, sizes: np.ndarray, ordered: np.ndarray, levels: np.ndarray
) -> np.ndarray:
    """(len(levels), batch) quantiles of replicates given their per-bin weights (batch x B)."""
    cum = np.cumsum(weights, axis=1)
    total = cum[:, -1:]
    out = np.empty((levels.size, weights.shape[0]))
    rows = np.arange(weights.shape[0])
    for i, level in enumerate(levels):
        target = level * total  # (batch, 1)
        b = np.minimum((cum < target).sum(axis=1), weights.shape[1] - 1)
        before = np.where(b > 0, cum[rows, b - 1], 0.0)
        inside = weights[rows, b]
        frac = np.clip(np.divide(target[:, 0] - before, inside, out=np.zeros_like(before), where=inside > 0), 0.0, 1.0)
        pos = starts[b] + frac * (sizes[b] - 1)
        lo = np.floor(pos).astype(np.int64)
        hi = np.minimum(lo + 1, ordered.size - 1)
        out[i] = ordered[lo] + (pos - lo) * (ordered[hi] - ordered[lo])
    return out


def generation_percentiles(
    generations: Sequence[Values],
    percentiles: Sequence[float] = PERCENTILES,
    confidence: float = CONFIDENCE_LEVEL,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
    work_budget: int = WORK_BUDGET,
) -> tuple[PercentileInterval, ...]:
    """Percentiles of the pooled steps (Hyndman & Fan definition 7) with generation-bootstrap intervals.

    ``work_budget``: most multiply-adds of the replicate histograms (fewer rank bins below it)."""
    gens = _generations(generations)
    g = len(gens)
    if g == 0:
        return tuple(
            PercentileInterval(q, math.nan, math.nan, math.nan, confidence, "generation_bootstrap", 0, 0)
            for q in percentiles
        )
    pooled = np.concatenate(gens)
    owner = np.repeat(np.arange(g), [a.size for a in gens])
    order = np.argsort(pooled)
    ordered, n = pooled[order], pooled.size
    bins = _bin_count(n, g, resamples, work_budget)
    bin_of_rank = (np.arange(n) * bins) // n
    # Counts are integers: float32 holds them exactly below 2**24 steps and halves the product's cost.
    dtype = np.float32 if n < EXACT_FLOAT32 else np.float64
    counts = np.bincount(owner[order] * bins + bin_of_rank, minlength=g * bins).reshape(g, bins).astype(dtype)
    starts = np.searchsorted(bin_of_rank, np.arange(bins))
    sizes = np.diff(np.append(starts, n))
    levels = np.asarray(percentiles, dtype=float) / 100.0
    rng = np.random.default_rng(seed)
    replicates = []
    for batch in batch_sizes(resamples, max(g, bins)):
        picks = rng.integers(0, g, size=(batch, g))
        flat = (picks + g * np.arange(batch)[:, None]).ravel()
        multiplicity = np.bincount(flat, minlength=batch * g).reshape(batch, g).astype(dtype)
        weights = np.matmul(multiplicity, counts).astype(np.float64)
        replicates.append(_replicate_quantiles(weights, starts, sizes, ordered, levels))
    reps = np.concatenate(replicates, axis=1)
    out = []
    for i, q in enumerate(percentiles):
        lo, hi = percentile_interval(reps[i], confidence)
        out.append(
            PercentileInterval(
                float(q), _sorted_percentile(ordered, q), lo, hi, confidence, "generation_bootstrap", g, int(n)
            )
        )
    return tuple(out)
