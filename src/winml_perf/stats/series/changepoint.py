"""Change points in a series of per-run estimates (oldest first): E-Divisive means.

Method (Matteson & James, "A Nonparametric Approach for Multiple Change Point Analysis of
Multivariate Data", JASA 109(505), 2014), in 1-D with exponent alpha = 1:

- For a segment x[0:n) and a split tau, the divergence statistic is
  Q(tau) = tau (n - tau) / n * E, with the energy distance
  E = 2/(tau m) sum|X - Y| - 2/(tau(tau-1)) sum_{i<j}|X_i - X_j| - 2/(m(m-1)) sum_{i<j}|Y_i - Y_j|,
  X = x[:tau], Y = x[tau:], m = n - tau. The right end kappa is the segment's end, as in the
  implementation MongoDB runs (Daly et al., "Change Point Detection in Software Performance
  Testing", ICPE 2020); recursive bisection still separates a short middle segment.
- Every within-segment sum comes from one pairwise-distance matrix by cumulative sums: with
  r_t = sum_{i<t}|x_t - x_i| (the distances of a point to the earlier ones) and the full row sums
  s_t, the within-left sums are cumsum(r), the within-right sums a suffix sum of s - r, and the cross
  sums the rest; r itself comes, for a batch of permutations, from one pass over the prefixes,
  and for one ordering from the count and sum of the earlier values below each value. O(n^2) per
  ordering, vectorised over the batch.
- Significance by a permutation test of the maximum of Q over the segment (the max-statistic test of
  Matteson & James §3.2 and MongoDB): the segment is shuffled ``permutations`` times with a seeded
  generator and p = (1 + #{max Q* >= max Q}) / (1 + permutations done). A permutation test, not the
  Student t-test that Hunter/Apache Otava use for speed (Fleming et al., "Hunter: Using Change Point
  Detection to Hunt for Performance Regressions", ICPE 2023): per-run estimates are bimodal when
  processes land in different modes, the t-test's normality does not hold, and testing the split
  that maximised Q by a t-test ignores that it was selected. The permutation test needs only that
  the runs of a segment are exchangeable. It stops early once p can no longer reach ``alpha``
  (Besag & Clifford, "Sequential Monte Carlo p-values", Biometrika 1991): a shift-free segment
  costs a handful of permutations.
- Bisection: each segment is split at its best tau while the split is significant; a segment
  shorter than 2 x ``min_size`` is not split. Each segment is tested on its own at ``alpha``.
- Location: the test looks only at splits with ``min_size`` runs a side, so a step younger than
  that (the newest runs, where the gate looks) is split a run or two early. A significant split at
  that edge is moved to the best two-level fit down to MIN_LOCATED runs a side (``_located``).

Size of a level shift: the step over the LOCAL_RUNS runs either side of the change point (within
the neighbouring ones), the Hodges-Lehmann ratio with its exact Mann-Whitney interval
(stats/series/step_size.py). Not the whole segments' medians: slow drift moves those, and with a
percentile bootstrap of them the 95 % interval covered an injected 5-20 % step in 0.40-0.47 of
the change points found in 400-run series, this one in 0.87-0.93
(benchmarks/bench_shift_interval.py). A series with values <= 0 (no ratio of logs), and a mode
share change point (its shift is of the measured mixed mean), keep that bootstrap (Efron &
Tibshirani 1993), seeded.

Richer input: when each run is given as its invocation estimates (one value per fresh process),
the series is first turned into per-run levels that do not inherit process modes
(stats/series/run_levels.py: each invocation assigned to its mode and moved onto the upper mode's
scale), and the change points of that level series are reported as ``kind`` "level". When the
invocations are bimodal, the per-run share of the lower mode is a second series: its change points
are reported as ``kind`` "mode share", their shift being that of the runs' geometric mean as
measured (modes mixed), so a change that makes the slow mode more frequent is a regression of its
size. Level change points are tested at ``alpha`` and share change points at ``alpha`` too (two
tests per segment: the false rate per series at most doubles; the benchmark counts both). With
that precision a slow drift of a percent or two is itself significant, so a level change point is
kept only when it is a step: its shift over ``LOCAL_RUNS`` runs either side is at least
``min_shift``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any

import numpy as np

from winml_perf.stats.arrays import Values
from winml_perf.stats.series.history_band import beyond_band
from winml_perf.stats.series.run_levels import as_runs, mode_aware_levels
from winml_perf.stats.series.step_size import step
from winml_perf.support.errors import UsageError
from winml_perf.support.human_numbers import human

#: Significance level of each segment's permutation test (tuned on the development seed of
#: benchmarks/bench_changepoint.py: 0.02 gave the best recall at the same false rate as 0.005-0.01).
DEFAULT_ALPHA = 0.02
#: Permutations per test; the smallest attainable p is 1 / (permutations + 1).
DEFAULT_PERMUTATIONS = 199
#: Fewest runs on either side of a split the permutation test looks at.
DEFAULT_MIN_SIZE = 5
#: Fewest runs on either side of a change point once it is located (see ``_located``).
MIN_LOCATED = 2
DEFAULT_SEED = 20261201
#: Invocation input: smallest local shift of a level change point, the runs either side that
#: measure it and the trimmed fraction of their log levels. Chosen on the development seed of
#: benchmarks/bench_changepoint.py (floors 0-3 %, 10 or 20 runs, median / 20 %-trimmed / plain
#: mean): slow drift of +-1.5 % turned into 5-12 significant change points per 1,000 runs without
#: a floor and about 1 with this one, at no loss of recall at 5 % on the within-testbed noise.
DEFAULT_MIN_SHIFT = 0.03
LOCAL_RUNS = 10
TRIM = 0.2
#: Bootstrap resamples for the interval of a shift, and its confidence level.
SHIFT_RESAMPLES = 1000
SHIFT_CONFIDENCE = 0.95
#: Elements of the (permutations x n x n) comparison batch held at once (about 32 MB of float64).
_BATCH_ELEMENTS = 4_000_000
#: Permutations of the first batch, doubled after each: a shift-free segment usually reaches its
#: stopping count of exceedances within the first one or two.
_FIRST_BATCH = 16
#: Rows from which ``_earlier_distances`` loops over prefixes (at 32 x 120 twice as fast as the
#: counts here, as fast at 16, slower for a row or a few), and the prefixes it takes at a time (8:
#: 1.2-4x faster than one at a time at 32-87 x 120 here, as fast at 199).
_LOOP_ROWS = 32
_BLOCK = 8


class Direction(StrEnum):
    """Which way a change point moved a series (equal to its text, which the store and JSON hold)."""

    IMPROVEMENT = "improvement"
    REGRESSION = "regression"
    NO_MEDIAN_SHIFT = "no median shift"


IMPROVEMENT, REGRESSION, NO_MEDIAN_SHIFT = Direction
#: Kinds of change point: of the (mode-aware) level, or of the share of the lower mode.
LEVEL, MODE_SHARE = "level", "mode share"
SHARE_SEED_OFFSET = 104729


@dataclass(frozen=True)
class ChangePoint:
    """A change point: the run at ``index`` is the first of a new segment."""

    index: int
    run_id: Any
    median_before: float  # of the LOCAL_RUNS runs before; a mode share change point: the segment's mean measured value
    median_after: float
    shift: float  # the step (see the module doc); a mode share change point: mean after / mean before - 1
    shift_low: float
    shift_high: float
    p_value: float
    direction: Direction
    kind: str = LEVEL
    share_before: float | None = None  # mode share change points: the lower mode's share either side
    share_after: float | None = None
    #: None: [shift_low, shift_high] is a SHIFT_CONFIDENCE interval. A number: the runs either side
    #: are too few for that, the interval is the widest they give, and this is its exact coverage.
    shift_coverage: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def as_series(values: Values, what: str = "series") -> np.ndarray:
    """A 1-D float array of finite values, or a UsageError naming what is wrong."""
    x = np.asarray(values, dtype=float)
    if x.ndim != 1:
        raise UsageError(
            f"{what}: expected a 1-D sequence of per-run values, got shape {x.shape}",
            "pass one value per run, oldest first",
        )
    bad = np.flatnonzero(~np.isfinite(x))
    if len(bad):
        raise UsageError(
            f"{what}: value at index {int(bad[0])} is not finite ({x[bad[0]]})",
            "drop failed runs (no value) before detecting change points",
        )
    return x


def _q_from_r(r: np.ndarray, row_sums: np.ndarray, min_size: int) -> np.ndarray:
    """Q(tau) for tau = min_size .. n - min_size from the distances to earlier points r (..., n)
    and the full row sums (..., n) of the same ordering."""
    n = r.shape[-1]
    total = r.sum(axis=-1, keepdims=True)  # sum over i<j
    left = np.cumsum(r, axis=-1)[..., min_size - 1 : n - min_size]  # within x[:tau]
    later = row_sums - r  # distances of a point to the later ones
    right = np.cumsum(later[..., ::-1], axis=-1)[..., ::-1][..., min_size : n - min_size + 1]  # within x[tau:]
    cross = total - left - right
    tau = np.arange(min_size, n - min_size + 1, dtype=float)
    m = n - tau
    energy = 2.0 * cross / (tau * m) - 2.0 * left / (tau * (tau - 1)) - 2.0 * right / (m * (m - 1))
    out: np.ndarray = tau * m / n * energy
    return out


def divergence(values: Values, min_size: int = 2) -> np.ndarray:
    """Q(tau) of every split tau = min_size .. n - min_size of one segment (the statistic above)."""
    x = as_series(values)
    if min_size < 2 or len(x) < 2 * min_size:
        raise UsageError(
            f"divergence: need min_size >= 2 and at least 2 x min_size values, got {min_size} and {len(x)}"
        )
    return _q_from_r(_earlier_distances(x[None, :])[0], np.abs(x[:, None] - x[None, :]).sum(axis=1), min_size)


def _earlier_distances(y: np.ndarray) -> np.ndarray:
    """r_t = sum_{i<t} |y_t - y_i| for each row of y (k, n). Many rows (a batch of permutations):
    over the prefixes of the transposed batch, _BLOCK of them at a time, each r_t summed over i in
    order (the distances from y_t on count as 0, which adds nothing), in the CPU cache. Few rows:
    without the (k, n, n) distances, r_t = y_t (2 L_t - t) + S_t - 2 W_t with L_t and W_t the count
    and sum of the earlier values below y_t and S_t the sum of all earlier values (one batched
    matrix product); the loop's per-block overhead dominates there."""
    k, n = y.shape
    if k >= _LOOP_ROWS:
        columns = np.ascontiguousarray(y.T)
        r = np.empty((n, k))
        work = np.empty(n * _BLOCK * k)  # in place: no temporaries per block
        before = np.tri(_BLOCK, _BLOCK, -1).T[:, :, None]  # [i - start, t - start]: 1 where i < t
        for start in range(0, n, _BLOCK):
            end = min(n, start + _BLOCK)
            diff = work[: end * (end - start) * k].reshape(end, end - start, k)
            np.subtract(columns[:end, None, :], columns[None, start:end, :], out=diff)
            np.abs(diff, out=diff)
            diff[start:] *= before[: end - start, : end - start]
            diff.sum(axis=0, out=r[start:end])
        return r.T
    below = ((y[:, :, None] > y[:, None, :]) & np.tri(n, n, -1, dtype=bool)).astype(float)
    count_sum = np.matmul(below, np.stack([np.ones_like(y), y], axis=-1))
    earlier = np.cumsum(y, axis=1) - y
    out: np.ndarray = y * (2.0 * count_sum[..., 0] - np.arange(n)) + earlier - 2.0 * count_sum[..., 1]
    return out


def _best_split(x: np.ndarray, min_size: int, alpha: float, permutations: int, seed: int) -> tuple[int, float, float]:
    """(tau, Q(tau), permutation p-value) of the best split of one segment."""
    n = len(x)
    row_sums = np.abs(x[:, None] - x[None, :]).sum(axis=1)
    q = _q_from_r(_earlier_distances(x[None, :])[0], row_sums, min_size)
    best = int(np.argmax(q))
    observed = float(q[best])
    # p <= alpha needs at most this many permutation maxima at or above the observed one.
    allowed = math.floor(alpha * (permutations + 1)) - 1
    rng = np.random.default_rng(seed)
    most = max(1, _BATCH_ELEMENTS // (n * n))
    batch = min(most, _FIRST_BATCH)
    done = exceed = 0
    while done < permutations and exceed <= allowed:
        k = min(batch, permutations - done)
        batch = min(most, 2 * batch)  # the permutations drawn are the same whatever the batches
        perm = np.argsort(rng.random((k, n)), axis=1)
        qmax = _q_from_r(_earlier_distances(x[perm]), row_sums[perm], min_size).max(axis=1)
        exceed += int((qmax >= observed * (1 - 1e-12)).sum())
        done += k
    return best + min_size, observed, (1 + exceed) / (1 + done)


def _shift(
    before: np.ndarray, after: np.ndarray, seed: int, centre: Callable[..., Any] = np.median
) -> tuple[float, float, float]:
    """centre(after)/centre(before) - 1 (the median by default) and its percentile bootstrap interval."""
    point = float(centre(after) / centre(before) - 1.0)
    rng = np.random.default_rng(seed)
    b = centre(before[rng.integers(0, len(before), (SHIFT_RESAMPLES, len(before)))], axis=1)
    a = centre(after[rng.integers(0, len(after), (SHIFT_RESAMPLES, len(after)))], axis=1)
    tail = (1.0 - SHIFT_CONFIDENCE) / 2.0 * 100.0
    lo, hi = np.percentile(a / b - 1.0, [tail, 100.0 - tail])
    return point, float(lo), float(hi)


def direction_of(shift: float, higher_is_better: bool) -> Direction:
    """improvement / regression of a relative shift of the median, given the metric's direction."""
    if shift == 0 or not math.isfinite(shift):
        return NO_MEDIAN_SHIFT
    return IMPROVEMENT if (shift > 0) == higher_is_better else REGRESSION


def _check_options(alpha: float, permutations: int, min_size: int) -> None:
    if not 0 < alpha < 1:
        raise UsageError(f"change points: alpha must lie in (0, 1), got {alpha}")
    if permutations < 1 or alpha * (permutations + 1) < 1:
        raise UsageError(
            f"change points: {permutations} permutations cannot reach p <= {alpha}",
            f"use at least {math.ceil(1 / alpha) - 1} permutations",
        )
    if min_size < 2:
        raise UsageError(f"change points: min_size must be >= 2, got {min_size}")


def _step_fit_cost(x: np.ndarray, tau: int) -> float:
    """Absolute deviations of x from a two-level step at tau (each side's median)."""
    left, right = x[:tau], x[tau:]
    return float(np.abs(left - np.median(left)).sum() + np.abs(right - np.median(right)).sum())


def _located(x: np.ndarray, tau: int, min_size: int) -> int:
    """Where the change of a significant split of segment ``x`` lies. The test looks only at splits
    with min_size runs a side; when the best of them is at that edge, the change may lie beyond it
    (a step 3 nights old is found at its 5th-newest run, 2 good runs early): the edge is then
    searched down to MIN_LOCATED runs by the best two-level fit, the edge itself winning ties."""
    n = len(x)
    if tau == n - min_size:
        candidates = range(tau, n - MIN_LOCATED + 1)
    elif tau == min_size:
        candidates = range(tau, MIN_LOCATED - 1, -1)
    else:
        return tau
    return min(candidates, key=lambda t: _step_fit_cost(x, t))


def _cuts(x: np.ndarray, alpha: float, permutations: int, min_size: int, seed: int) -> dict[int, float]:
    """Significant change points of one series by recursive bisection: index -> p-value."""
    found: dict[int, float] = {}
    pending = [(0, len(x))]
    while pending:
        start, end = pending.pop()
        if end - start < 2 * min_size:
            continue
        # A segment's seed depends on where it lies, not on the order segments are visited.
        segment = x[start:end]
        tau, _, p = _best_split(segment, min_size, alpha, permutations, seed + 7919 * start + end)
        if p <= alpha:
            tau = _located(segment, tau, min_size)
            found[start + tau] = p
            pending += [(start, start + tau), (start + tau, end)]
    return dict(sorted(found.items()))


def _points(
    x: np.ndarray,
    found: dict[int, float],
    run_ids: Sequence[Any] | None,
    higher_is_better: bool,
    seed: int,
    kind: str = LEVEL,
    measured: np.ndarray | None = None,
    share: np.ndarray | None = None,
) -> list[ChangePoint]:
    """ChangePoints of the cuts ``found`` in ``x``; a share change point is sized on ``measured``."""
    cuts = list(found)
    bounds = [0, *cuts, len(x)]
    points = []
    for k, cut in enumerate(cuts):
        lo_end, hi_end = bounds[k], bounds[k + 2]
        if kind == LEVEL:
            before, after = x[max(lo_end, cut - LOCAL_RUNS) : cut], x[cut : min(hi_end, cut + LOCAL_RUNS)]
            mid_before, mid_after = float(np.median(before)), float(np.median(after))
            extra: dict[str, float] = {}
            if np.all(before > 0) and np.all(after > 0):
                size = step(before, after, SHIFT_CONFIDENCE)
                shift, lo, hi = size.shift, size.low, size.high
                if size.coverage < SHIFT_CONFIDENCE:
                    extra["shift_coverage"] = size.coverage
            else:  # no ratio of logs: the medians' ratio, bootstrapped
                shift, lo, hi = _shift(before, after, seed + cut)
        else:
            assert measured is not None and share is not None, "a share change point is sized on measured values"
            before, after = measured[lo_end:cut], measured[cut:hi_end]
            mid_before, mid_after = float(np.mean(before)), float(np.mean(after))
            shift, lo, hi = _shift(before, after, seed + cut, np.mean)
            extra = {
                "share_before": float(np.mean(share[lo_end:cut])),
                "share_after": float(np.mean(share[cut:hi_end])),
            }
        points.append(
            ChangePoint(
                cut,
                None if run_ids is None else run_ids[cut],
                mid_before,
                mid_after,
                shift,
                lo,
                hi,
                found[cut],
                direction_of(shift, higher_is_better),
                kind,
                **extra,
            )
        )
    return points


def _trimmed_log_mean(x: np.ndarray) -> float:
    """Mean of log x without its lowest and highest TRIM fraction (robust, nearly as efficient)."""
    y = np.sort(np.log(x))
    cut = int(TRIM * len(y))
    return float(y[cut : len(y) - cut].mean())


def _local_shift(x: np.ndarray, cut: int, lo_end: int, hi_end: int, runs: int = LOCAL_RUNS) -> float:
    """The step at ``cut`` over up to ``runs`` runs either side, within the neighbouring cuts
    (trimmed means of the log levels)."""
    before, after = x[max(lo_end, cut - runs) : cut], x[cut : min(hi_end, cut + runs)]
    return math.expm1(_trimmed_log_mean(after) - _trimmed_log_mean(before))


def _abrupt(x: np.ndarray, found: dict[int, float], min_shift: float) -> dict[int, float]:
    """The cuts of ``found`` whose local shift is at least ``min_shift`` (slow drift is not a step)."""
    if min_shift <= 0:
        return found
    bounds = [0, *found, len(x)]
    return {
        c: p for k, (c, p) in enumerate(found.items()) if abs(_local_shift(x, c, bounds[k], bounds[k + 2])) >= min_shift
    }


def _has_invocations(values: Sequence[Any]) -> bool:
    return any(np.ndim(v) > 0 for v in values)


def detect_change_points(
    values: Sequence[Any],
    run_ids: Sequence[Any] | None = None,
    *,
    higher_is_better: bool,
    alpha: float = DEFAULT_ALPHA,
    permutations: int = DEFAULT_PERMUTATIONS,
    min_size: int = DEFAULT_MIN_SIZE,
    seed: int = DEFAULT_SEED,
    min_shift: float | None = None,
) -> list[ChangePoint]:
    """Significant change points of a series (oldest first), by index.

    ``values``: one estimate per run, or one sequence of invocation estimates per run (then the
    levels are mode-aware and the lower mode's share is judged too; see the module doc).
    ``run_ids`` (one per run) label the change points; ``higher_is_better`` is the metric's
    direction (throughputs True, times False). A level change point is kept only when the median
    of the LOCAL_RUNS runs after it differs from that of the LOCAL_RUNS before by at least
    ``min_shift`` (a fraction; default: 0 for per-run estimates, as before, DEFAULT_MIN_SHIFT for
    invocation input, whose precision otherwise turns slow drift into change points).
    Deterministic for a given ``seed``."""
    _check_options(alpha, permutations, min_size)
    if run_ids is not None and len(run_ids) != len(values):
        raise UsageError(f"change points: {len(run_ids)} run ids for {len(values)} runs", "pass one run id per run")
    if not _has_invocations(values):
        x = as_series(values)
        if min_shift and np.any(x <= 0):
            raise UsageError("change points: min_shift needs positive values (a relative shift)", "pass min_shift=0")
        found = _abrupt(x, _cuts(x, alpha, permutations, min_size, seed), min_shift or 0.0)
        return _points(x, found, run_ids, higher_is_better, seed)
    levels = mode_aware_levels(values)
    floor = DEFAULT_MIN_SHIFT if min_shift is None else min_shift
    found = _abrupt(levels.level, _cuts(levels.level, alpha, permutations, min_size, seed), floor)
    points = _points(levels.level, found, run_ids, higher_is_better, seed)
    if levels.bimodal and levels.lower_share is not None:
        share_seed = seed + SHARE_SEED_OFFSET
        found = _cuts(levels.lower_share, alpha, permutations, min_size, share_seed)
        points += _points(
            levels.lower_share, found, run_ids, higher_is_better, share_seed, MODE_SHARE, levels.raw, levels.lower_share
        )
    return sorted(points, key=lambda p: (p.index, p.kind))


# -- the regression gate ---------------------------------------------------------------------------
#: With fewer runs than this the gate compares the candidate's interval with the baseline instead.
MIN_HISTORY = 8
#: Significance level of the gate's tests. The gate searches a sliding window of the newest runs
#: every night, so one false change point can fail it on several nights: at DEFAULT_ALPHA it failed
#: 4.4 (seed 4) and 2.5 (seed 3) of 1,000 shift-free series-nights under the H200 testbed noise
#: with 10 invocations, at 0.005 1.1 and 1.0, finding 5 % steps within 10 nights as often (0.67,
#: 0.70) about a night later (benchmarks/bench_gate.py; docs/benchmarks.md).
GATE_ALPHA = 0.005


class GateStatus(StrEnum):
    """What the gate decided about a series' newest run (``Verdict.status``)."""

    REGRESSION = "regression"
    IMPROVEMENT = "improvement"
    UNCHANGED = "unchanged"
    INSUFFICIENT = "insufficient"


UNCHANGED, INSUFFICIENT = GateStatus.UNCHANGED, GateStatus.INSUFFICIENT
BY_CHANGE_POINT, BY_INTERVAL, BY_BAND = "change point", "interval", "band"


@dataclass(frozen=True)
class Verdict:
    """What the gate decided about the newest run, how (``method``) and why (``reason``)."""

    status: GateStatus
    method: str | None
    reason: str
    change_point: ChangePoint | None = None

    @property
    def is_regression(self) -> bool:
        return self.status == GateStatus.REGRESSION

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _judge_by_interval(
    x: np.ndarray, interval: tuple[float, float] | None, higher_is_better: bool, threshold: float
) -> Verdict:
    """Short history: the candidate's interval against the median of the earlier runs +- threshold."""
    if len(x) < 2:
        return Verdict(INSUFFICIENT, None, "no earlier run to compare the newest with")
    if interval is None:
        return Verdict(INSUFFICIENT, None, f"{len(x)} runs (< {MIN_HISTORY}) and no interval for the newest run")
    low, high = (float(v) for v in interval)
    if not (math.isfinite(low) and math.isfinite(high) and low <= high):
        raise UsageError(f"gate: candidate interval {interval!r} is not a finite (low, high) with low <= high")
    base = float(np.median(x[:-1]))
    floor, ceiling = base * (1.0 - threshold), base * (1.0 + threshold)
    worse_beyond = high < floor if higher_is_better else low > ceiling
    better_beyond = low > ceiling if higher_is_better else high < floor
    where = f"interval [{human(low)}, {human(high)}] vs baseline {human(base)} (median of {len(x) - 1} runs) ±{threshold:.1%}"
    if worse_beyond:
        return Verdict(GateStatus.REGRESSION, BY_INTERVAL, f"{where}: wholly on the worse side")
    if better_beyond:
        return Verdict(GateStatus.IMPROVEMENT, BY_INTERVAL, f"{where}: wholly on the better side")
    return Verdict(UNCHANGED, BY_INTERVAL, f"{where}: not wholly beyond the threshold")


def shift_text(cp: Mapping[str, Any]) -> str:
    """A change point's shift and its interval, e.g. "-10.2% [-11.0%, -9.4%]", saying when the
    interval covers less than SHIFT_CONFIDENCE (too few runs either side)."""
    text = f"{cp['shift']:+.1%} [{cp['shift_low']:+.1%}, {cp['shift_high']:+.1%}]"
    coverage = cp.get("shift_coverage")
    if coverage is not None:
        text += f" (a {coverage:.0%} interval: too few runs either side for {SHIFT_CONFIDENCE:.0%})"
    return text


def _said(p: ChangePoint) -> str:
    what = (
        "change point"
        if p.kind == LEVEL
        else f"mode share change point ({p.share_before:.0%} -> {p.share_after:.0%} in the lower mode)"
    )
    return f"{what} at index {p.index} (run {p.run_id}): {shift_text(p.to_dict())}, p = {p.p_value:.3g}"


def judge_newest(
    values: Sequence[Any],
    run_ids: Sequence[Any] | None = None,
    *,
    higher_is_better: bool,
    threshold: float = 0.05,
    candidate_interval: tuple[float, float] | None = None,
    recent: int | None = None,
    alpha: float = GATE_ALPHA,
    permutations: int = DEFAULT_PERMUTATIONS,
    min_size: int = DEFAULT_MIN_SIZE,
    seed: int = DEFAULT_SEED,
) -> Verdict:
    """Gate verdict on the newest run of a series (oldest first).

    ``values`` as for ``detect_change_points`` (per-run estimates, or per-run invocation estimates).
    With at least MIN_HISTORY runs: a regression when a change point significant at ``alpha``
    (GATE_ALPHA: stricter than the dashboard's search, see there; of the level or of the mode
    share) starts within the newest ``recent`` runs (default 2 x min_size) — so the
    newest run belongs to the new segment — and its shift is worse than ``threshold`` (a
    fraction); the worst such one is reported. A step of 10 % or more is usually seen on its third
    or fourth night, at its own run (``_located``; benchmarks/bench_gate.py). With fewer runs:
    ``candidate_interval`` (the newest run's interval) against the median of the earlier runs'
    estimates (their invocations' median when invocations are given).

    First night (stats/series/history_band.py): with at least MIN_HISTORY runs of invocations and no
    regression by change point, a regression (or an improvement, when nothing else changed) when
    every invocation of the newest run lies beyond the band of the earlier runs' invocations by
    more than ``threshold``: change points need runs after a step, this rule does not."""
    if threshold < 0:
        raise UsageError(f"gate: threshold must be >= 0 (a fraction), got {threshold}")
    recent = 2 * min_size if recent is None else recent
    if recent < min_size:
        raise UsageError(
            f"gate: recent ({recent}) must be >= min_size ({min_size}): the test splits min_size runs from the end"
        )
    if len(values) < MIN_HISTORY:
        per_run = [float(np.median(v)) for v in as_runs(values)] if _has_invocations(values) else values
        return _judge_by_interval(as_series(per_run), candidate_interval, higher_is_better, threshold)
    verdict = _judge_by_change_points(
        values,
        run_ids,
        higher_is_better,
        threshold,
        recent,
        alpha=alpha,
        permutations=permutations,
        min_size=min_size,
        seed=seed,
    )
    if verdict.is_regression:
        return verdict
    band = _judge_by_band(values, higher_is_better, threshold)
    return band if band is not None and (band.is_regression or verdict.status == UNCHANGED) else verdict


def _judge_by_band(values: Sequence[Any], higher_is_better: bool, threshold: float) -> Verdict | None:
    """The first-night rule (stats/series/history_band.py) on runs of invocation estimates; None when it
    does not decide (no invocations, or the newest run not wholly beyond the band)."""
    if not _has_invocations(values):
        return None
    runs = as_runs(values)
    band = beyond_band(runs[:-1], runs[-1], higher_is_better=higher_is_better, threshold=threshold)
    if band is None:
        return None
    return Verdict(GateStatus.REGRESSION if band.worse else GateStatus.IMPROVEMENT, BY_BAND, band.reason(threshold))


def _judge_by_change_points(
    values: Sequence[Any],
    run_ids: Sequence[Any] | None,
    higher_is_better: bool,
    threshold: float,
    recent: int,
    *,
    alpha: float,
    permutations: int,
    min_size: int,
    seed: int,
) -> Verdict:
    """The change-point rule of ``judge_newest`` (see there)."""
    points = detect_change_points(
        values,
        run_ids,
        higher_is_better=higher_is_better,
        alpha=alpha,
        permutations=permutations,
        min_size=min_size,
        seed=seed,
    )
    n = len(values)
    fresh = [p for p in points if n - p.index <= recent]
    if not fresh:
        last = points[-1] if points else None
        where = "none" if last is None else f"the last at index {last.index}, {n - last.index} runs ago"
        return Verdict(
            UNCHANGED, BY_CHANGE_POINT, f"no significant change point within the newest {recent} runs ({where})"
        )
    beyond = [p for p in fresh if abs(p.shift) > threshold and p.direction != NO_MEDIAN_SHIFT]
    if not beyond:
        last = fresh[-1]
        return Verdict(UNCHANGED, BY_CHANGE_POINT, f"{_said(last)}: within the {threshold:.1%} threshold", last)
    regressions = [p for p in beyond if p.direction == REGRESSION]
    worst = max(regressions or beyond, key=lambda p: abs(p.shift))
    return Verdict(
        GateStatus(worst.direction),
        BY_CHANGE_POINT,
        f"{_said(worst)}: {'an' if worst.direction == IMPROVEMENT else 'a'} {worst.direction} beyond {threshold:.1%}",
        worst,
    )
