"""Tests for comparing samples: pure functions, named constants, cited methods.

- Mann-Whitney U (Mann & Whitney 1947; Wilcoxon rank-sum), two-sided, normal approximation with
  the tie correction of the variance and a continuity correction of 0.5 (Conover, "Practical
  Nonparametric Statistics", 3rd ed., 1999, §5.1; the same as scipy.stats.mannwhitneyu with
  method='asymptotic', use_continuity=True). Distribution-free: benchmark times are skewed.
- Ratio of medians with a percentile bootstrap confidence interval over *paired rounds*
  (Efron & Tibshirani, "An Introduction to the Bootstrap", 1993, ch. 13), resampled in two
  stages — rounds with replacement, then iterations within each chosen round — the hierarchical
  bootstrap of Davison & Hinkley, "Bootstrap Methods and their Application", 1997, §3.8. Both
  routes of a resampled round are taken together, so drift of the machine that hit both routes
  in that round cancels in the ratio. Seeded: the same data give the same interval.
- Verdicts against an equivalence band (the "two one-sided tests" reading of a CI: Schuirmann
  1987): a CI wholly inside the band is *equivalent*; wholly above 1 *faster*; wholly below 1
  *slower*; otherwise *inconclusive* (more iterations or rounds would decide).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any

import numpy as np

from winml_perf.model.metrics import bigger_is_better as metric_bigger_is_better
from winml_perf.stats.arrays import Values

#: Two-sided significance level of the Mann-Whitney test (and 1 - the bootstrap CI's level).
ALPHA = 0.05
CONFIDENCE_LEVEL = 1.0 - ALPHA
#: Bootstrap resamples; 2000 keeps percentile-interval endpoints stable to ~1 % of their width.
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 20240601
#: Default equivalence band (fraction): ratios within 1/(1+e) .. 1+e count as the same speed.
EQUIVALENCE = 0.02
CONTINUITY_CORRECTION = 0.5
#: A bootstrap CI needs enough resampling units to mean anything: at least this many paired rounds,
#: or (for few rounds of several iterations each) this many iterations per side — the fewest for
#: which the distribution-free 95 % CI of a median exists (stats/sample_stats.py).
MIN_PAIRED_ROUNDS = 5
MIN_SAMPLES_PER_SIDE = 6


class SpeedVerdict(StrEnum):
    """What a comparison found of a route's or a run's speed: equal to its text, which reports and
    their JSON hold."""

    FASTER = "faster"
    SLOWER = "slower"
    EQUIVALENT = "equivalent"  # within the equivalence band
    INCONCLUSIVE = "inconclusive"  # an interval that straddles the band (or none)
    UNCHANGED = "unchanged"  # a run-to-run test that does not reject


FASTER, SLOWER, EQUIVALENT, INCONCLUSIVE, UNCHANGED = SpeedVerdict


def _finite(values: Values) -> np.ndarray:
    a = np.asarray([v for v in values if v is not None], dtype=float)
    kept: np.ndarray = a[np.isfinite(a)]
    return kept


def normal_sf(z: float) -> float:
    """P(Z > z) for a standard normal Z."""
    return 0.5 * math.erfc(z / math.sqrt(2.0))


def rank_with_ties(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mid-ranks (1-based, ties share their mean rank) and the sizes of the tie groups."""
    order = np.argsort(values, kind="mergesort")
    sorted_vals = values[order]
    ranks = np.empty(len(values), dtype=float)
    ties = []
    i = 0
    while i < len(values):
        j = i
        while j + 1 < len(values) and sorted_vals[j + 1] == sorted_vals[i]:
            j += 1
        ranks[order[i : j + 1]] = (i + j) / 2.0 + 1.0
        ties.append(j - i + 1)
        i = j + 1
    return ranks, np.asarray(ties, dtype=float)


@dataclass(frozen=True)
class MannWhitney:
    """U of the first sample (number of pairs x > y, ties count 1/2), the z score and the
    two-sided p-value. p is 1.0 when the test cannot say anything (an empty sample, or every
    value equal)."""

    u: float
    z: float
    p_value: float
    n_x: int
    n_y: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def mann_whitney_u(x: Values, y: Values) -> MannWhitney:
    """Two-sided Mann-Whitney U test, normal approximation with tie and continuity corrections."""
    a, b = _finite(x), _finite(y)
    n1, n2 = len(a), len(b)
    if n1 == 0 or n2 == 0:
        return MannWhitney(math.nan, math.nan, 1.0, n1, n2)
    ranks, ties = rank_with_ties(np.concatenate([a, b]))
    u1 = float(ranks[:n1].sum() - n1 * (n1 + 1) / 2.0)
    n = n1 + n2
    mu = n1 * n2 / 2.0
    tie_term = float(((ties**3) - ties).sum()) / (n * (n - 1)) if n > 1 else 0.0
    var = n1 * n2 / 12.0 * ((n + 1) - tie_term)
    if var <= 0:
        return MannWhitney(u1, 0.0, 1.0, n1, n2)
    z = (abs(u1 - mu) - CONTINUITY_CORRECTION) / math.sqrt(var)
    z = max(z, 0.0)
    p = min(1.0, 2.0 * normal_sf(z))
    return MannWhitney(u1, math.copysign(z, u1 - mu), p, n1, n2)


# -- paired-round bootstrap of a ratio of medians --------------------------------------------------
def _round_matrix(rounds: Sequence[Values]) -> tuple[np.ndarray, np.ndarray]:
    """Per-round samples padded with NaN into (R, m) and the count per round."""
    counts = np.asarray([len(r) for r in rounds], dtype=int)
    m = int(counts.max()) if len(counts) else 0
    mat = np.full((len(rounds), max(m, 1)), np.nan)
    for i, r in enumerate(rounds):
        mat[i, : len(r)] = r
    return mat, counts


def _resample_within(mat: np.ndarray, counts: np.ndarray, chosen: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """For chosen rounds (B, R): draw counts[round] iterations with replacement from each; (B, R*m)."""
    b, r = chosen.shape
    m = mat.shape[1]
    cnt = counts[chosen]  # (B, R)
    pos = np.floor(rng.random((b, r, m)) * cnt[..., None]).astype(int)
    vals = mat[chosen[..., None], pos]
    vals[np.arange(m)[None, None, :] >= cnt[..., None]] = np.nan
    out: np.ndarray = vals.reshape(b, r * m)
    return out


def _nan_medians(a: np.ndarray) -> np.ndarray:
    """np.nanmedian(a, axis=1) of a 2-D array, the same numbers: each row's numbers sorted (NaN
    last) and the middle one taken, or the mean of the middle two for an even count (NaN: none)."""
    ordered = np.sort(a, axis=1)
    count = a.shape[1] - np.isnan(a).sum(axis=1)
    high = count // 2
    low = np.where(count % 2 == 1, high, high - 1)
    rows = np.arange(len(a))
    middle = (ordered[rows, np.maximum(low, 0)] + ordered[rows, high]) / 2.0
    return np.where(count > 0, middle, np.nan)


@dataclass(frozen=True)
class RatioCI:
    """Ratio of medians (candidate / baseline), its bootstrap CI and how many rounds and
    iterations it rests on."""

    ratio: float
    ci_low: float
    ci_high: float
    rounds: int
    n_baseline: int
    n_candidate: int
    resamples: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def paired_ratio_ci(
    baseline_rounds: Mapping[int, Sequence[float]],
    candidate_rounds: Mapping[int, Sequence[float]],
    *,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
    confidence: float = CONFIDENCE_LEVEL,
) -> RatioCI:
    """median(candidate) / median(baseline) over the rounds both have, with a two-stage
    percentile bootstrap CI (rounds, then iterations within a round). NaN when no round pairs."""
    common = sorted(
        k
        for k in set(baseline_rounds) & set(candidate_rounds)
        if len(_finite(baseline_rounds[k])) and len(_finite(candidate_rounds[k]))
    )
    base = [_finite(baseline_rounds[k]) for k in common]
    cand = [_finite(candidate_rounds[k]) for k in common]
    nb, nc = sum(map(len, base)), sum(map(len, cand))
    if not common:
        return RatioCI(math.nan, math.nan, math.nan, 0, nb, nc, 0)
    point = float(np.median(np.concatenate(cand)) / np.median(np.concatenate(base)))
    rng = np.random.default_rng(seed)
    bmat, bcnt = _round_matrix(base)
    cmat, ccnt = _round_matrix(cand)
    chosen = rng.integers(0, len(common), size=(resamples, len(common)))
    bmed = _nan_medians(_resample_within(bmat, bcnt, chosen, rng))
    cmed = _nan_medians(_resample_within(cmat, ccnt, chosen, rng))
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = cmed / bmed
    ratios = ratios[np.isfinite(ratios)]
    tail = (1.0 - confidence) / 2.0 * 100.0
    lo, hi = np.percentile(ratios, [tail, 100.0 - tail]) if len(ratios) else (math.nan, math.nan)
    return RatioCI(point, float(lo), float(hi), len(common), nb, nc, resamples)


def enough_for_ci(ci: RatioCI) -> bool:
    """Whether a ratio CI rests on enough data for a verdict (see MIN_PAIRED_ROUNDS)."""
    return ci.rounds >= MIN_PAIRED_ROUNDS or (
        ci.rounds >= 1 and min(ci.n_baseline, ci.n_candidate) >= MIN_SAMPLES_PER_SIDE
    )


# -- verdicts --------------------------------------------------------------------------------------
def speedup(ratio: float, bigger_is_better: bool) -> float:
    """How many times faster the candidate is: ratio for throughputs, 1/ratio for times."""
    if not math.isfinite(ratio) or ratio <= 0:
        return math.nan
    return ratio if bigger_is_better else 1.0 / ratio


def speedup_ci(ci: RatioCI, bigger_is_better: bool) -> tuple[float, float, float]:
    """(speedup, low, high) of a ratio CI, oriented so > 1 means faster."""
    s = speedup(ci.ratio, bigger_is_better)
    a, b = speedup(ci.ci_low, bigger_is_better), speedup(ci.ci_high, bigger_is_better)
    return s, min(a, b), max(a, b)


def ci_verdict(low: float, high: float, equivalence: float = EQUIVALENCE) -> SpeedVerdict:
    """Verdict of a speedup CI [low, high] (1 = same speed) against the band 1/(1+e) .. 1+e."""
    if not (math.isfinite(low) and math.isfinite(high)):
        return INCONCLUSIVE
    if low >= 1.0 / (1.0 + equivalence) and high <= 1.0 + equivalence:
        return EQUIVALENT
    if low > 1.0:
        return FASTER
    if high < 1.0:
        return SLOWER
    return INCONCLUSIVE


def delta_pct(baseline_median: float, candidate_median: float) -> float:
    if not baseline_median or not math.isfinite(baseline_median) or not math.isfinite(candidate_median):
        return math.nan
    return (candidate_median - baseline_median) / abs(baseline_median) * 100.0


def change_verdict(
    delta: float, p_value: float, bigger_is_better: bool, equivalence: float = EQUIVALENCE, alpha: float = ALPHA
) -> SpeedVerdict:
    """Verdict of a run-to-run change: 'unchanged' when the test does not reject (p >= alpha);
    'equivalent' when it does but |Δ| stays within the band; else 'faster' / 'slower'."""
    if not math.isfinite(delta) or not p_value < alpha:
        return UNCHANGED
    if abs(delta) <= equivalence * 100.0:
        return EQUIVALENT
    better = delta > 0 if bigger_is_better else delta < 0
    return FASTER if better else SLOWER


def is_regression(
    delta: float, p_value: float, bigger_is_better: bool, threshold_pct: float, alpha: float = ALPHA
) -> bool:
    """A significant (p < alpha) change in the bad direction by more than ``threshold_pct``."""
    if not math.isfinite(delta) or not p_value < alpha:
        return False
    worse = -delta if bigger_is_better else delta
    return worse > threshold_pct


# -- the former rolling baseline (superseded by stats/series/changepoint.py) ---------------------------
#: Previous ok records pooled into the rolling baseline of a point, and the change it flags.
ROLLING_WINDOW = 5
ROLLING_THRESHOLD_PCT = 5.0


def rolling_flags(
    points: Sequence[Mapping[str, Any]],
    samples: Mapping[int, Sequence[Mapping[str, Any]]],
    metric: str,
    window: int = ROLLING_WINDOW,
    threshold_pct: float = ROLLING_THRESHOLD_PCT,
) -> dict[int, dict[str, Any]]:
    """The dashboard's former per-point test, kept as the "old method" of benchmarks/bench_changepoint.py
    (no longer drawn): record id -> {flag: 'regression'|'improvement', delta_pct, p_value, baseline_n} for the ok
    points of one series (oldest first) that differ from their rolling baseline."""
    out: dict[int, dict[str, Any]] = {}
    history: list[list[float]] = []
    up = metric_bigger_is_better(metric)
    for point in points:
        if point["status"] != "ok":
            continue
        values = [s[metric] for s in samples.get(point["id"], ()) if s.get(metric) is not None]
        if not values:
            continue
        base = [v for h in history[-window:] for v in h]
        if base:
            d = delta_pct(float(np.median(base)), float(np.median(values)))
            p = mann_whitney_u(values, base).p_value
            flag = None
            if is_regression(d, p, up, threshold_pct):
                flag = "regression"
            elif is_regression(-d, p, up, threshold_pct):
                flag = "improvement"
            if flag:
                out[point["id"]] = {"flag": flag, "delta_pct": round(d, 3), "p_value": p, "baseline_n": len(base)}
        history.append(values)
    return out
