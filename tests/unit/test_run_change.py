"""`compare runs` judges a change over invocations, not pooled iterations (issue 28)."""

from __future__ import annotations

import pytest

from winml_perf.compare.cells import Cell, MeasuredSample
from winml_perf.compare.runs import Side, compare_runs
from winml_perf.stats import significance as sig
from winml_perf.stats.run_change import run_change

BASE_LEVELS = [100.0, 104.0, 96.0, 102.0, 98.0]  # five processes of identical code, 4 % apart
CAND_LEVELS = [103.0, 107.0, 99.0, 105.0, 101.0]  # the same code again: a 3 % luckier set of processes


def _cell(uid: str, levels: list[float], *, with_invocations: bool = True) -> Cell:
    """A cell whose invocations run at ``levels`` tok/s, five iterations each within 0.2 %."""
    samples = tuple(
        MeasuredSample(k, {"decode_tokens_per_s": level * (1 + 0.001 * (j - 2))}, k if with_invocations else None)
        for k, level in enumerate(levels)
        for j in range(5)
    )
    return Cell(
        uid, None, uid, f"2025-01-0{1 + int(uid[-1])}T00:00:00Z", "tb", "b", "config", 16, 8, "s", "ok", 5, samples
    )


def _compare(base: Cell, cand: Cell, **kw):
    report = compare_runs(
        Side("a", "run a", (base,)), Side("b", "run b", (cand,)), metrics=["decode_tokens_per_s"], **kw
    )
    (row,) = report.rows
    return row


def test_identical_code_in_other_processes_is_not_called_faster():
    row = _compare(_cell("r1", BASE_LEVELS), _cell("r2", CAND_LEVELS))
    assert (row.n_baseline, row.n_candidate) == (5, 5)  # invocations, not 25 iterations
    assert row.verdict == sig.INCONCLUSIVE and row.delta_low_pct < 0 < row.delta_high_pct
    assert not (row.p_value < 0.05)
    assert "over 5 vs 5 invocations" in row.sentence()


def test_a_real_slowdown_over_invocations_is_slower_and_flags_the_threshold():
    slow = [v * 0.7 for v in BASE_LEVELS]
    row = _compare(_cell("r1", BASE_LEVELS), _cell("r2", slow), fail_threshold_pct=5.0)
    assert row.verdict == sig.SLOWER and row.regression
    assert row.delta_pct == pytest.approx(-30.0, abs=0.1) and row.delta_high_pct < -5.0


def test_one_invocation_a_side_is_inconclusive_and_says_why():
    row = _compare(_cell("r1", BASE_LEVELS, with_invocations=False), _cell("r2", CAND_LEVELS, with_invocations=False))
    assert (row.n_baseline, row.n_candidate) == (1, 1)
    assert row.verdict == sig.INCONCLUSIVE and "too few for a 95% interval" in row.verdict_reason


def test_equivalent_when_the_interval_sits_inside_the_band():
    base = [[100.0 + 0.1 * k] for k in range(8)]
    cand = [[100.3 + 0.1 * k] for k in range(8)]
    change = run_change(base, cand, higher_is_better=True, equivalence=0.02)
    assert change.verdict == sig.EQUIVALENT and change.low < change.shift < change.high
