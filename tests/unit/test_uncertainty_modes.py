"""Mode detection: two real modes are found with their centres and shares; one-humped noise is not."""

import numpy as np
import pytest

from winml_perf.stats.modes import detect_modes


def two_modes(rng, n=10_000, fast=6.2, slow=9.8, fast_share=0.61, sd=0.03):
    k = int(n * fast_share)
    x = np.concatenate([fast * np.exp(rng.normal(0, sd, k)), slow * np.exp(rng.normal(0, sd, n - k))])
    rng.shuffle(x)
    return x


def test_webgpu_like_decode_steps_are_bimodal_with_both_modes():
    report = detect_modes(two_modes(np.random.default_rng(51)))
    assert report.bimodal
    (fast, slow) = report.modes
    assert fast.centre == pytest.approx(6.2, rel=0.05) and slow.centre == pytest.approx(9.8, rel=0.05)
    assert fast.share == pytest.approx(0.61, rel=0.05) and slow.share == pytest.approx(0.39, rel=0.05)
    assert report.describe() == "bimodal: 6.2 ms (61%) / 9.8 ms (39%)"


@pytest.mark.parametrize("sigma", [0.02, 0.1, 0.3, 0.8])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_unimodal_lognormal_is_not_flagged(sigma, seed):
    report = detect_modes(np.random.default_rng(seed).lognormal(2.0, sigma, 20_000))
    assert not report.bimodal
    assert report.describe() == "unimodal"
    assert len(report.modes) == 1


def test_heavy_right_tail_is_not_two_modes():
    x = 5.0 + np.random.default_rng(52).gamma(2.0, 1.0, 50_000)
    assert not detect_modes(x).bimodal


def test_a_small_minority_mode_is_below_the_minimum_share():
    x = two_modes(np.random.default_rng(53), fast_share=0.97)
    assert not detect_modes(x).bimodal
    assert detect_modes(x, min_share=0.02).bimodal


def test_overlapping_humps_are_not_separated_modes():
    x = two_modes(np.random.default_rng(54), fast=6.2, slow=6.6, sd=0.08)
    assert not detect_modes(x).bimodal


def test_a_million_steps_are_subsampled_and_still_resolved():
    report = detect_modes(two_modes(np.random.default_rng(55), n=1_000_000))
    assert report.n == 1_000_000
    assert report.bimodal and report.modes[0].centre == pytest.approx(6.2, rel=0.05)


def test_few_values_are_never_bimodal():
    assert not detect_modes([1.0, 1.0, 10.0, 10.0]).bimodal


def test_quantised_timer_values_do_not_break_the_fit():
    x = np.round(two_modes(np.random.default_rng(56)), 1)  # 0.1 ms ticks: many repeated values
    report = detect_modes(x)
    assert report.bimodal and np.isfinite(report.bic_two)


def test_non_positive_latencies_are_refused():
    with pytest.raises(ValueError, match="positive"):
        detect_modes([1.0, 0.0, 2.0])
