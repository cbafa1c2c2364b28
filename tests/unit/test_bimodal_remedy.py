"""The bimodal warning's remedy names only flags the run accepts: a sustained (--duration) run is one
process and refuses --invocations, so its remedy points at the tokens/s over time instead."""

from __future__ import annotations

import numpy as np

from winml_perf.record.warnings import BIMODAL, check_modes

RNG = np.random.default_rng(7)
TWO_MODES = np.concatenate([RNG.normal(9.3, 0.1, 2000), RNG.normal(11.6, 0.1, 1000)])


def test_a_sustained_run_is_not_told_to_use_invocations():
    (w,) = check_modes("decode steps", TWO_MODES, sustained=True)
    assert w.code == BIMODAL and "--invocations" not in w.remedy
    assert "winml dashboard --sustained" in w.remedy


def test_other_runs_are_told_to_compare_over_invocations():
    (w,) = check_modes("decode steps", TWO_MODES)
    assert "--invocations" in w.remedy


def test_one_mode_gives_no_warning():
    assert check_modes("decode steps", RNG.normal(10.0, 0.1, 3000), sustained=True) == []
