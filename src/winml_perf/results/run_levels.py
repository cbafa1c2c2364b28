"""Per-run levels that do not inherit process modes: the input of change-point detection when a
series keeps each run's invocation estimates (one value per fresh process).

Why: when processes land in one of two modes (issue 12: 19.8k / 12.5k tok/s between processes
here, 6.2 / 9.8 ms decode steps on WebGPU), a run's median of a few invocations lands in the other
mode whenever most of its invocations do, so the per-run series carries the modes' gap as noise
and a 5 % step drowns in it. Here every invocation is assigned to its mode and moved onto the
upper mode's scale, so every invocation carries information about a shift of the level, and the
share of the lower mode becomes a series of its own (a change that makes one mode more frequent
is judged there, not hidden by the normalisation).

Method, in log units (positive values only):
1. Whether there are two modes and how far apart (``offset``, the lower mode's log centre minus
   the upper's): ``uncertainty.modes.detect_modes`` on the invocation values divided by a local
   reference, so slow level changes and steps do not blur the modes. The reference is the rolling
   median, over ``WINDOW`` runs either side, of each run's largest invocation: it stays on the
   upper mode while most runs have one invocation there (a median of medians would move to the
   lower mode wherever that mode holds most invocations, and split each mode in two). Unimodal: levels are the per-run geometric
   means and there is no share series.
2. Which mode each invocation is in: a two-tooth comb fitted in a window of runs around each run:
   the anchor ``a`` minimises sum_k min((y_k - a)^2, (y_k - a - offset)^2, CLIP^2) over the
   window's values, so ``a`` sits on the upper mode whatever the modes' shares are there (a
   candidate anchor on the lower mode would leave the upper values at no tooth); an invocation
   is in the lower mode when it lies nearer ``a + offset`` than ``a``.
3. The run's level: the geometric mean of its invocations, lower-mode ones divided by
   exp(offset); its lower-mode share: the fraction of its invocations there.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from winml_perf.errors import UsageError
from winml_perf.uncertainty.modes import detect_modes

#: Runs on either side of a run that its local reference and its comb window take in.
WINDOW = 5
#: Residuals (log units) beyond this count as this much in the comb's cost (an outlier cannot pull
#: the anchor).
CLIP = 0.25


@dataclass(frozen=True)
class RunLevels:
    """Per-run levels on the upper mode's scale and, when bimodal, the lower mode's share per run."""

    level: np.ndarray  # one value per run, the metric's unit
    raw: np.ndarray  # per-run geometric mean of the invocations as measured (modes mixed)
    lower_share: np.ndarray | None  # per run: fraction of its invocations in the lower mode
    ratio: float  # lower mode / upper mode (1.0 when unimodal)
    invocations: np.ndarray  # invocations per run

    @property
    def bimodal(self) -> bool:
        return self.lower_share is not None


def as_runs(values: Sequence, what: str = "series") -> list[np.ndarray]:
    """Per-run arrays of positive finite invocation values (a scalar is a one-invocation run)."""
    runs = []
    for i, v in enumerate(values):
        x = np.atleast_1d(np.asarray(v, dtype=float))
        if x.ndim != 1 or x.size == 0:
            raise UsageError(f"{what}: run {i} is not a number or a non-empty 1-D sequence of invocation values (shape {x.shape})",
                             "pass one value, or one list of invocation estimates, per run, oldest first")
        bad = ~np.isfinite(x) | (x <= 0)
        if bad.any():
            raise UsageError(f"{what}: run {i} has a value that is not a positive finite number ({x[bad][0]})",
                             "drop failed invocations before detecting change points")
        runs.append(x)
    return runs


def _rolling_median(x: np.ndarray, half: int) -> np.ndarray:
    n = len(x)
    return np.array([np.median(x[max(0, t - half):t + half + 1]) for t in range(n)])


def _window_values(logs: list[np.ndarray], half: int) -> list[np.ndarray]:
    n = len(logs)
    return [np.concatenate(logs[max(0, t - half):t + half + 1]) for t in range(n)]


def _comb_anchor(y: np.ndarray, offset: float) -> float:
    """The upper tooth of the best two-tooth comb (teeth ``offset`` apart) through ``y``."""
    candidates = np.concatenate([y, y - offset])
    d_up = (y[None, :] - candidates[:, None]) ** 2
    d_low = (y[None, :] - candidates[:, None] - offset) ** 2
    cost = np.minimum(np.minimum(d_up, d_low), CLIP * CLIP).sum(axis=1)
    a = float(candidates[int(np.argmin(cost))])
    upper = np.abs(y - a) <= np.abs(y - a - offset)
    near = np.where(upper, y, y - offset)
    keep = np.abs(near - a) < CLIP
    return float(near[keep].mean()) if keep.any() else a


def mode_aware_levels(values: Sequence, *, window: int = WINDOW) -> RunLevels:
    """Per-run levels on the upper mode's scale and the lower mode's share (see module doc)."""
    runs = as_runs(values)
    logs = [np.log(r) for r in runs]
    counts = np.array([len(r) for r in runs])
    raw = np.array([math.exp(float(y.mean())) for y in logs])
    if not runs:
        return RunLevels(np.array([]), raw, None, 1.0, counts)
    reference = _rolling_median(np.array([y.max() for y in logs]), window)
    residuals = np.concatenate([y - ref for y, ref in zip(logs, reference)])
    report = detect_modes(np.exp(residuals))
    if not report.bimodal:
        return RunLevels(raw, raw, None, 1.0, counts)
    lower, upper = report.modes
    offset = math.log(lower.centre / upper.centre)
    level, share = np.empty(len(runs)), np.empty(len(runs))
    for t, window_y in enumerate(_window_values(logs, window)):
        anchor = _comb_anchor(window_y, offset)
        y = logs[t]
        in_lower = np.abs(y - anchor - offset) < np.abs(y - anchor)
        level[t] = math.exp(float(np.where(in_lower, y - offset, y).mean()))
        share[t] = float(in_lower.mean())
    return RunLevels(level, raw, share, math.exp(offset), counts)
