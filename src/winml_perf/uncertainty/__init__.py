"""Uncertainty of benchmark figures: pure functions over numpy arrays (numpy and scipy only).

- median_ci: distribution-free median / quantile intervals from the binomial quantile, O(n).
- hierarchical: intervals over invocations x iterations and what they cover.
- paired: route ratios over paired invocations, with a verdict.
- repetition: variance components per level and the next repetition to buy (K&J 2013).
- percentiles: per-token latency percentiles resampling whole generations.
- modes, drift: typed warnings for bimodal steps and invocation medians that drift.
"""

from winml_perf.uncertainty.drift import DriftReport, detect_drift
from winml_perf.uncertainty.hierarchical import (
    Coverage,
    Interval,
    coverage_of,
    hierarchical_bootstrap_median,
    invocation_medians,
    median_interval,
    order_statistic_median,
    student_t_median,
    within_process_median,
)
from winml_perf.uncertainty.median_ci import median_ci, median_ci_ranks, quantile_ci, quantile_ci_ranks
from winml_perf.uncertainty.modes import Mode, ModeReport, detect_modes
from winml_perf.uncertainty.paired import (
    RatioResult,
    Verdict,
    paired_bootstrap_ratio,
    paired_order_statistic_ratio,
    paired_ratio,
    paired_student_t_ratio,
)
from winml_perf.uncertainty.percentiles import PercentileInterval, generation_percentiles, iid_percentiles
from winml_perf.uncertainty.repetition import (
    RepetitionAdvice,
    VarianceComponents,
    next_repetition,
    optimal_iterations,
    variance_components,
)

__all__ = [
    "Coverage", "DriftReport", "Interval", "Mode", "ModeReport", "PercentileInterval", "RatioResult",
    "RepetitionAdvice", "VarianceComponents", "Verdict", "coverage_of", "detect_drift", "detect_modes",
    "generation_percentiles", "hierarchical_bootstrap_median", "iid_percentiles", "invocation_medians",
    "median_ci", "median_ci_ranks", "median_interval", "next_repetition", "optimal_iterations",
    "order_statistic_median", "paired_bootstrap_ratio", "paired_order_statistic_ratio", "paired_ratio", "paired_student_t_ratio",
    "quantile_ci", "quantile_ci_ranks", "student_t_median", "variance_components", "within_process_median",
]
