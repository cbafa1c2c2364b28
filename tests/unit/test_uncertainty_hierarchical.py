"""Two-level intervals cover the route's median across processes; pooled iterations do not."""

import math

import numpy as np
import pytest

from winml_perf.stats.hierarchical import (
    Coverage,
    coverage_of,
    hierarchical_bootstrap_median,
    median_interval,
    order_statistic_median,
    sketch,
    student_t_median,
    within_process_median,
)
from winml_perf.stats.quantile_intervals import median_ci

TRUE_MEDIAN = 100.0


def simulate_run(rng, invocations, iterations, between_sd=5.0, within_sd=2.0):
    """One run: each invocation has its own level (process effect), its iterations scatter around it."""
    return [rng.normal(TRUE_MEDIAN + rng.normal(0.0, between_sd), within_sd, iterations) for _ in range(invocations)]


def coverage_rate(method, invocations, repetitions=200, seed=11):
    rng = np.random.default_rng(seed)
    hits = 0
    for rep in range(repetitions):
        lo, hi = method(simulate_run(rng, invocations, 20), rep)
        hits += lo <= TRUE_MEDIAN <= hi
    return hits / repetitions


def bootstrap(run, rep):
    r = hierarchical_bootstrap_median(run, resamples=1000, seed=rep)
    return r.low, r.high


def pooled(run, rep):
    return median_ci(np.concatenate(run))


def two_stage(run, rep):
    r = hierarchical_bootstrap_median(run, resamples=1000, seed=rep, resample_iterations=True)
    return r.low, r.high


def test_hierarchical_bootstrap_covers_and_the_pooled_interval_does_not():
    assert coverage_rate(bootstrap, 10) >= 0.90
    assert coverage_rate(two_stage, 10) >= 0.90
    assert coverage_rate(pooled, 10) <= 0.60


def test_order_statistics_over_invocation_medians_cover():
    def order_stats(run, rep):
        r = order_statistic_median(run)
        return r.low, r.high

    assert coverage_rate(order_stats, 10) >= 0.93


def test_student_t_covers_with_three_invocations():
    def t_interval(run, rep):
        r = student_t_median(run)
        return r.low, r.high

    assert coverage_rate(t_interval, 3, repetitions=300) >= 0.90


def test_without_between_invocation_variance_the_bootstrap_stays_near_the_pooled_width():
    rng = np.random.default_rng(5)
    run = simulate_run(rng, 10, 50, between_sd=0.0)
    lo, hi = median_ci(np.concatenate(run))
    invocations_only = hierarchical_bootstrap_median(run)
    two_stage = hierarchical_bootstrap_median(run, resample_iterations=True)
    assert 0.8 < (invocations_only.high - invocations_only.low) / (hi - lo) < 1.6
    # Resampling iterations as well counts their variance twice: wider still (conservative).
    assert (two_stage.high - two_stage.low) > (invocations_only.high - invocations_only.low)


def test_bootstrap_is_reproducible_with_its_seed_and_changes_with_another():
    run = simulate_run(np.random.default_rng(1), 5, 30)
    assert hierarchical_bootstrap_median(run) == hierarchical_bootstrap_median(run)
    by_seed = {(r.low, r.high) for r in (hierarchical_bootstrap_median(run, seed=s) for s in range(2, 7))}
    assert len(by_seed) > 1


def test_coverage_says_which_levels_were_measured():
    one = [[1.0, 2.0, 3.0]]
    two = [[1.0, 2.0], [3.0, 4.0, 5.0]]
    assert coverage_of(one).to_dict() == {"levels": ["iterations"], "invocations": 1, "iterations": 3}
    assert coverage_of(two).to_dict() == {"levels": ["invocations", "iterations"], "invocations": 2, "iterations": 5}


def test_median_interval_picks_the_method_by_invocation_count():
    rng = np.random.default_rng(2)
    single = median_interval(simulate_run(rng, 1, 40))
    assert single.method == "order_statistics_iterations"
    assert single.coverage == Coverage(("iterations",), 1, 40)
    assert median_interval(simulate_run(rng, 3, 10)).method == "student_t_invocations"
    many = median_interval(simulate_run(rng, 8, 10))
    assert many.method == "order_statistics_invocations"
    assert many.coverage.levels == ("invocations", "iterations")


def test_within_process_interval_matches_the_binomial_interval():
    xs = np.random.default_rng(4).normal(10, 1, 50)
    r = within_process_median(xs)
    assert (r.low, r.high) == median_ci(xs)
    assert r.estimate == pytest.approx(np.median(xs))


def test_sketch_keeps_small_invocations_and_summarises_large_ones():
    small = np.arange(8.0)
    large = np.random.default_rng(0).normal(0, 1, 100_000)
    points = sketch([small, large], cap=64)
    assert points.shape == (2, 8)
    assert np.array_equal(points[0], small)
    assert np.all(np.diff(points[1]) >= 0)  # quantiles of the large one, in order
    assert abs(np.median(points[1])) < 0.05


def test_bootstrap_of_a_million_samples_keeps_a_bounded_resample():
    rng = np.random.default_rng(9)
    run = [rng.normal(100 + d, 2, 100_000) for d in rng.normal(0, 5, 10)]
    r = hierarchical_bootstrap_median(run, resamples=500)
    assert r.coverage.iterations == 1_000_000
    assert r.low < r.estimate < r.high


def test_empty_input_gives_nan():
    r = median_interval([])
    assert math.isnan(r.estimate) and math.isnan(r.low)
    assert r.to_dict()["low"] is None
