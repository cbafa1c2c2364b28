"""Modes in step latencies: is the distribution one hump or two, and where are they?

Method: a two-component Gaussian mixture fitted by EM (Dempster, Laird & Rubin, JRSS B 39, 1977)
to log latencies, against one Gaussian, compared by BIC (Schwarz, Ann. Stat. 6, 1978). Log scale:
latencies are positive and right-skewed, and a log-normal is one Gaussian there, so a lognormal
spread is not mistaken for two modes. Chosen over Hartigan's dip test (Ann. Stat. 13, 1985) because
it also says where the modes are and how much of the mass each holds, which is what the warning
prints, and needs no table of critical values.

BIC alone flags any departure from a Gaussian once n is large, so two modes are reported only when
the components are also:
- separated: Ashman's D = sqrt(2) |mu1 - mu2| / sqrt(s1^2 + s2^2) >= 2 (Ashman, Bird & Zepf,
  AJ 108, 1994: the criterion for a clean split), and centres at least ``MIN_CENTRE_RATIO`` apart;
- substantial: each holds at least ``MIN_SHARE`` of the steps.
Cost: EM is O(n) per iteration with a bounded iteration count, and above ``SUBSAMPLE_CAP`` values a
seeded random subsample of that size is fitted.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from winml_perf.stats.arrays import Values, finite

MIN_SHARE = 0.10
MIN_SEPARATION = 2.0
MIN_CENTRE_RATIO = 1.10
SUBSAMPLE_CAP = 20_000
SUBSAMPLE_SEED = 1977
EM_MAX_ITERATIONS = 100
EM_TOLERANCE = 1e-8
#: Smallest standard deviation of a component in log units (0.1 %): quantised timers would
#: otherwise let one component collapse onto a repeated value.
MIN_LOG_SD = 1e-3
#: Fewer values than this never count as two modes.
MIN_VALUES = 20


@dataclass(frozen=True)
class Mode:
    centre: float  # geometric centre of the component (its median on the original scale)
    share: float


@dataclass(frozen=True)
class ModeReport:
    """Whether the values are bimodal, and the mode(s) with their centres and shares."""

    bimodal: bool
    modes: tuple[Mode, ...]
    n: int
    separation: float  # Ashman's D of the two-component fit (nan when not fitted)
    bic_one: float
    bic_two: float
    method: str = "gaussian_mixture_log_bic"

    def describe(self, unit: str = "ms", digits: int = 1) -> str:
        if not self.bimodal:
            return "unimodal"
        parts = " / ".join(f"{m.centre:.{digits}f} {unit} ({m.share:.0%})" for m in self.modes)
        return f"bimodal: {parts}"


def _log_likelihood(y: np.ndarray, w: np.ndarray, mu: np.ndarray, sd: np.ndarray) -> tuple[float, np.ndarray]:
    """Total log-likelihood and the responsibility of component 1 for each value."""
    a, b = (np.log(w[j] / sd[j]) - 0.5 * ((y - mu[j]) / sd[j]) ** 2 for j in (0, 1))
    top = np.maximum(a, b)
    log_sum = top + np.log1p(np.exp(-np.abs(a - b)))  # log(e^a + e^b), stable
    return float(log_sum.sum() - 0.5 * y.size * math.log(2 * math.pi)), np.exp(b - log_sum)


def _best_split(sorted_y: np.ndarray) -> int:
    """Index i splitting sorted values into [:i] and [i:] with the least within-group sum of squares."""
    n = sorted_y.size
    c1, c2 = np.cumsum(sorted_y), np.cumsum(sorted_y * sorted_y)
    i = np.arange(1, n)
    left = c2[i - 1] - c1[i - 1] ** 2 / i
    right = (c2[-1] - c2[i - 1]) - (c1[-1] - c1[i - 1]) ** 2 / (n - i)
    return int(i[np.argmin(left + right)])


def _fit_two(y: np.ndarray) -> tuple[float, np.ndarray, np.ndarray, np.ndarray]:
    """EM from the best two-group split; returns (log-likelihood, weights, means, sds)."""
    ys = np.sort(y)
    cut = _best_split(ys)
    groups = (ys[:cut], ys[cut:])
    w = np.array([g.size / ys.size for g in groups])
    mu = np.array([g.mean() for g in groups])
    sd = np.maximum(np.array([g.std() for g in groups]), MIN_LOG_SD)
    previous = -math.inf
    for _ in range(EM_MAX_ITERATIONS):
        ll, r2 = _log_likelihood(y, w, mu, sd)
        if ll - previous < EM_TOLERANCE * abs(ll):
            break
        previous = ll
        resp = (1.0 - r2, r2)
        mass = np.maximum(np.array([r.sum() for r in resp]), 1e-12)
        w = mass / y.size
        mu = np.array([(r * y).sum() for r in resp]) / mass
        spread = np.array([(r * (y - m) ** 2).sum() for r, m in zip(resp, mu)])
        sd = np.maximum(np.sqrt(spread / mass), MIN_LOG_SD)
    ll, _ = _log_likelihood(y, w, mu, sd)
    return ll, w, mu, sd


def detect_modes(
    values: Values,
    min_share: float = MIN_SHARE,
    min_separation: float = MIN_SEPARATION,
    cap: int = SUBSAMPLE_CAP,
    seed: int = SUBSAMPLE_SEED,
) -> ModeReport:
    """Fit one and two log-normal components; report two modes only when they are real (see module doc)."""
    xs = finite(values)
    if np.any(xs <= 0):
        raise ValueError("mode detection needs positive values (latencies)")
    n = int(xs.size)
    if n < MIN_VALUES:
        centre = float(np.median(xs)) if n else math.nan
        return ModeReport(False, (Mode(centre, 1.0),) if n else (), n, math.nan, math.nan, math.nan)
    if n > cap:
        xs = np.random.default_rng(seed).choice(xs, size=cap, replace=False)
    y = np.log(xs)
    sd1 = max(float(y.std()), MIN_LOG_SD)
    ll_one = float(np.sum(-np.log(sd1) - 0.5 * ((y - y.mean()) / sd1) ** 2 - 0.5 * math.log(2 * math.pi)))
    ll_two, w, mu, sd = _fit_two(y)
    log_n = math.log(y.size)
    bic_one, bic_two = -2 * ll_one + 2 * log_n, -2 * ll_two + 5 * log_n
    separation = float(math.sqrt(2) * abs(mu[0] - mu[1]) / math.sqrt(sd[0] ** 2 + sd[1] ** 2))
    bimodal = (
        bic_two < bic_one
        and float(w.min()) >= min_share
        and separation >= min_separation
        and abs(mu[0] - mu[1]) >= math.log(MIN_CENTRE_RATIO)
    )
    if bimodal:
        order = np.argsort(mu)
        modes = tuple(Mode(float(np.exp(mu[i])), float(w[i])) for i in order)
    else:
        modes = (Mode(float(np.median(xs)), 1.0),)
    return ModeReport(bimodal, modes, n, separation, bic_one, bic_two)
