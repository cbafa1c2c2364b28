"""Routes measured in the same rounds, compared with one variance pooled over all of them.

A table of routes x rounds (one value per route per round, every cell present) is modelled on the
log scale as route effect + round effect + noise, the noise of one spread for every route (a two-way
layout without interaction). The residual variance then has (routes - 1)(rounds - 1) degrees of
freedom: with 12 routes, two rounds already give 11, where one route's own pairs give 1. A
difference of two routes' mean logs has standard error sqrt(2 s² / rounds) and a Student t
interval on those degrees of freedom. The price is the assumption of one spread: a route much
noisier than the others gets too narrow an interval.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class PooledLogMeans:
    """Each route's mean log value over the rounds, the standard error of a difference of two of
    them and the residual degrees of freedom it rests on."""

    means: np.ndarray
    se_difference: float
    df: int

    def difference_interval(self, i: int, j: int, confidence: float) -> tuple[float, float, float]:
        """exp(mean_i - mean_j): route i over route j as a ratio, with its two-sided interval."""
        from scipy.special import stdtrit  # Student's t quantile; loaded on first use

        d = float(self.means[i] - self.means[j])
        half = float(stdtrit(self.df, 0.5 + confidence / 2.0)) * self.se_difference
        return math.exp(d), math.exp(d - half), math.exp(d + half)


def pooled_log_means(table: np.ndarray | Sequence[Sequence[float]]) -> PooledLogMeans:
    """``table[route][round]``: positive values, at least 2 routes and 2 rounds, every cell finite."""
    values = np.asarray(table, dtype=float)
    if values.ndim != 2 or values.shape[0] < 2 or values.shape[1] < 2:
        raise ValueError(f"a pooled comparison needs >= 2 routes x >= 2 rounds, got shape {values.shape}")
    if not (np.isfinite(values).all() and (values > 0).all()):
        raise ValueError("a pooled comparison needs positive finite values in every cell")
    logs = np.log(values)
    routes, rounds = logs.shape
    residuals = logs - logs.mean(axis=1, keepdims=True) - logs.mean(axis=0, keepdims=True) + logs.mean()
    df = (routes - 1) * (rounds - 1)
    variance = float((residuals**2).sum()) / df
    return PooledLogMeans(logs.mean(axis=1), math.sqrt(2.0 * variance / rounds), df)
