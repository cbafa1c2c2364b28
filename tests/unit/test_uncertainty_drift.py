"""Drift: invocation medians that disagree beyond their own intervals are flagged with their range."""

import numpy as np

from winml_perf.stats.drift import detect_drift


def invocations(rng, medians, iterations=10, sd=1.5):
    return [rng.normal(m, sd, iterations) for m in medians]


def test_the_issues_between_process_spread_is_drift():
    medians = [101.0, 103.9, 108.5, 93.6, 107.6, 91.0, 124.0]
    report = detect_drift(invocations(np.random.default_rng(61), medians))
    assert report.drifting
    assert abs(report.low - 91.0) < 3 and abs(report.high - 124.0) < 3
    assert report.describe().startswith("invocation medians drift 9")
    assert "tok/s" in report.describe()


def test_two_process_modes_on_one_core_are_drift():
    medians = [19.8e3, 12.8e3, 12.5e3, 19.8e3, 20.0e3, 12.1e3, 19.6e3, 18.9e3]
    assert detect_drift(invocations(np.random.default_rng(62), medians, sd=300.0)).drifting


def test_identical_invocations_are_rarely_flagged():
    rng = np.random.default_rng(63)
    flagged = sum(detect_drift(invocations(rng, [100.0] * 8, iterations=20, sd=5.0)).drifting for _ in range(200))
    assert flagged <= 10  # the Bonferroni construction bounds false alarms by 5 %


def test_a_resolved_but_tiny_spread_is_not_reported():
    rng = np.random.default_rng(64)
    runs = invocations(rng, [100.0, 100.5, 101.0], iterations=5000, sd=1.0)
    report = detect_drift(runs)
    assert not report.drifting and "below 2%" in report.reason
    assert detect_drift(runs, min_relative_spread=0.001).drifting


def test_too_few_iterations_cannot_show_drift():
    report = detect_drift([[100.0, 101.0], [150.0, 151.0], [200.0, 199.0]])
    assert not report.drifting and "too few iterations" in report.reason


def test_one_invocation_is_not_drift():
    assert detect_drift([[1.0, 2.0, 3.0]]).reason == "fewer than 2 invocations"
