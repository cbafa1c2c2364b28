"""When to stop measuring a cell, and whether the next repetition is an iteration or an invocation.

Pure functions of what was measured. One invocation (``max_invocations`` 1): iterate until the
within-process interval of the median reaches the target, or a cap. Several invocations (Kalibera
& Jones, ISMM 2013): the interval is ``uncertainty.median_interval`` over the invocations so far;
once an invocation has its ``min_iterations`` and two invocations exist, the variance at each level
(``variance_components``) and the cost of an iteration and of an invocation (process start, model
load, warmup) decide through ``next_repetition`` whether one more iteration here or a new
invocation buys more precision per second.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, Sequence

from winml_perf.bench.spec import IterationPolicy
from winml_perf.uncertainty import median_interval, next_repetition, variance_components

STOP_ITERATIONS = "iterations"
STOP_CI_TARGET = "ci_target"
STOP_MAX_ITERATIONS = "max_iterations"
STOP_MAX_TIME = "max_time"
STOP_MAX_INVOCATIONS = "max_invocations"


@dataclass(frozen=True)
class Decision:
    """``stop`` (``reason`` is the stop reason), or go on with an ``iteration`` or an ``invocation``."""

    action: Literal["stop", "iteration", "invocation"]
    reason: str
    half_width_pct: float = math.nan


def half_width_pct(invocations: Sequence[Sequence[float]]) -> float:
    """The ±% of the interval the record reports for these samples (see median_interval)."""
    return median_interval(invocations).half_width_pct


def decide(policy: IterationPolicy, invocations: Sequence[Sequence[float]], spent_s: float,
           iteration_cost_s: float, invocation_cost_s: float) -> Decision:
    """After an iteration of the last invocation of ``invocations`` (primary-metric values per
    invocation): stop, iterate, or end this invocation so that a new one starts."""
    k = len(invocations)
    here = len(invocations[-1]) if k else 0
    total = sum(len(v) for v in invocations)
    half = math.nan
    if here >= policy.min_iterations and k >= policy.invocations:
        half = half_width_pct(invocations)
        if not math.isnan(half) and half <= policy.target_ci_pct:
            return Decision("stop", STOP_CI_TARGET, half)
    if total >= policy.max_iterations:
        return Decision("stop", STOP_MAX_ITERATIONS, half)
    if spent_s >= policy.max_time_s:
        return Decision("stop", STOP_MAX_TIME, half)
    if here < policy.min_iterations or policy.max_invocations == 1:
        return Decision("iteration", f"{here} of at least {policy.min_iterations} iterations in this invocation", half)
    if k < policy.invocations or k < 2:
        wanted = "a second measures the variance between invocations" if k < 2 else f"at least {policy.invocations} invocations"
        return _new_invocation(policy, k, f"invocation {k} has {here} iterations; {wanted}", half)
    if total <= k:  # one iteration per invocation: no within-invocation variance to weigh yet
        return Decision("iteration", "no invocation has a repeated iteration yet", half)
    advice = next_repetition(variance_components(invocations), max(iteration_cost_s, 1e-9), max(invocation_cost_s, 0.0), here)
    if advice.next == "iteration":
        return Decision("iteration", advice.reason, half)
    return _new_invocation(policy, k, advice.reason, half)


def _new_invocation(policy: IterationPolicy, k: int, reason: str, half: float) -> Decision:
    if k >= policy.max_invocations:
        return Decision("stop", STOP_MAX_INVOCATIONS, half)
    return Decision("invocation", reason, half)
