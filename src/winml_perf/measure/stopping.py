"""When to stop measuring a cell, and whether the next repetition is an iteration or an invocation.

The one stopping rule of both schedules: measure/driver.py applies ``decide`` after every batch.
Pure functions of what was measured. Fixed: ``iterations`` in each of ``invocations``. Adaptive,
one invocation (``max_invocations`` 1): iterate until the within-process interval of the median
reaches the target, or a cap. Several invocations (Kalibera & Jones, ISMM 2013): the interval is
``uncertainty.median_interval`` over the invocations so far; once an invocation has its
``min_iterations`` and two invocations exist, the variance at each level (``variance_components``)
and the cost of an iteration and of an invocation (process start, model load, warmup) decide
whether one more iteration here or a new invocation buys more precision per second:
``next_repetition`` (K&J's optimal iteration count r1*) from 6 invocations on, and below that
(Student t intervals) the one of the two that narrows the predicted interval more per second.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from winml_perf.measure.cell_progress import RunningValues, sorted_median
from winml_perf.model.spec import IterationPolicy
from winml_perf.stats import median_ci_ranks, median_interval, next_repetition, variance_components
from winml_perf.stats.hierarchical import Coverage, Interval
from winml_perf.stats.repetition import VarianceComponents, components_from_moments
from winml_perf.support.human_numbers import fixed

STOP_ITERATIONS = "iterations"
STOP_CI_TARGET = "ci_target"
STOP_MAX_ITERATIONS = "max_iterations"
STOP_MAX_TIME = "max_time"
STOP_MAX_INVOCATIONS = "max_invocations"
STOP_DURATION = "duration"


@dataclass(frozen=True)
class Decision:
    """``stop`` (``reason`` is the stop reason), or go on with an ``iteration`` or an ``invocation``."""

    action: Literal["stop", "iteration", "invocation"]
    reason: str
    half_width_pct: float = math.nan


def half_width_pct(invocations: Sequence[Sequence[float]]) -> float:
    """The ±% of the interval the record reports for these samples (see median_interval).

    A running cell's invocations (cell_progress.RunningValues) keep their finite values sorted: the
    interval then comes from their order statistics and medians directly, the same figure
    median_interval computes (one invocation: its median and the two binomial ranks; several: the
    invocations' medians), without a pass over the samples."""
    if not all(isinstance(v, RunningValues) for v in invocations):
        return median_interval(invocations).half_width_pct
    running = [v for v in invocations if isinstance(v, RunningValues) and v.ordered]
    if len(running) >= 2:
        return median_interval([[v.median()] for v in running]).half_width_pct
    ordered = running[0].ordered if running else []
    ranks = median_ci_ranks(len(ordered))
    lo, hi = (math.nan, math.nan) if ranks is None else (ordered[ranks[0] - 1], ordered[ranks[1] - 1])
    cover = Coverage(("iterations",), 1, len(ordered))
    return Interval(
        sorted_median(ordered), float(lo), float(hi), 0.95, "order_statistics_iterations", cover
    ).half_width_pct


def _components(invocations: Sequence[Sequence[float]]) -> VarianceComponents:
    """variance_components of the invocations; from each running invocation's kept moments when
    the cell keeps them (a finished invocation's never change; the current one's cost O(its size))."""
    running = [v for v in invocations if isinstance(v, RunningValues) and v.ordered]
    if len(running) != len(invocations) or len(running) < 2 or sum(len(v.ordered) for v in running) <= len(running):
        return variance_components(invocations)  # the values themselves (and its errors)
    moments = [v.moments() for v in running]
    sizes = np.array([len(v.ordered) for v in running], dtype=float)
    return components_from_moments(sizes, np.array([m for m, _ in moments]), [ss for _, ss in moments])


def decide(
    policy: IterationPolicy,
    invocations: Sequence[Sequence[float]],
    spent_s: float,
    iteration_cost_s: float,
    invocation_cost_s: float,
) -> Decision:
    """After an iteration of the last invocation of ``invocations`` (primary-metric values per
    invocation): stop, iterate, or end this invocation so that a new one starts. ``spent_s`` is the
    time counted against ``max_time_s``."""
    k = len(invocations)
    here = len(invocations[-1]) if k else 0
    if policy.duration_s is not None:  # a sustained run: measured time, not a count or a target
        if spent_s >= policy.duration_s:
            return Decision("stop", STOP_DURATION)
        return Decision("iteration", f"{spent_s:.0f} of {policy.duration_s:g} s")
    target = policy.target_ci_pct  # None: a fixed policy (IterationPolicy.adaptive)
    if target is None:
        return _fixed(policy, k, here)
    total = sum(len(v) for v in invocations)
    half = math.nan
    if here >= policy.min_iterations and k >= policy.invocations:
        half = half_width_pct(invocations)
        if not math.isnan(half) and half <= target:
            return Decision("stop", STOP_CI_TARGET, half)
    if total >= policy.max_iterations:
        return Decision("stop", STOP_MAX_ITERATIONS, half)
    if spent_s >= policy.max_time_s:
        return Decision("stop", STOP_MAX_TIME, half)
    if here < policy.min_iterations or policy.max_invocations == 1:
        return Decision("iteration", f"{here} of at least {policy.min_iterations} iterations in this invocation", half)
    if k < policy.invocations or k < 2:
        wanted = (
            "a second measures the variance between invocations"
            if k < 2
            else f"at least {policy.invocations} invocations"
        )
        return _new_invocation(policy, k, f"invocation {k} has {here} iterations; {wanted}", half)
    if total <= k:  # one iteration per invocation: no within-invocation variance to weigh yet
        return Decision("iteration", "no invocation has a repeated iteration yet", half)
    components = _components(invocations)
    c1, c2 = max(iteration_cost_s, 1e-9), max(invocation_cost_s, 0.0)
    if math.isnan(half):
        half = half_width_pct(invocations)
    predicted = (
        predicted_half_width(components, here, k) / abs(components.grand_mean) * 100.0
        if components.grand_mean
        else math.nan
    )
    if half > MODEL_SLACK * predicted:
        return _new_invocation(
            policy,
            k,
            f"the interval (±{fixed(half, 2)} %) is over {MODEL_SLACK:g}x wider than the variance "
            f"model predicts (±{fixed(predicted, 2)} %): {k} invocations underestimate the variance between "
            f"them, and only another invocation can show it",
            half,
        )
    if k >= T_REGIME_ENDS and components.between > 0:
        advice = next_repetition(components, c1, c2, here)
        action, reason = advice.next, advice.reason
    else:
        action, reason = marginal_choice(components, c1, c2, here, k)
    if action == "iteration":
        return Decision("iteration", reason, half)
    return _new_invocation(policy, k, reason, half)


def _fixed(policy: IterationPolicy, k: int, here: int) -> Decision:
    if here < policy.iterations:
        return Decision("iteration", f"{here} of {policy.iterations} iterations in this invocation")
    if k < policy.invocations:
        return Decision("invocation", f"{k} of {policy.invocations} invocations")
    return Decision("stop", STOP_ITERATIONS)


def stop_reason(policy: IterationPolicy, values: Sequence[float], spent_s: float) -> str | None:
    """decide() for one invocation of ``values``: why to stop now, or None to go on."""
    decision = decide(policy, [values], spent_s, 0.0, 0.0)
    return decision.reason if decision.action == "stop" else None


def next_batch(policy: IterationPolicy, done: int, batch: int) -> int:
    """Iterations to run in the next batch of ``batch``, never past the cap: ``done`` counts this
    invocation's iterations against a fixed count, all of them against ``max_iterations``."""
    if policy.duration_s is not None:  # a sustained run has no count: its duration stops it
        return max(1, batch)
    limit = policy.max_iterations if policy.adaptive else policy.iterations
    return max(0, min(batch, limit - done))


#: An interval this many times wider than the variance model predicts means the model is wrong.
MODEL_SLACK = 2.0
#: From this many invocations the interval is distribution-free over invocation medians and K&J's
#: r1* (next_repetition) decides alone; below, the Student t quantile's fall with k matters too.
T_REGIME_ENDS = 6


def predicted_half_width(components: VarianceComponents, iterations: float, k: int) -> float:
    """t(k-1) x sqrt(T2^2/k + T1^2/(r1 k)): the interval K&J's variance predicts for k invocations
    of r1 iterations (Student t quantile at 97.5 %)."""
    from scipy.special import stdtrit  # Student's t quantile; loaded on first use

    return float(stdtrit(k - 1, 0.975)) * math.sqrt(components.between / k + components.within / (iterations * k))


def marginal_choice(
    components: VarianceComponents, iteration_cost_s: float, invocation_cost_s: float, here: int, k: int
) -> tuple[Literal["iteration", "invocation"], str]:
    """Iteration or invocation, whichever narrows the predicted interval more per second. K&J's r1*
    alone ignores that with 2-5 invocations the t quantile (12.7 at k = 2, 2.8 at k = 5) shrinks
    only with more invocations: when the invocations look alike (T2^2 = 0) it would iterate forever."""
    now = predicted_half_width(components, here, k)
    by_iteration = (now - predicted_half_width(components, here + 1, k)) / iteration_cost_s
    by_invocation = (now - predicted_half_width(components, here, k + 1)) / (
        invocation_cost_s + here * iteration_cost_s
    )
    if by_iteration >= by_invocation:
        return "iteration", (
            f"an iteration narrows the predicted interval {by_iteration / max(by_invocation, 1e-300):.1f}x "
            f"more per second than an invocation ({k} invocations, {here} iterations in this one)"
        )
    return "invocation", (
        f"an invocation narrows the predicted interval {by_invocation / max(by_iteration, 1e-300):.1f}x more "
        f"per second than an iteration (t quantile and between-invocation variance, {k} invocations)"
    )


def _new_invocation(policy: IterationPolicy, k: int, reason: str, half: float) -> Decision:
    if k >= policy.max_invocations:
        return Decision("stop", STOP_MAX_INVOCATIONS, half)
    return Decision("invocation", reason, half)
