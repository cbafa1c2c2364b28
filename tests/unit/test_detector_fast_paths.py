"""The detector's and the overview ratio's faster forms give the very numbers of the forms they
replaced (kept here as references): the permutations' prefix distances, the comb's costs, the
rolling median's cut windows and the bootstrap's row medians, compared bit for bit on random
inputs with ties, NaN padding, short and ragged series."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from winml_perf.stats import significance as sig
from winml_perf.stats.series import changepoint as cp
from winml_perf.stats.series import run_levels as rl


def _prefix_loop(y: np.ndarray) -> np.ndarray:
    """The former prefix loop of ``_earlier_distances``: one prefix at a time."""
    k, n = y.shape
    columns = np.ascontiguousarray(y.T)
    r = np.empty((n, k))
    r[0] = 0.0
    work = np.empty((n, k))
    for t in range(1, n):
        diff = np.subtract(columns[:t], columns[t], out=work[:t])
        np.abs(diff, out=diff)
        diff.sum(axis=0, out=r[t])
    return r.T


@pytest.mark.parametrize("n", [*range(2, 20), 37, 64, 100, 119, 120, 121])
def test_blocked_prefix_distances_equal_the_prefix_loop(n):
    rng = np.random.default_rng(n)
    for k, rounded in ((cp._LOOP_ROWS, False), (87, True), (199, False), (277, True)):
        x = rng.normal(100, 3, n)
        x = np.round(x, 0) if rounded else x  # ties
        batch = x[np.argsort(rng.random((k, n)), axis=1)]
        np.testing.assert_array_equal(cp._earlier_distances(batch), _prefix_loop(batch))


def _comb_anchors_before(runs: np.ndarray, offset: float, half: int) -> np.ndarray:
    """The former ``_comb_anchors``'s costs (a fresh array a batch, NaN set to 0 after), then the
    same windows as now: the anchors must not move by a bit."""
    n, width = runs.shape
    reach = 2 * half
    near_runs = np.arange(n)[:, None] + np.arange(-reach, reach + 1)[None, :]
    values = np.where(((near_runs >= 0) & (near_runs < n))[..., None], runs[np.clip(near_runs, 0, n - 1)], np.nan)
    candidates = np.concatenate([runs, runs - offset], axis=1)
    per_run = np.empty((n, 2 * width, 2 * reach + 1))
    rows = max(1, rl._COMB_ELEMENTS // values[0].size // (2 * width))
    for start in range(0, n, rows):
        d = values[start : start + rows, None, :, :] - candidates[start : start + rows, :, None, None]
        lower = d - offset
        np.multiply(d, d, out=d)
        np.multiply(lower, lower, out=lower)
        np.minimum(d, lower, out=d)
        np.minimum(d, rl.CLIP * rl.CLIP, out=d)
        d[np.isnan(d)] = 0.0
        d.sum(axis=3, out=per_run[start : start + rows])
    saved = rl._run_costs
    try:
        rl._run_costs = lambda *_: per_run
        out: np.ndarray = rl._comb_anchors(runs, offset, half)
    finally:
        rl._run_costs = saved
    return out


def _ragged_runs(rng: np.random.Generator, n: int, k: int, ties: bool) -> np.ndarray:
    """NaN-padded log values of n runs of up to k invocations, 30 % of them in a mode 0.65 lower."""
    runs = []
    for _ in range(n):
        x = 100 * np.where(rng.random(k) < 0.3, 0.65, 1.0) * rng.lognormal(0, 0.05, k)
        x = np.round(x, 0) if ties else x
        runs.append(np.log(x[: max(1, k - int(rng.integers(0, k)))] if rng.random() < 0.3 else x))
    return rl._padded(runs)


@pytest.mark.parametrize("seed", range(12))
def test_comb_costs_in_buffers_give_the_same_anchors(seed):
    rng = np.random.default_rng(seed)
    n, k = int(rng.integers(1, 140)), int(rng.integers(1, 13))
    runs = _ragged_runs(rng, n, k, ties=seed % 2 == 0)
    for half in (0, 1, rl.WINDOW):
        for offset in (np.log(0.65), np.log(0.9)):
            np.testing.assert_array_equal(
                rl._comb_anchors(runs, offset, half), _comb_anchors_before(runs, offset, half)
            )


def _rolling_median_before(x: np.ndarray, half: int) -> np.ndarray:
    """The former ``_rolling_median``: cut windows NaN-padded, by nanmedian."""
    padded = np.concatenate([np.full(half, np.nan), x, np.full(half, np.nan)])
    windows = np.lib.stride_tricks.sliding_window_view(padded, 2 * half + 1)
    out = np.empty(len(x))
    whole = np.arange(half, len(x) - half)
    cut = np.setdiff1d(np.arange(len(x)), whole)
    out[whole] = np.median(windows[whole], axis=1)
    if len(cut):
        out[cut] = np.nanmedian(windows[cut], axis=1)
    return out


@pytest.mark.parametrize("n", [*range(1, 25), 120, 401])
def test_rolling_median_equals_the_nan_padded_form(n):
    rng = np.random.default_rng(1000 + n)
    for half in (0, 1, 2, rl.WINDOW, 7):
        for x in (rng.normal(0, 1, n), np.round(rng.normal(0, 1, n), 1)):
            np.testing.assert_array_equal(rl._rolling_median(x, half), _rolling_median_before(x, half))


@pytest.mark.parametrize("seed", range(8))
def test_bootstrap_row_medians_equal_nanmedian(seed):
    rng = np.random.default_rng(seed)
    for width in (1, 2, 3, 10, 31, 650):  # 650: nanmedian's other way (600 and more per row)
        a = rng.lognormal(3, 0.5, (int(rng.integers(1, 80)), width))
        a = np.round(a, 0) if seed % 2 else a  # ties
        a[rng.random(a.shape) < rng.uniform(0, 0.9)] = np.nan
        a[0] = np.nan  # a row without a number: NaN, as nanmedian gives
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # nanmedian's all-NaN slice
            expected = np.nanmedian(a, axis=1)
        np.testing.assert_array_equal(sig._nan_medians(a), expected)
