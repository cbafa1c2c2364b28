"""Candidate (a) of benchmarks/bench_changepoint.py: E-Divisive means over every invocation of a
series (K per run), splits only between runs, significance by permuting whole runs (runs, not
invocations, are exchangeable: drift and per-night effects are shared by a run's invocations).

The energy statistic of the pooled invocations needs only run-level sums: with D[i, j] the mean
|x_ik - x_jl| over the K x K pairs of runs i != j and D[i, i] the mean over a run's own K (K - 1)
ordered pairs, the within-left sum of a split is K^2 sum_{i<j<tau} D[i, j] + K(K-1)/2 sum D[i, i],
and so on; a permutation of the runs permutes D. O(n^2) per permutation, as the 1-D detector.
"""

from __future__ import annotations

import math

import numpy as np

from winml_perf.stats.series.changepoint import DEFAULT_ALPHA, DEFAULT_MIN_SIZE, DEFAULT_PERMUTATIONS, DEFAULT_SEED

_BATCH_ELEMENTS = 4_000_000


def run_distances(x: np.ndarray) -> np.ndarray:
    """D (n, n) of invocation values x (n, K) as in the module doc."""
    n, k = x.shape
    d = np.zeros((n, n))
    for a in range(k):
        for b in range(k):
            d += np.abs(x[:, a][:, None] - x[:, b][None, :])
    d /= k * k
    own = d.diagonal() * k * k / (k * (k - 1)) if k > 1 else np.zeros(n)
    np.fill_diagonal(d, own)
    return d


def _q(d: np.ndarray, perm: np.ndarray, k: int, min_size: int) -> np.ndarray:
    """Q(tau) (batch, taus) for orderings ``perm`` (batch, n) of the runs."""
    n = perm.shape[1]
    p = d[perm[:, :, None], perm[:, None, :]]
    own = np.take_along_axis(p.reshape(len(perm), -1), (np.arange(n) * (n + 1))[None, :], axis=1)
    r = np.tril(p, -1).sum(axis=2)
    later = p.sum(axis=2) - own - r
    w_own = k * (k - 1) / 2.0 * own
    total = (k * k * r + w_own).sum(axis=1, keepdims=True)
    left = np.cumsum(k * k * r + w_own, axis=1)[:, min_size - 1 : n - min_size]
    right = np.cumsum((k * k * later + w_own)[:, ::-1], axis=1)[:, ::-1][:, min_size : n - min_size + 1]
    cross = total - left - right
    tau = np.arange(min_size, n - min_size + 1, dtype=float) * k
    m = n * k - tau
    energy = 2.0 * cross / (tau * m) - 2.0 * left / (tau * (tau - 1)) - 2.0 * right / (m * (m - 1))
    return tau * m / (n * k) * energy


def detect_pooled(
    x: np.ndarray,
    *,
    alpha: float = DEFAULT_ALPHA,
    permutations: int = DEFAULT_PERMUTATIONS,
    min_size: int = DEFAULT_MIN_SIZE,
    seed: int = DEFAULT_SEED,
) -> list[int]:
    """Change points (first run of each new segment) of invocation values x (n, K)."""
    k = x.shape[1]
    cuts = []
    pending = [(0, len(x))]
    allowed = math.floor(alpha * (permutations + 1)) - 1
    while pending:
        start, end = pending.pop()
        n = end - start
        if n < 2 * min_size:
            continue
        d = run_distances(np.log(x[start:end]))
        q = _q(d, np.arange(n)[None, :], k, min_size)[0]
        best, observed = int(np.argmax(q)), float(q.max())
        rng = np.random.default_rng(seed + 7919 * start + end)
        batch = max(1, _BATCH_ELEMENTS // (n * n))
        done = exceed = 0
        while done < permutations and exceed <= allowed:
            b = min(batch, permutations - done)
            perm = np.argsort(rng.random((b, n)), axis=1)
            exceed += int((_q(d, perm, k, min_size).max(axis=1) >= observed * (1 - 1e-12)).sum())
            done += b
        if (1 + exceed) / (1 + done) <= alpha:
            cut = start + best + min_size
            cuts.append(cut)
            pending += [(start, cut), (cut, end)]
    return sorted(cuts)
