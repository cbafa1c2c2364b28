"""All the math, as pure functions over numpy arrays (numpy and scipy only): intervals, bootstrap,
modes, drift, Mann-Whitney, change points, step sizes.

The names below load their module on first use (PEP 562), so importing one light module (modes,
used by the change-point detector) does not import scipy with the rest.

- quantile_intervals: distribution-free median / quantile intervals from the binomial quantile, O(n).
- hierarchical: intervals over invocations x iterations and what they cover.
- paired: route ratios over paired invocations, with a verdict.
- repetition: variance components per level and the next repetition to buy (K&J 2013).
- percentiles: per-token latency percentiles resampling whole generations.
- modes, drift: typed warnings for bimodal steps and invocation medians that drift.

May import: model, support. Floors: docs/architecture.md; tests/unit/test_layering.py checks them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

#: submodule -> the names it defines that this package offers
_EXPORTS = {
    "drift": ("DriftReport", "detect_drift"),
    "hierarchical": (
        "Coverage",
        "Interval",
        "coverage_of",
        "hierarchical_bootstrap_median",
        "invocation_medians",
        "median_interval",
        "order_statistic_median",
        "student_t_median",
        "within_process_median",
    ),
    "quantile_intervals": ("median_ci", "median_ci_ranks", "quantile_ci", "quantile_ci_ranks"),
    "modes": ("Mode", "ModeReport", "detect_modes"),
    "paired": (
        "RatioResult",
        "Verdict",
        "paired_bootstrap_ratio",
        "paired_order_statistic_ratio",
        "paired_ratio",
        "paired_student_t_ratio",
    ),
    "percentiles": ("PercentileInterval", "generation_percentiles", "iid_percentiles"),
    "repetition": (
        "RepetitionAdvice",
        "VarianceComponents",
        "next_repetition",
        "optimal_iterations",
        "variance_components",
    ),
}
_HOME = {name: module for module, names in _EXPORTS.items() for name in names}

if TYPE_CHECKING:  # for type checkers and editors; at run time the names load lazily
    from winml_perf.stats.drift import DriftReport, detect_drift  # noqa: F401
    from winml_perf.stats.hierarchical import (
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
    from winml_perf.stats.modes import Mode, ModeReport, detect_modes  # noqa: F401
    from winml_perf.stats.paired import (
        RatioResult,
        Verdict,
        paired_bootstrap_ratio,
        paired_order_statistic_ratio,
        paired_ratio,
        paired_student_t_ratio,
    )
    from winml_perf.stats.percentiles import PercentileInterval, generation_percentiles, iid_percentiles  # noqa: F401
    from winml_perf.stats.quantile_intervals import median_ci, median_ci_ranks, quantile_ci, quantile_ci_ranks  # noqa: F401
    from winml_perf.stats.repetition import (
        RepetitionAdvice,
        VarianceComponents,
        next_repetition,
        optimal_iterations,
        variance_components,
    )


def __getattr__(name: str) -> Any:
    if name not in _HOME:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_HOME[name]}"), name)
    globals()[name] = value
    return value


__all__ = [
    "Coverage",
    "DriftReport",
    "Interval",
    "Mode",
    "ModeReport",
    "PercentileInterval",
    "RatioResult",
    "RepetitionAdvice",
    "VarianceComponents",
    "Verdict",
    "coverage_of",
    "detect_drift",
    "detect_modes",
    "generation_percentiles",
    "hierarchical_bootstrap_median",
    "iid_percentiles",
    "invocation_medians",
    "median_ci",
    "median_ci_ranks",
    "median_interval",
    "next_repetition",
    "optimal_iterations",
    "order_statistic_median",
    "paired_bootstrap_ratio",
    "paired_order_statistic_ratio",
    "paired_ratio",
    "paired_student_t_ratio",
    "quantile_ci",
    "quantile_ci_ranks",
    "student_t_median",
    "variance_components",
    "within_process_median",
]
