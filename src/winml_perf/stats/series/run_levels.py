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
   is in the lower mode when it lies nearer ``a + offset`` than ``a``. A run whose own comb (its
   invocations alone) puts some of them in each mode keeps that comb's anchor: a window reaching
   across a step of a quarter or more (with modes 35 % apart) read the fast invocations after it
   as slow ones, and the step as a change of the modes' shares (benchmarks/bench_gate.py). A run
   in one mode only takes the window's anchor: all slow and a level one mode lower look alike in
   it alone.
3. The run's level: the geometric mean of its invocations, lower-mode ones divided by
   exp(offset); its lower-mode share: the fraction of its invocations there.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from winml_perf.stats.modes import detect_modes
from winml_perf.support.errors import UsageError

#: Runs on either side of a run that its local reference and its comb window take in.
WINDOW = 5
#: Residuals (log units) beyond this count as this much in the comb's cost (an outlier cannot pull
#: the anchor).
CLIP = 0.25
#: Comb costs this close (relative to the larger of the lowest cost and CLIP^2) are equal.
TIE = 1e-9
#: Elements of the comb's (runs x candidates x runs x values) cost held at once: small enough to stay in
#: the CPU cache (larger batches ran 2-3x slower here).
_COMB_ELEMENTS = 50_000


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


def as_runs(values: Sequence[Any], what: str = "series") -> list[np.ndarray]:
    """Per-run arrays of positive finite invocation values (a scalar is a one-invocation run)."""
    try:  # as a rule every run has as many invocations: one array, checked at once
        table = np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        table = np.empty(0)
    if table.ndim == 2 and table.shape[1] and np.isfinite(table).all() and (table > 0).all():
        return list(table)
    runs = []
    for i, v in enumerate(values):
        x = np.atleast_1d(np.asarray(v, dtype=float))
        if x.ndim != 1 or x.size == 0:
            raise UsageError(
                f"{what}: run {i} is not a number or a non-empty 1-D sequence of invocation values (shape {x.shape})",
                "pass one value, or one list of invocation estimates, per run, oldest first",
            )
        bad = ~np.isfinite(x) | (x <= 0)
        if bad.any():
            raise UsageError(
                f"{what}: run {i} has a value that is not a positive finite number ({x[bad][0]})",
                "drop failed invocations before detecting change points",
            )
        runs.append(x)
    return runs


def _rolling_median(x: np.ndarray, half: int) -> np.ndarray:
    """Median of x[t - half : t + half + 1] (cut at the ends) for every t: the middle of each
    sorted window, or the mean of the middle two (as np.median)."""
    n = len(x)
    out = np.empty(n)
    if n > 2 * half:  # windows that are not cut: 2 half + 1 values, the middle one of them
        windows = np.lib.stride_tricks.sliding_window_view(x, 2 * half + 1)
        out[half : n - half] = np.partition(windows, half, axis=1)[:, half]
    values = x.tolist()
    for t in (*range(min(half, n)), *range(max(half, n - half), n)):  # cut windows
        window = sorted(values[max(0, t - half) : t + half + 1])
        mid = len(window) // 2
        out[t] = window[mid] if len(window) % 2 else (window[mid - 1] + window[mid]) / 2
    return out


def _padded(logs: list[np.ndarray]) -> np.ndarray:
    """(runs, most invocations) with each run's values first, then NaN."""
    width = max(len(y) for y in logs)
    out = np.full((len(logs), width), np.nan)
    for t, y in enumerate(logs):
        out[t, : len(y)] = y
    return out


def _first_lowest(cost: np.ndarray) -> np.ndarray:
    """Per row: the first index whose cost is the row's lowest up to rounding. Equal costs are
    common (a window with values in one mode costs the same with the anchor on them or one offset
    away) and must not be decided by the order of a sum's terms."""
    lowest = cost.min(axis=1, keepdims=True)
    first: np.ndarray = np.argmax(cost <= lowest + TIE * np.maximum(lowest, CLIP * CLIP), axis=1)
    return first


def _run_costs(values: np.ndarray, candidates: np.ndarray, offset: float) -> np.ndarray:
    """(runs, candidates, near runs): the comb cost of each candidate of a run (``candidates``, one
    row per run) against each of the near runs' values (``values``: runs x near runs x values, NaN
    for none, which cost 0), in batches of runs that stay in the CPU cache, in one buffer.

    With h = offset / 2 and e = y - (a + h), the nearer tooth's squared distance
    min((y - a)^2, (y - a - offset)^2) is (|e| - |h|)^2: one distance a value instead of two."""
    n, near, width = values.shape
    per_run = np.empty((n, candidates.shape[1], near))
    rows = max(1, _COMB_ELEMENTS // (near * width) // candidates.shape[1])
    buffer = np.empty((rows, candidates.shape[1], near, width))
    middles = candidates + offset / 2  # between each candidate's two teeth
    half_gap = abs(offset) / 2
    ones = np.ones(width)
    missing = np.isnan(values)[:, None]  # (runs, 1, near runs, values)
    runs_missing = missing.any(axis=(1, 2, 3))
    for start in range(0, n, rows):
        end = min(n, start + rows)
        d = buffer[: end - start]
        np.subtract(values[start:end, None, :, :], middles[start:end, :, None, None], out=d)
        np.abs(d, out=d)
        np.subtract(d, half_gap, out=d)
        np.multiply(d, d, out=d)
        np.minimum(d, CLIP * CLIP, out=d)
        # a missing value costs nothing; a missing candidate's costs are never looked at
        if runs_missing[start:end].any():
            np.copyto(d, 0.0, where=missing[start:end])
        np.matmul(d, ones, out=per_run[start:end])  # the sum over a run's values (faster than .sum here)
    return per_run


def _comb_anchors(runs: np.ndarray, offset: float, half: int) -> np.ndarray:
    """Per run t: the upper tooth of the best two-tooth comb (teeth ``offset`` apart) through the
    values of runs t - half .. t + half (``runs``: NaN-padded log values, one row per run).

    The candidates of a window are its values and its values - offset, in that order (the first
    of equal costs wins: ``_first_lowest``). A candidate from run s is in the windows of runs
    s - half .. s + half, which hold runs s - 2 half .. s + 2 half: its cost against each of those
    runs is computed once, and each window's cost is a sum over a range of them (cumulative sums)."""
    n, width = runs.shape
    reach = 2 * half
    near_runs = np.arange(n)[:, None] + np.arange(-reach, reach + 1)[None, :]  # (n, 2 reach + 1)
    values = np.where(((near_runs >= 0) & (near_runs < n))[..., None], runs[np.clip(near_runs, 0, n - 1)], np.nan)
    candidates = np.concatenate([runs, runs - offset], axis=1)  # (n, 2 width)
    per_run = _run_costs(values, candidates, offset)  # cost of candidate c of run s against run s + d - reach
    summed = np.concatenate([np.zeros((n, 2 * width, 1)), np.cumsum(per_run, axis=2)], axis=2)
    step = np.arange(-half, half + 1)  # window t = s + step holds runs s + step - half .. s + step + half
    in_window = summed[..., step + half + reach + 1] - summed[..., step - half + reach]  # (n, 2 width, 2 half + 1)
    # window t: candidates of runs s = t + f, at step -f; ordered as upper|lower, run, invocation
    source = np.arange(n)[:, None] + step[None, :]  # (n, 2 half + 1)
    inside = (source >= 0) & (source < n)
    src = np.clip(source, 0, n - 1)
    cost = in_window[src, :, (half - step)[None, :]]  # (n, 2 half + 1, 2 width)
    cand = candidates[src]  # (n, 2 half + 1, 2 width)
    cost = np.where(inside[..., None] & ~np.isnan(cand), cost, np.inf)

    def in_window_order(a: np.ndarray) -> np.ndarray:  # (n, source run, upper|lower x invocation) -> (n, candidates)
        return a.reshape(n, 2 * half + 1, 2, width).transpose(0, 2, 1, 3).reshape(n, -1)

    cost, cand = in_window_order(cost), in_window_order(cand)
    a = np.take_along_axis(cand, _first_lowest(cost)[:, None], axis=1)
    y = np.where(inside[..., None], runs[src], np.nan).reshape(n, -1)  # the window's values
    ok = ~np.isnan(y)
    near = np.where(np.abs(y - a) <= np.abs(y - a - offset), y, y - offset)
    keep = ok & (np.abs(near - a) < CLIP)
    kept = keep.sum(axis=1)
    mean = np.where(keep, near, 0.0).sum(axis=1) / np.maximum(kept, 1)
    return np.where(kept > 0, mean, a[:, 0])


def mode_aware_levels(values: Sequence[Any], *, window: int = WINDOW) -> RunLevels:
    """Per-run levels on the upper mode's scale and the lower mode's share (see module doc)."""
    runs = as_runs(values)
    counts = np.array([len(r) for r in runs])
    if not runs:
        return RunLevels(np.array([]), np.array([]), None, 1.0, counts)
    logs = [np.log(r) for r in runs]
    flat = np.concatenate(logs)
    run_of = np.repeat(np.arange(len(runs)), counts)
    raw = np.exp(np.bincount(run_of, flat) / counts)
    largest = np.maximum.reduceat(flat, np.cumsum(counts) - counts)  # each run's largest (counts >= 1)
    reference = _rolling_median(largest, window)
    report = detect_modes(np.exp(flat - reference[run_of]))
    if not report.bimodal:
        return RunLevels(raw, raw, None, 1.0, counts)
    lower, upper = report.modes
    offset = math.log(lower.centre / upper.centre)
    level, share = _assigned(logs, offset, window)
    return RunLevels(level, raw, share, math.exp(offset), counts)


def _assigned(logs: list[np.ndarray], offset: float, window: int) -> tuple[np.ndarray, np.ndarray]:
    """Per run: its level on the upper mode's scale and its lower-mode share, each invocation
    assigned by the comb through the runs ``window`` either side (steps 2 and 3 of the module doc)."""
    counts = np.array([len(y) for y in logs])
    flat, run_of = np.concatenate(logs), np.repeat(np.arange(len(logs)), counts)
    padded = _padded(logs)
    anchor = _comb_anchors(padded, offset, window)
    if window > 0:  # a run whose own invocations fall in both modes says where its upper one is (step 2)
        own = _comb_anchors(padded, offset, 0)
        own_lower = np.bincount(run_of, np.abs(flat - own[run_of] - offset) < np.abs(flat - own[run_of]), len(logs))
        anchor = np.where((own_lower > 0) & (own_lower < counts), own, anchor)
    anchor = anchor[run_of]
    in_lower = np.abs(flat - anchor - offset) < np.abs(flat - anchor)
    level = np.exp(np.bincount(run_of, np.where(in_lower, flat - offset, flat)) / counts)
    return level, np.bincount(run_of, in_lower) / counts
