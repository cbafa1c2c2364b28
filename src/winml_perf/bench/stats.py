"""Statistics of benchmark samples: pure functions, named constants, cited methods.

Nothing here runs inside a timing loop; the runner collects raw samples first and calls these
afterwards. Functions take plain sequences of floats and never mutate them. How one iteration's
metrics derive from its timings is model/metrics.py's business; this module summarises them.

Methods:
- Percentiles: linear interpolation between order statistics, Hyndman & Fan (1996) "Sample
  quantiles in statistical packages", definition 7 (the default of numpy and R).
- Confidence interval of the median: distribution-free, from order statistics and the binomial
  distribution Bin(n, 1/2) (Conover, "Practical Nonparametric Statistics", 3rd ed., 1999, §3.2;
  Hahn & Meeker, "Statistical Intervals", 1991, §5.2). Exact coverage >= the nominal level; it needs
  at least 6 samples for 95 %.
- Outliers: modified z-score on the median absolute deviation, threshold 3.5 (Iglewicz & Hoaglin,
  "How to Detect and Handle Outliers", ASQC 1993); when the MAD is 0, the mean absolute deviation
  scaled by 1.253314 stands in for it (the variant used by IBM SPSS).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Sequence

#: Confidence level of every confidence interval reported.
CONFIDENCE_LEVEL = 0.95
#: Iglewicz & Hoaglin's constant: 0.6745 is the 0.75 quantile of the standard normal, so
#: 0.6745 * (x - median) / MAD is a z-score for normal data.
MODIFIED_Z_CONSTANT = 0.6745
#: |modified z| above this marks an outlier (Iglewicz & Hoaglin 1993).
MODIFIED_Z_THRESHOLD = 3.5
#: Fewest values an outlier claim rests on: below 5 the MAD is one or two deviations (at n = 3 the
#: middle value's deviation is 0, so the MAD is the smaller of the other two) and any value can
#: look extreme.
MIN_OUTLIER_SAMPLES = 5
#: Scale of the mean absolute deviation used when the MAD is 0 (sqrt(pi/2)).
MEAN_AD_CONSTANT = 1.253314
#: Percentiles every summary reports.
PERCENTILES = (50.0, 90.0, 95.0, 99.0)
#: Warmup "settle" rule defaults: the last WINDOW times within TOLERANCE_PCT of their median.
SETTLE_WINDOW = 3
SETTLE_TOLERANCE_PCT = 5.0


def _clean(values: Sequence[float]) -> list[float]:
    return [float(v) for v in values if v is not None and not math.isnan(float(v))]


def mean(values: Sequence[float]) -> float:
    xs = _clean(values)
    return math.fsum(xs) / len(xs) if xs else math.nan


def median(values: Sequence[float]) -> float:
    return percentile(values, 50.0)


def stdev(values: Sequence[float]) -> float:
    """Sample standard deviation (n - 1 in the denominator); NaN below 2 samples."""
    xs = _clean(values)
    if len(xs) < 2:
        return math.nan
    m = math.fsum(xs) / len(xs)
    return math.sqrt(math.fsum((x - m) ** 2 for x in xs) / (len(xs) - 1))


def cv_pct(values: Sequence[float]) -> float:
    """Coefficient of variation in percent: stdev / mean * 100."""
    m = mean(values)
    s = stdev(values)
    if math.isnan(s) or not m:
        return math.nan
    return s / abs(m) * 100.0


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100), Hyndman & Fan definition 7 (linear interpolation)."""
    if not 0.0 <= q <= 100.0:
        raise ValueError(f"percentile q must lie in [0, 100], got {q}")
    xs = sorted(_clean(values))
    if not xs:
        return math.nan
    h = (len(xs) - 1) * q / 100.0
    lo = math.floor(h)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (h - lo) * (xs[hi] - xs[lo])


@lru_cache(maxsize=4096)
def median_ci_ranks(n: int, confidence: float = CONFIDENCE_LEVEL) -> tuple[int, int] | None:
    """1-based ranks (l, u) of the order statistics bounding the median at ``confidence``.

    With B ~ Bin(n, 1/2) the number of samples below the true median, [x(l), x(n-l+1)] covers it
    with probability 1 - 2 P(B <= l - 1). l is the largest rank keeping that >= ``confidence``.
    Returns None when even [x(1), x(n)] is too short (n < 6 at 95 %).
    """
    if n < 1:
        return None
    alpha_half = (1.0 - confidence) / 2.0
    total = 2**n
    cdf = 0
    best = None
    for k in range(0, (n + 1) // 2):
        cdf += math.comb(n, k)  # cdf = sum_{i<=k} C(n, i) -> P(B <= k) * 2^n
        if cdf / total <= alpha_half:
            best = k + 1  # P(B <= l - 1) <= alpha/2 with l = k + 1
        else:
            break
    if best is None:
        return None
    return best, n - best + 1


def median_ci(values: Sequence[float], confidence: float = CONFIDENCE_LEVEL) -> tuple[float, float]:
    """Distribution-free confidence interval of the median; (nan, nan) when too few samples."""
    xs = sorted(_clean(values))
    ranks = median_ci_ranks(len(xs), confidence)
    if ranks is None:
        return math.nan, math.nan
    lo, hi = ranks
    return xs[lo - 1], xs[hi - 1]


def ci_half_width_pct(values: Sequence[float], confidence: float = CONFIDENCE_LEVEL) -> float:
    """The larger distance from the median to a CI bound, in percent of the median (the "±x %")."""
    med = median(values)
    lo, hi = median_ci(values, confidence)
    if math.isnan(lo) or not med:
        return math.nan
    return max(med - lo, hi - med) / abs(med) * 100.0


def min_ci_samples(confidence: float = CONFIDENCE_LEVEL) -> int:
    """Fewest values with a distribution-free CI of the median (6 at 95 %)."""
    return next(n for n in range(1, 64) if median_ci_ranks(n, confidence) is not None)


def modified_z_scores(values: Sequence[float]) -> list[float]:
    """Iglewicz & Hoaglin's modified z-score of each value (NaN inputs score 0)."""
    xs = _clean(values)
    if not xs:
        return [0.0 for _ in values]
    med = percentile(xs, 50.0)
    deviations = [abs(x - med) for x in xs]
    mad = percentile(deviations, 50.0)
    if mad > 0:
        scale = mad / MODIFIED_Z_CONSTANT
    else:
        mean_ad = math.fsum(deviations) / len(deviations)
        scale = MEAN_AD_CONSTANT * mean_ad
    out = []
    for v in values:
        if v is None or math.isnan(float(v)) or scale == 0:
            out.append(0.0)
        else:
            out.append((float(v) - med) / scale)
    return out


def outlier_indices(values: Sequence[float], threshold: float = MODIFIED_Z_THRESHOLD) -> tuple[int, ...]:
    """Indices of values whose |modified z-score| exceeds ``threshold``."""
    return tuple(i for i, z in enumerate(modified_z_scores(values)) if abs(z) > threshold)


def warmup_settled(times: Sequence[float], window: int = SETTLE_WINDOW, tolerance_pct: float = SETTLE_TOLERANCE_PCT) -> bool:
    """True when the last ``window`` times lie within ``tolerance_pct`` of their median
    ((max - min) / median <= tolerance): iteration times have stopped trending."""
    xs = _clean(times)
    if window < 1 or len(xs) < window:
        return False
    tail = xs[-window:]
    med = percentile(tail, 50.0)
    if med <= 0:
        return False
    return (max(tail) - min(tail)) / med * 100.0 <= tolerance_pct


@dataclass(frozen=True)
class Summary:
    """Descriptive statistics of one metric's samples."""

    n: int
    mean: float
    median: float
    stdev: float
    cv_pct: float
    min: float
    max: float
    p50: float
    p90: float
    p95: float
    p99: float
    ci95_low: float
    ci95_high: float
    ci95_half_width_pct: float
    outlier_indices: tuple[int, ...]

    def to_dict(self) -> dict:
        d = asdict(self)
        d["outlier_indices"] = list(self.outlier_indices)
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in d.items()}

    @classmethod
    def from_dict(cls, d: dict) -> "Summary":
        vals = {k: (math.nan if d.get(k) is None else d[k]) for k in cls.__dataclass_fields__ if k != "outlier_indices"}
        return cls(**vals, outlier_indices=tuple(d.get("outlier_indices") or ()))


def summarize(values: Sequence[float]) -> Summary:
    xs = _clean(values)
    lo, hi = median_ci(xs)
    return Summary(
        n=len(xs),
        mean=mean(xs),
        median=median(xs),
        stdev=stdev(xs),
        cv_pct=cv_pct(xs),
        min=min(xs) if xs else math.nan,
        max=max(xs) if xs else math.nan,
        p50=percentile(xs, 50.0),
        p90=percentile(xs, 90.0),
        p95=percentile(xs, 95.0),
        p99=percentile(xs, 99.0),
        ci95_low=lo,
        ci95_high=hi,
        ci95_half_width_pct=ci_half_width_pct(xs),
        outlier_indices=outlier_indices(xs),
    )
