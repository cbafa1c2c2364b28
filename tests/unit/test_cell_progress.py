"""CellProgress: the per-cell state both runners keep (bench/runner.py rounds, bench/invocations.py
invocation rounds)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests.unit.fakes import fake_spec
from winml_perf.measure import invocations, runner
from winml_perf.measure.cell_progress import MIN_REMAINING_S, CellProgress
from winml_perf.model.result import CellFailure
from winml_perf.model.route import Route
from winml_perf.model.sample import IterationSample
from winml_perf.model.spec import IterationPolicy, RouteSpec, expand_sweep


def _cell(timeout_s=None, new_tokens=4):
    spec = RouteSpec("config", fake_spec(), route=Route("config", "config", "config"))
    return expand_sweep([spec], [8], [new_tokens], iterations=IterationPolicy(iterations=3), cell_timeout_s=timeout_s)[
        0
    ]


def _sample(step_ms: float, invocation: int = 0) -> IterationSample:
    return IterationSample(
        latency_ms=10.0,
        prompt_tokens=8,
        new_tokens=4,
        prompt_ms=1.0,
        ttft_ms=2.0,
        decode_step_ms=(step_ms,) * 3,
        e2e_ms=10.0,
        invocation=invocation,
    )


def test_a_cell_is_finished_once_it_stopped_or_failed():
    p = runner._Driver(_cell(), 0)
    assert not p.finished
    assert replace(p, stop="iterations").finished
    assert replace(p, failure=CellFailure("crash", "child died", None)).finished


def test_the_remaining_budget_is_the_timeout_less_the_time_spent_and_never_zero():
    assert runner._Driver(_cell(), 0).remaining_s() is None  # no --cell-timeout: no budget
    p = runner._Driver(_cell(timeout_s=10.0), 0)
    assert p.remaining_s() == 10.0
    p.spent_s = 7.5
    assert p.remaining_s() == pytest.approx(2.5)
    p.spent_s = 12.0  # over budget: the next host call still gets a deadline, and times out at once
    assert p.remaining_s() == MIN_REMAINING_S


def test_both_runners_keep_their_cells_as_cell_progress_with_the_same_values():
    cell = _cell()
    driver, by_invocation = runner._Driver(cell, 0), invocations._Cell(cell, 0)
    assert isinstance(driver, CellProgress) and isinstance(by_invocation, CellProgress)
    driver.samples += [_sample(2.0), _sample(4.0, 1), _sample(1.0, 1)]
    by_invocation.invocations += [[_sample(2.0)], [_sample(4.0, 1), _sample(1.0, 1)]]
    assert by_invocation.samples == driver.samples
    assert driver.values() == by_invocation.values() == [500.0, 250.0, 1000.0]  # decode tok/s of each iteration
    assert by_invocation.per_invocation() == [[500.0], [250.0, 1000.0]]


def test_values_follow_the_cells_primary_metric():
    one_token = runner._Driver(_cell(new_tokens=1), 0)  # no decode step: the primary metric is e2e_ms
    one_token.samples.append(
        IterationSample(latency_ms=3.0, prompt_tokens=8, new_tokens=1, prompt_ms=1.0, ttft_ms=3.0, e2e_ms=3.0)
    )
    assert one_token.cell.primary_metric == "e2e_ms" and one_token.values() == [3.0]
