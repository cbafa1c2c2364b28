"""Per-token percentiles: intervals from whole generations are wider where steps are correlated."""

import math

import numpy as np
import pytest

from winml_perf.stats import percentiles as pct
from winml_perf.stats.percentiles import generation_percentiles, iid_percentiles

Z90 = 1.2815515655446004


def correlated_generations(rng, count=30, steps=64, generation_sd=0.1, step_sd=0.05):
    """Each generation runs at its own speed (log-normal offset); steps scatter around it."""
    return [
        np.exp(math.log(10.0) + rng.normal(0.0, generation_sd) + rng.normal(0.0, step_sd, steps)) for _ in range(count)
    ]


def widths(intervals):
    return np.array([r.high - r.low for r in intervals])


def test_generation_intervals_are_wider_than_iid_on_correlated_steps():
    gens = correlated_generations(np.random.default_rng(41))
    ratio = widths(generation_percentiles(gens)) / widths(iid_percentiles(gens))
    assert np.all(ratio > 2.0)


def test_on_independent_steps_both_intervals_agree():
    gens = correlated_generations(np.random.default_rng(42), generation_sd=0.0)
    ratio = widths(generation_percentiles(gens)) / widths(iid_percentiles(gens))
    assert np.all((ratio > 0.6) & (ratio < 1.6))


@pytest.mark.parametrize("q,z", [(50.0, 0.0), (90.0, Z90)])
def test_generation_intervals_cover_and_iid_ones_do_not(q, z):
    rng = np.random.default_rng(43)
    total_sd = math.hypot(0.1, 0.05)
    truth = 10.0 * math.exp(z * total_sd)
    gen_hits = iid_hits = 0
    for rep in range(100):
        gens = correlated_generations(rng)
        g = next(r for r in generation_percentiles(gens, resamples=500, seed=rep) if r.percentile == q)
        i = next(r for r in iid_percentiles(gens) if r.percentile == q)
        gen_hits += g.low <= truth <= g.high
        iid_hits += i.low <= truth <= i.high
    assert gen_hits >= 85
    assert iid_hits <= 50


def test_estimates_are_pooled_percentiles():
    gens = correlated_generations(np.random.default_rng(44), count=5)
    pooled = np.concatenate(gens)
    for r in generation_percentiles(gens):
        assert r.estimate == pytest.approx(np.percentile(pooled, r.percentile))
        assert r.low <= r.estimate <= r.high
        assert (r.generations, r.steps) == (5, pooled.size)


def test_one_generation_has_nothing_to_resample():
    (p50,) = generation_percentiles([np.arange(1.0, 101.0)], percentiles=(50.0,))
    assert p50.low == p50.high


def test_rank_bins_approximate_the_exact_replicates(monkeypatch):
    gens = correlated_generations(np.random.default_rng(45), count=40, steps=100)
    exact = generation_percentiles(gens)  # 4000 steps <= MAX_BINS: one step per bin
    monkeypatch.setattr(pct, "MAX_BINS", 256)
    monkeypatch.setattr(pct, "MIN_BINS", 256)
    binned = generation_percentiles(gens)
    for e, b in zip(exact, binned):
        assert abs(e.low - b.low) < 0.05 * (e.high - e.low)
        assert abs(e.high - b.high) < 0.05 * (e.high - e.low)


def test_empty_and_nan_input():
    assert all(math.isnan(r.estimate) for r in generation_percentiles([]))
    with_nan = generation_percentiles([[1.0, math.nan, 2.0, 3.0], [2.0, 4.0]], percentiles=(50.0,))
    assert with_nan[0].steps == 5
