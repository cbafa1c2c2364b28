"""Variance components per level and Kalibera & Jones's optimal repetition count."""

import math

import numpy as np
import pytest

from winml_perf.stats.repetition import next_repetition, optimal_iterations, variance_components


def two_level(rng, invocations, sizes, between_sd, within_sd):
    return [rng.normal(50.0 + rng.normal(0.0, between_sd), within_sd, n) for n, _ in zip(sizes, range(invocations))]


def test_components_recover_the_simulated_variances():
    rng = np.random.default_rng(31)
    c = variance_components(two_level(rng, 400, [20] * 400, between_sd=3.0, within_sd=1.0))
    assert c.within == pytest.approx(1.0, rel=0.05)
    assert c.between == pytest.approx(9.0, rel=0.15)
    assert c.between_share == pytest.approx(0.9, abs=0.02)


def test_unequal_iteration_counts_are_handled():
    rng = np.random.default_rng(32)
    sizes = list(rng.integers(5, 60, 400))
    c = variance_components(two_level(rng, 400, sizes, between_sd=2.0, within_sd=2.0))
    assert c.within == pytest.approx(4.0, rel=0.05)
    assert c.between == pytest.approx(4.0, rel=0.2)


def test_between_component_is_zero_without_process_effects():
    rng = np.random.default_rng(33)
    c = variance_components([rng.normal(10, 1, 30) for _ in range(5)])
    assert c.between < 0.1 * c.within
    assert optimal_iterations(variance_components([[1.0, 2.0], [1.0, 2.0]]), 0.1, 5.0) == math.inf


def test_components_need_two_invocations_and_a_repeat():
    with pytest.raises(ValueError, match="2 invocations"):
        variance_components([[1.0, 2.0, 3.0]])
    with pytest.raises(ValueError, match="repeated iteration"):
        variance_components([[1.0], [2.0]])


def test_optimal_iterations_minimise_variance_times_cost():
    """(T2^2 + T1^2 / r1) (c2 + r1 c1) is the variance at unit cost; its minimum over r1 is r1*."""
    rng = np.random.default_rng(34)
    c = variance_components(two_level(rng, 50, [30] * 50, between_sd=1.0, within_sd=4.0))
    c1, c2 = 0.05, 3.0
    r1 = np.arange(1, 2000)
    work = (c.between + c.within / r1) * (c2 + r1 * c1)
    best = int(r1[np.argmin(work)])
    assert abs(best - optimal_iterations(c, c1, c2)) <= 1


def test_next_repetition_iterates_until_the_optimum_then_invokes():
    rng = np.random.default_rng(35)
    c = variance_components(two_level(rng, 20, [20] * 20, between_sd=1.0, within_sd=4.0))
    target = math.ceil(optimal_iterations(c, 0.05, 3.0))
    assert target > 2
    assert next_repetition(c, 0.05, 3.0, target - 1).next == "iteration"
    advice = next_repetition(c, 0.05, 3.0, target)
    assert advice.next == "invocation" and str(target) in advice.reason


def test_cheap_invocations_and_process_variance_favour_invocations():
    rng = np.random.default_rng(36)
    c = variance_components(two_level(rng, 20, [10] * 20, between_sd=5.0, within_sd=0.5))
    assert (
        next_repetition(c, iteration_cost_s=1.0, invocation_cost_s=0.5, iterations_in_invocation=1).next == "invocation"
    )


def test_costs_must_be_positive():
    c = variance_components([[1.0, 2.0], [3.0, 5.0]])
    with pytest.raises(ValueError, match="costs must be positive"):
        optimal_iterations(c, 0.0, 1.0)
