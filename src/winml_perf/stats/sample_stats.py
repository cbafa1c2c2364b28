"""Statistics of benchmark samples: pure functions, named constants, cited methods.

Nothing here runs inside a timing loop; the runner collects raw samples first and calls these
afterwards. Functions take plain sequences of floats and never mutate them. How one iteration's
metrics derive from its timings is model/metrics.py's business; this module summarises them.

Methods:
- Percentiles: linear interpolation between order statistics, Hyndman & Fan (1996) "Sample
  quantiles in statistical packages", definition 7 (the default of numpy and R).
- Confidence interval of the median: distribution-free, from order statistics and the binomial
  quantile (uncertainty.median_ci: Conover 1999 §3.2; Hahn & Meeker 1991 §5.2), O(n), never a sum
  over n. It covers the process the values came from; intervals across invocations come from
  uncertainty.median_interval. Needs at least 6 samples for 95 %.
- Outliers: modified z-score on the median absolute deviation, threshold 3.5 (Iglewicz & Hoaglin,
  "How to Detect and Handle Outliers", ASQC 1993); when the MAD is 0, the mean absolute deviation
  scaled by 1.253314 stands in for it (the variant used by IBM SPSS).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from winml_perf import stats as uncertainty
from winml_perf.stats.arrays import Values

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


def _array(values: Values) -> np.ndarray:
    """The values as a float array without None or NaN (numpy: summaries of 10^6 values stay cheap)."""
    xs = np.asarray(values, dtype=float).ravel()  # None becomes NaN
    kept: np.ndarray = xs[~np.isnan(xs)]
    return kept


def mean(values: Values) -> float:
    xs = _array(values)
    return math.fsum(xs.tolist()) / xs.size if xs.size else math.nan


def median(values: Values) -> float:
    return percentile(values, 50.0)


def _stdev_about(xs: np.ndarray, m: float) -> float:
    """Sample standard deviation of ``xs`` (no NaN) about its mean ``m``; NaN below 2 samples."""
    if xs.size < 2:
        return math.nan
    return math.sqrt(math.fsum(((xs - m) ** 2).tolist()) / (xs.size - 1))  # exactly rounded sums, as before


def stdev(values: Values) -> float:
    """Sample standard deviation (n - 1 in the denominator); NaN below 2 samples."""
    xs = _array(values)
    return _stdev_about(xs, mean(xs))


def _cv_pct(m: float, s: float) -> float:
    return math.nan if math.isnan(s) or not m else s / abs(m) * 100.0


def cv_pct(values: Values) -> float:
    """Coefficient of variation in percent: stdev / mean * 100."""
    xs = _array(values)
    m = mean(xs)
    return _cv_pct(m, _stdev_about(xs, m))


def _sorted_percentile(ordered: np.ndarray, q: float) -> float:
    """Hyndman & Fan definition 7 on already sorted values."""
    if not ordered.size:
        return math.nan
    h = (ordered.size - 1) * q / 100.0
    lo = math.floor(h)
    hi = min(lo + 1, ordered.size - 1)
    return float(ordered[lo] + (h - lo) * (ordered[hi] - ordered[lo]))


def percentile(values: Values, q: float) -> float:
    """The q-th percentile (0..100), Hyndman & Fan definition 7 (linear interpolation)."""
    if not 0.0 <= q <= 100.0:
        raise ValueError(f"percentile q must lie in [0, 100], got {q}")
    return _sorted_percentile(np.sort(_array(values)), q)


def median_ci_ranks(n: int, confidence: float = CONFIDENCE_LEVEL) -> tuple[int, int] | None:
    """1-based ranks (l, n - l + 1) of the order statistics bounding the median at ``confidence``
    (from the binomial quantile: O(1) in n; see uncertainty.median_ci). None below 6 samples at 95 %."""
    return uncertainty.median_ci_ranks(n, confidence)


def median_ci(values: Values, confidence: float = CONFIDENCE_LEVEL) -> tuple[float, float]:
    """Distribution-free confidence interval of the median; (nan, nan) when too few samples. O(n)."""
    return uncertainty.median_ci(_array(values), confidence)


def ci_half_width_pct(values: Values, confidence: float = CONFIDENCE_LEVEL) -> float:
    """The larger distance from the median to a CI bound, in percent of the median (the "±x %")."""
    med = median(values)
    lo, hi = median_ci(values, confidence)
    if math.isnan(lo) or not med:
        return math.nan
    return max(med - lo, hi - med) / abs(med) * 100.0


def min_ci_samples(confidence: float = CONFIDENCE_LEVEL) -> int:
    """Fewest values with a distribution-free CI of the median (6 at 95 %)."""
    return next(n for n in range(1, 64) if median_ci_ranks(n, confidence) is not None)


def modified_z_scores(values: Values) -> list[float]:
    """Iglewicz & Hoaglin's modified z-score of each value (NaN inputs score 0)."""
    return [float(z) for z in _modified_z(values)]


def _modified_z(values: Values) -> np.ndarray:
    raw = np.asarray(values, dtype=float).ravel()  # None becomes NaN
    xs = raw[~np.isnan(raw)]
    if not xs.size:
        return np.zeros(raw.size)
    med = float(np.median(xs))
    deviations = np.abs(xs - med)
    mad = float(np.median(deviations))
    scale = mad / MODIFIED_Z_CONSTANT if mad > 0 else MEAN_AD_CONSTANT * float(deviations.mean())
    if scale == 0:
        return np.zeros(raw.size)
    return np.where(np.isnan(raw), 0.0, (raw - med) / scale)


def outlier_indices(values: Values, threshold: float = MODIFIED_Z_THRESHOLD) -> tuple[int, ...]:
    """Indices of values whose |modified z-score| exceeds ``threshold``."""
    return tuple(int(i) for i in np.flatnonzero(np.abs(_modified_z(values)) > threshold))


def warmup_settled(times: Values, window: int = SETTLE_WINDOW, tolerance_pct: float = SETTLE_TOLERANCE_PCT) -> bool:
    """True when the last ``window`` times lie within ``tolerance_pct`` of their median
    ((max - min) / median <= tolerance): iteration times have stopped trending."""
    xs = _array(times).tolist()
    if window < 1 or len(xs) < window:
        return False
    tail = xs[-window:]
    med = percentile(tail, 50.0)
    if med <= 0:
        return False
    return bool((max(tail) - min(tail)) / med * 100.0 <= tolerance_pct)


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

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["outlier_indices"] = list(self.outlier_indices)
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in d.items()}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Summary:
        vals: dict[str, Any] = {
            k: (math.nan if d.get(k) is None else d[k]) for k in cls.__dataclass_fields__ if k != "outlier_indices"
        }
        return cls(**vals, outlier_indices=tuple(d.get("outlier_indices") or ()))


def summarize(values: Values, interval: tuple[float, float] | None = None) -> Summary:
    """Statistics of the values, O(n log n) (one sort). ``interval``: the CI of the median to
    report (e.g. over invocations, see uncertainty.median_interval); default: the binomial
    interval over these values as if they came from one process."""
    xs = _array(values)
    ordered = np.sort(xs)
    lo, hi = interval if interval is not None else uncertainty.median_ci(ordered)
    med = _sorted_percentile(ordered, 50.0)
    half = max(med - lo, hi - med) / abs(med) * 100.0 if math.isfinite(lo) and math.isfinite(hi) and med else math.nan
    m = mean(xs)
    s = _stdev_about(xs, m)  # one mean and one spread: each is an exactly rounded sum over every value
    return Summary(
        n=int(xs.size),
        mean=m,
        median=med,
        stdev=s,
        cv_pct=_cv_pct(m, s),
        min=float(ordered[0]) if xs.size else math.nan,
        max=float(ordered[-1]) if xs.size else math.nan,
        p50=med,
        p90=_sorted_percentile(ordered, 90.0),
        p95=_sorted_percentile(ordered, 95.0),
        p99=_sorted_percentile(ordered, 99.0),
        ci95_low=lo,
        ci95_high=hi,
        ci95_half_width_pct=half,
        outlier_indices=outlier_indices(xs),
    )
