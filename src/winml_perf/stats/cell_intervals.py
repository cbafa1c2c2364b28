"""A cell's intervals and what they cover: pure functions of its samples, bounded in cost.

- Per-iteration metrics: ``uncertainty.median_interval`` over the invocations (1 invocation: the
  within-process interval; 2-5: Student t over invocation medians; 6 or more: order statistics),
  with its coverage. The within-process interval of the pooled iterations is kept beside it.
- Per-token latency (ITL) percentiles: ``uncertainty.generation_percentiles``, resampling whole
  generations. Cost is bounded for any number of samples: above ``MAX_CLUSTERS`` generations,
  consecutive generations are merged into that many clusters (a cluster bootstrap of larger
  clusters still respects the correlation inside a generation and is, if anything, wider), and the
  replicate histograms get at most ``WORK_BUDGET`` multiply-adds (fewer rank bins). The estimates
  are those of all the steps, exactly.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import chain
from operator import attrgetter
from typing import Any

import numpy as np

from winml_perf.model.metrics import metric_values
from winml_perf.model.sample import IterationSample
from winml_perf.stats import (
    Interval,
    PercentileInterval,
    generation_percentiles,
    median_interval,
    within_process_median,
)
from winml_perf.stats.arrays import Values

MAX_CLUSTERS = 256
WORK_BUDGET = 200_000_000


def by_invocation(samples: Sequence[IterationSample], metric: str) -> list[list[float]]:
    """One list of the metric's values per invocation, in invocation order."""
    if len(set(map(attrgetter("invocation"), samples))) == 1:  # one process: one group, no sorting out
        return [metric_values(samples, metric)]
    groups: dict[int, list[IterationSample]] = {}
    for s in samples:
        groups.setdefault(s.invocation, []).append(s)
    return [metric_values(groups[k], metric) for k in sorted(groups)]


def metric_interval(samples: Sequence[IterationSample], metric: str) -> Interval:
    return median_interval(by_invocation(samples, metric))


def in_process_interval(samples: Sequence[IterationSample], metric: str) -> Interval:
    """The pooled iterations' interval as if they came from one process (what v1 reported)."""
    return within_process_median(metric_values(samples, metric))


def clusters(generations: Sequence[Values], cap: int = MAX_CLUSTERS) -> list[np.ndarray]:
    """The generations, merged into at most ``cap`` clusters of consecutive generations."""
    gens = [g for g in generations if len(g)]
    if len(gens) <= cap:
        return [np.asarray(g, dtype=float) for g in gens]
    # every step in one array, then each cluster a slice of it (one conversion, not one per generation)
    sizes = np.fromiter(map(len, gens), dtype=np.int64, count=len(gens))
    flat = np.fromiter(chain.from_iterable(gens), dtype=float, count=int(sizes.sum()))
    starts = np.concatenate(([0], np.cumsum(sizes)))
    bounds = np.linspace(0, len(gens), cap + 1).round().astype(int)
    return [flat[starts[a] : starts[b]] for a, b in zip(bounds[:-1], bounds[1:])]


def itl_percentiles(samples: Sequence[IterationSample]) -> tuple[PercentileInterval, ...]:
    gens = [s.decode_step_ms for s in samples if s.decode_step_ms]
    return generation_percentiles(clusters(gens), work_budget=WORK_BUDGET)


def percentile_dict(p: PercentileInterval, generations: int) -> dict[str, Any]:
    return {
        "percentile": p.percentile,
        "estimate": _num(p.estimate),
        "low": _num(p.low),
        "high": _num(p.high),
        "confidence": p.confidence,
        "method": p.method,
        "generations": generations,
        "clusters": p.generations,
        "steps": p.steps,
    }


def coverage_text(interval: Interval | dict[str, Any]) -> str:
    """'5 proc' for an interval over 5 invocations, 'in-proc' for one that covers one process."""
    cover = interval.coverage.to_dict() if isinstance(interval, Interval) else interval
    levels = cover.get("levels") or []
    return f"{cover.get('invocations')} proc" if "invocations" in levels else "in-proc"


def _num(x: float) -> float | None:
    return float(x) if x is not None and math.isfinite(x) else None
