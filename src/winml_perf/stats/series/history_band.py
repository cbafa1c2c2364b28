"""The gate's first-night rule: the newest run's invocations all beyond the history's band.

A change point needs runs on both sides of it (``changepoint.DEFAULT_MIN_SIZE``), so on the night a
large regression lands the change-point test cannot see it: eight ordinary nights and then a model
made 2.7x slower passed the gate. This rule sees such a step on its own night: the band is every
invocation estimate of the earlier runs (lowest to highest, slow-mode processes included), and the
newest run is beyond it when each of its invocations lies outside the band by more than the
threshold on the same side. Every invocation must agree and the margin is taken from the band's
extreme, so noise that the history has already shown cannot trigger it; steps the band's spread
hides are left to the change points (benchmarks/bench_gate.py counts both).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from winml_perf.stats.arrays import Values
from winml_perf.support.human_numbers import human

#: Fewest invocations the newest run needs for "all of them" to say something.
MIN_BAND_INVOCATIONS = 3


@dataclass(frozen=True)
class BandJudgement:
    """The newest run against the history's band: ``worse`` True (beyond on the worse side), False
    (beyond on the better side); ``margin``: how far its nearest invocation lies past the band's
    edge, as a fraction of that edge."""

    worse: bool
    low: float
    high: float
    runs: int
    invocations: int
    margin: float

    def reason(self, threshold: float) -> str:
        side = "below" if self.margin < 0 else "above"
        return (
            f"all {self.invocations} invocations of the newest run lie {abs(self.margin):.1%} or more {side} the band"
            f" of the {self.runs} earlier runs [{human(self.low)}, {human(self.high)}], beyond the {threshold:.1%} threshold"
        )


def beyond_band(
    earlier: Sequence[Values], newest: Values, *, higher_is_better: bool, threshold: float
) -> BandJudgement | None:
    """The judgement when every invocation of ``newest`` lies more than ``threshold`` (a fraction)
    beyond the band of ``earlier`` (runs of invocation estimates) on one side; None otherwise, or
    when the newest run has fewer than MIN_BAND_INVOCATIONS invocations or there is no history."""
    history = np.array([float(v) for run in earlier for v in run], dtype=float)
    new = np.array([float(v) for v in newest], dtype=float)
    if len(new) < MIN_BAND_INVOCATIONS or not history.size or not np.isfinite(new).all():
        return None
    low, high = float(history.min()), float(history.max())
    if low > 0 and new.max() < low * (1.0 - threshold):
        margin = float(new.max()) / low - 1.0
        return BandJudgement(higher_is_better, low, high, len(earlier), len(new), margin)
    if high > 0 and new.min() > high * (1.0 + threshold):
        margin = float(new.min()) / high - 1.0
        return BandJudgement(not higher_is_better, low, high, len(earlier), len(new), margin)
    return None
