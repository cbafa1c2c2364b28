"""The change from one run to another, judged over invocations (fresh processes), not iterations.

Two runs are independent samples of processes: the variation between invocations does not shrink
with more iterations (Kalibera & Jones 2013; stats/hierarchical.py), so a test over the pooled
iterations of five processes treats 25 correlated values as 25 independent ones and calls
identical code "faster, p < 0.001". Here each invocation gives one estimate (its median), and the
change is the Hodges-Lehmann shift between the two sides' estimates with the exact interval that
inverts the Mann-Whitney test (stats/series/step_size.py); the p-value is that test's over the same
estimates. The verdict reads the interval: within the equivalence band, wholly better or worse, or
inconclusive, and says so when too few invocations make a 95 % interval impossible (4 a side at
least).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from winml_perf.stats.arrays import Values
from winml_perf.stats.hierarchical import invocation_medians
from winml_perf.stats.quantile_intervals import CONFIDENCE_LEVEL
from winml_perf.stats.series.step_size import step
from winml_perf.stats.significance import EQUIVALENCE, INCONCLUSIVE, SpeedVerdict, ci_verdict, mann_whitney_u, speedup


@dataclass(frozen=True)
class RunChange:
    """Candidate against baseline: each side's median of invocation medians, the shift (candidate /
    baseline - 1) with its interval, the p-value, the verdict and why when it is inconclusive."""

    invocations_baseline: int
    invocations_candidate: int
    baseline: float
    candidate: float
    shift: float
    low: float
    high: float
    p_value: float
    verdict: SpeedVerdict
    why: str = ""


def _speedup_interval(low: float, high: float, higher_is_better: bool) -> tuple[float, float]:
    a, b = speedup(1.0 + low, higher_is_better), speedup(1.0 + high, higher_is_better)
    return min(a, b), max(a, b)


def run_change(
    baseline: Sequence[Values],
    candidate: Sequence[Values],
    *,
    higher_is_better: bool,
    equivalence: float = EQUIVALENCE,
    confidence: float = CONFIDENCE_LEVEL,
) -> RunChange:
    """``baseline`` and ``candidate``: each side's invocations (iteration values of one process each)."""
    b, c = invocation_medians(baseline), invocation_medians(candidate)
    b, c = b[b > 0], c[c > 0]
    if not b.size or not c.size:
        nan = math.nan
        return RunChange(len(b), len(c), nan, nan, nan, nan, nan, nan, INCONCLUSIVE, "no positive values a side")
    s = step(b, c, confidence)
    p = mann_whitney_u(c, b).p_value if b.size > 1 or c.size > 1 else math.nan
    medians = (len(b), len(c), float(np.median(b)), float(np.median(c)), s.shift)
    if s.coverage < confidence:
        why = f"{len(b)} vs {len(c)} invocations are too few for a {confidence:.0%} interval (4 a side at least)"
        return RunChange(*medians, math.nan, math.nan, p, INCONCLUSIVE, why)
    low, high = _speedup_interval(s.low, s.high, higher_is_better)
    return RunChange(*medians, s.low, s.high, p, ci_verdict(low, high, equivalence))
