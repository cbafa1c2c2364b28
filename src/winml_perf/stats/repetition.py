"""Variance at each level of repetition and where the next second of measuring is best spent.

Kalibera & Jones, "Rigorous Benchmarking in Reasonable Time", ISMM 2013, two levels: with r1
iterations in each of r2 invocations, the variance of the grand mean is
    T2^2 / r2 + T1^2 / (r1 r2),
T1^2 the variance between iterations of one invocation, T2^2 the variance between invocation means
beyond what their iterations explain. For a cost c1 per iteration and c2 per invocation (process
start, model load, warmups: everything but its measured iterations), the iteration count that
minimises that variance per unit of time is r1* = sqrt((c2 / c1) * (T1^2 / T2^2)) (their optimal
repetition count). Past r1* iterations, a new invocation buys more precision per second.

The components come from the one-way random-effects analysis of variance (Searle, Casella &
McCulloch, "Variance Components", 1992, §3.5), which for equal iteration counts is K&J's
S2^2 - S1^2 / r1 and accepts unequal counts.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from winml_perf.stats.arrays import Values
from winml_perf.stats.hierarchical import as_invocations


@dataclass(frozen=True)
class VarianceComponents:
    """Within-invocation (T1^2) and between-invocation (T2^2) variances of one metric."""

    within: float
    between: float
    invocations: int
    iterations: int
    grand_mean: float

    @property
    def between_share(self) -> float:
        """Share of one iteration's total variance that comes from the invocation it ran in."""
        total = self.within + self.between
        return self.between / total if total > 0 else math.nan


def variance_components(invocations: Sequence[Values]) -> VarianceComponents:
    """ANOVA estimates of T1^2 and T2^2 (T2^2 floored at 0); needs 2 invocations and a repeat."""
    invs = as_invocations(invocations)
    sizes = np.array([a.size for a in invs], dtype=float)
    n_total = float(sizes.sum())
    k = len(invs)
    if k < 2 or n_total <= k:
        raise ValueError(
            f"variance components need >= 2 invocations and a repeated iteration (got {k} "
            f"invocations, {int(n_total)} iterations)"
        )
    means = np.array([a.mean() for a in invs])
    return components_from_moments(sizes, means, [((a - m) ** 2).sum() for a, m in zip(invs, means)])


def invocation_moments(values: np.ndarray) -> tuple[float, float]:
    """(mean, sum of squared deviations from it) of one invocation's finite values, computed as
    variance_components computes them (a running cell keeps them for its finished invocations)."""
    m = values.mean()
    return m, ((values - m) ** 2).sum()


def components_from_moments(sizes: np.ndarray, means: np.ndarray, squares: Sequence[float]) -> VarianceComponents:
    """variance_components from each invocation's size, mean and sum of squared deviations (in the
    invocations' order): the same arithmetic, without the values."""
    n_total = float(sizes.sum())
    k = len(means)
    grand = float((sizes * means).sum() / n_total)
    ss_within = float(sum(squares))
    ss_between = float((sizes * (means - grand) ** 2).sum())
    ms_within = ss_within / (n_total - k)
    ms_between = ss_between / (k - 1)
    n0 = (n_total - float((sizes**2).sum()) / n_total) / (k - 1)  # effective iterations per invocation
    between = max(0.0, (ms_between - ms_within) / n0)
    return VarianceComponents(ms_within, between, k, int(n_total), grand)


def optimal_iterations(components: VarianceComponents, iteration_cost_s: float, invocation_cost_s: float) -> float:
    """K&J's r1*: iterations per invocation that minimise the variance per second (>= 1; inf when
    the invocations do not differ, so iterations alone pay)."""
    if iteration_cost_s <= 0 or invocation_cost_s < 0:
        raise ValueError(f"costs must be positive (iteration {iteration_cost_s} s, invocation {invocation_cost_s} s)")
    if components.between == 0:
        return math.inf
    return max(1.0, math.sqrt(invocation_cost_s / iteration_cost_s * components.within / components.between))


@dataclass(frozen=True)
class RepetitionAdvice:
    """What to measure next: one more iteration in this invocation, or a new invocation."""

    next: Literal["iteration", "invocation"]
    optimal_iterations: float
    iterations_in_invocation: int
    reason: str


def next_repetition(
    components: VarianceComponents,
    iteration_cost_s: float,
    invocation_cost_s: float,
    iterations_in_invocation: int,
) -> RepetitionAdvice:
    """Another iteration while this invocation has fewer than r1* (rounded up), else an invocation."""
    r1 = optimal_iterations(components, iteration_cost_s, invocation_cost_s)
    target = math.inf if math.isinf(r1) else math.ceil(r1)
    if iterations_in_invocation < target:
        reason = (
            f"{iterations_in_invocation} of {target} iterations per invocation: within-invocation variance "
            f"dominates its cost"
            if math.isfinite(target)
            else "invocations do not differ: iterate"
        )
        return RepetitionAdvice("iteration", r1, iterations_in_invocation, reason)
    reason = (
        f"{iterations_in_invocation} iterations reach the optimum {target}: between-invocation variance "
        f"({components.between_share:.0%} of the total) needs another invocation"
    )
    return RepetitionAdvice("invocation", r1, iterations_in_invocation, reason)
