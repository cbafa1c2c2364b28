"""CellProgress: the per-cell state the cell driver keeps under both schedules (measure/schedule_rounds.py
rounds, measure/schedule_invocations.py invocation rounds)."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from tests.unit.fakes import fake_spec, open_fake_session
from winml_perf.measure.cell_progress import MIN_REMAINING_S, CellProgress, Invocation
from winml_perf.measure.context import SweepContext
from winml_perf.measure.progress import NullProgress
from winml_perf.measure.schedule_invocations import InvocationsSchedule
from winml_perf.measure.schedule_rounds import RoundsSchedule
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


def _context() -> SweepContext:
    return SweepContext(open_fake_session, False, False, NullProgress(), random.Random(0))


def _invocation(index: int, samples: list[IterationSample]) -> Invocation:
    return Invocation(index, index, None, None, samples=samples)


def test_a_cell_is_finished_once_it_stopped_or_failed():
    p = CellProgress(_cell(), 0)
    assert not p.finished
    assert replace(p, stop="iterations").finished
    assert replace(p, failure=CellFailure("crash", "child died", None)).finished


def test_the_remaining_budget_is_the_timeout_less_the_time_spent_and_never_zero():
    assert CellProgress(_cell(), 0).remaining_s() is None  # no --cell-timeout: no budget
    p = CellProgress(_cell(timeout_s=10.0), 0)
    assert p.remaining_s() == 10.0
    p.spent_s = 7.5
    assert p.remaining_s() == pytest.approx(2.5)
    p.spent_s = 12.0  # over budget: the next host call still gets a deadline, and times out at once
    assert p.remaining_s() == MIN_REMAINING_S


def test_both_schedules_keep_their_cells_as_cell_progress_with_the_same_values():
    cell = _cell()
    (in_rounds,) = next(iter(RoundsSchedule(_context(), [cell], None).groups.values()))
    (in_invocations,) = InvocationsSchedule(_context(), [cell]).by_route["config"]
    driver, by_invocation = in_rounds.state, in_invocations.state
    assert isinstance(driver, CellProgress) and isinstance(by_invocation, CellProgress)
    driver.invocations.append(_invocation(0, [_sample(2.0), _sample(4.0, 1), _sample(1.0, 1)]))
    by_invocation.invocations += [_invocation(0, [_sample(2.0)]), _invocation(1, [_sample(4.0, 1), _sample(1.0, 1)])]
    assert by_invocation.samples == driver.samples
    assert driver.values() == by_invocation.values() == [500.0, 250.0, 1000.0]  # decode tok/s of each iteration
    assert by_invocation.per_invocation() == [[500.0], [250.0, 1000.0]]


def test_values_follow_the_cells_primary_metric():
    one_token = CellProgress(_cell(new_tokens=1), 0)  # no decode step: the primary metric is e2e_ms
    one_token.invocations.append(
        _invocation(
            0, [IterationSample(latency_ms=3.0, prompt_tokens=8, new_tokens=1, prompt_ms=1.0, ttft_ms=3.0, e2e_ms=3.0)]
        )
    )
    assert one_token.cell.primary_metric == "e2e_ms" and one_token.values() == [3.0]
