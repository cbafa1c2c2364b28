"""The gate's first-night rule (stats/series/history_band.py) and judge_newest using it (issue 28)."""

from __future__ import annotations

import numpy as np

from winml_perf.stats.series import changepoint as cp
from winml_perf.stats.series.history_band import beyond_band


def _nights(seed: int, nights: int, level: float = 100.0, invocations: int = 10) -> list[list[float]]:
    """Ordinary nights: invocation estimates with a 5 % process spread and a slow mode (0.65) in 30 %."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(nights):
        mode = np.where(rng.random(invocations) < 0.3, 0.65, 1.0)
        out.append(list(level * mode * np.exp(rng.normal(0.0, 0.05, invocations))))
    return out


def test_the_gate_fails_the_night_a_model_gets_2_7x_slower():
    history = _nights(1, 8)
    slow = [v / 2.7 for v in _nights(2, 1)[0]]
    verdict = cp.judge_newest(history + [slow], higher_is_better=True, threshold=0.05)
    assert verdict.is_regression and verdict.method == cp.BY_BAND
    assert "all 10 invocations of the newest run" in verdict.reason and "8 earlier runs" in verdict.reason
    longer = [[1000.0 / v for v in run] for run in history + [slow]]  # the same as a time: lower is better
    assert cp.judge_newest(longer, higher_is_better=False, threshold=0.05).is_regression


def test_an_ordinary_night_and_a_night_with_one_invocation_inside_the_band_pass():
    history = _nights(3, 8)
    assert cp.judge_newest(history + _nights(4, 1), higher_is_better=True, threshold=0.05).status == cp.UNCHANGED
    slow = [v / 2.7 for v in _nights(5, 1)[0]]
    slow[0] = min(v for run in history for v in run)  # one process as slow as the history's slowest
    assert not cp.judge_newest(history + [slow], higher_is_better=True, threshold=0.05).is_regression


def test_the_band_margin_must_exceed_the_threshold():
    history = [[100.0, 98.0, 102.0]] * 8
    just_below = [95.0, 94.0, 94.5]  # 3 % under the band's 98 at most: within a 5 % threshold
    assert beyond_band(history, just_below, higher_is_better=True, threshold=0.05) is None
    band = beyond_band(history, just_below, higher_is_better=True, threshold=0.02)
    assert band is not None and band.worse and round(band.margin, 3) == round(95.0 / 98.0 - 1, 3)


def test_the_band_needs_invocations():
    history = [[100.0, 98.0, 102.0]] * 8
    assert beyond_band(history, [50.0, 51.0], higher_is_better=True, threshold=0.05) is None  # two invocations
    assert beyond_band([], [50.0, 51.0, 52.0], higher_is_better=True, threshold=0.05) is None
    per_run = [100.0, 99.0, 101.0, 100.0, 98.0, 102.0, 100.0, 99.0, 40.0]  # one estimate a run: no band rule
    assert cp.judge_newest(per_run, higher_is_better=True).method != cp.BY_BAND
