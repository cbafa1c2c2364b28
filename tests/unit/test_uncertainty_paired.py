"""Route ratios over paired invocations: drift shared by a pair cancels; the verdict follows the interval."""

import numpy as np
import pytest

from winml_perf.stats.paired import (
    Verdict,
    pair_ratios,
    paired_bootstrap_ratio,
    paired_order_statistic_ratio,
    paired_ratio,
    verdict,
)


def paired_run(rng, pairs, ratio, iterations=15, drift_sd=0.08, within_sd=0.01):
    """A and B interleaved: each pair shares a machine state (a common factor), A = ratio x B."""
    a, b = [], []
    for _ in range(pairs):
        level = 100.0 * np.exp(rng.normal(0.0, drift_sd))
        a.append(level * ratio * np.exp(rng.normal(0.0, within_sd, iterations)))
        b.append(level * np.exp(rng.normal(0.0, within_sd, iterations)))
    return a, b


@pytest.mark.parametrize("pairs,method", [(8, "order_statistics_pairs"), (4, "student_t_log_pairs")])
def test_equal_routes_are_no_difference_in_at_least_90_percent(pairs, method):
    rng = np.random.default_rng(21)
    results = [paired_ratio(*paired_run(rng, pairs, 1.0)) for _ in range(100)]
    assert {r.method for r in results} == {method}
    assert sum(r.verdict is Verdict.NO_DIFFERENCE for r in results) >= 90


def test_a_3_percent_gain_is_seen_through_8_percent_drift():
    rng = np.random.default_rng(22)
    results = [paired_ratio(*paired_run(rng, 8, 1.03)) for _ in range(50)]
    assert all(r.verdict is Verdict.FASTER for r in results)
    assert sum(r.low <= 1.03 <= r.high for r in results) >= 45


def test_lower_is_better_flips_the_verdict():
    a, b = paired_run(np.random.default_rng(23), 8, 1.05)
    assert paired_ratio(a, b, higher_is_better=True).verdict is Verdict.FASTER
    assert paired_ratio(a, b, higher_is_better=False).verdict is Verdict.SLOWER


def test_bootstrap_and_order_statistics_agree_on_the_estimate():
    a, b = paired_run(np.random.default_rng(24), 10, 0.9)
    assert paired_bootstrap_ratio(a, b).estimate == paired_order_statistic_ratio(a, b).estimate
    assert paired_bootstrap_ratio(a, b).verdict is Verdict.SLOWER


def test_paired_bootstrap_covers_the_true_ratio_through_drift():
    rng = np.random.default_rng(26)
    results = [paired_bootstrap_ratio(*paired_run(rng, 8, 1.02), resamples=500) for _ in range(100)]
    assert sum(r.low <= 1.02 <= r.high for r in results) >= 90


def test_pair_ratios_are_ratios_of_medians():
    assert list(pair_ratios([[1.0, 2.0, 3.0], [4.0]], [[2.0], [8.0, 8.0]])) == [1.0, 0.5]


def test_unequal_pair_counts_are_refused():
    with pytest.raises(ValueError, match="2 for A, 1 for B"):
        paired_ratio([[1.0], [2.0]], [[1.0]])


def test_verdict_rules():
    assert verdict(1.01, 1.2, True) is Verdict.FASTER
    assert verdict(0.8, 0.99, True) is Verdict.SLOWER
    assert verdict(0.99, 1.01, True) is Verdict.NO_DIFFERENCE
    assert verdict(float("nan"), float("nan"), True) is Verdict.INSUFFICIENT


def test_describe_names_pairs_and_level():
    a, b = paired_run(np.random.default_rng(25), 8, 1.05)
    text = paired_ratio(a, b).describe()
    assert "over 8 paired invocations: faster at 95%" in text
