"""One cell driver, two schedules: the rounds and the invocations schedules measure a cell through
the same CellDriver, so a scripted session gives the same samples, stop reason and failure through
both; host replies are frozen, picklable dataclasses."""

from __future__ import annotations

import dataclasses
import pickle
import random

import pytest

from tests.unit.fakes import fake_spec, open_fake_session
from winml_perf.measure import stopping
from winml_perf.measure.context import SweepContext
from winml_perf.measure.driver import CellDriver
from winml_perf.measure.hosting.local import LocalHost
from winml_perf.measure.hosting.replies import BatchReply, BeginReply, EndReply, ErrorReply, LoadReply
from winml_perf.measure.progress import NullProgress
from winml_perf.measure.schedule_invocations import InvocationsSchedule
from winml_perf.measure.schedule_rounds import RoundsSchedule
from winml_perf.model.metrics import metric_values
from winml_perf.model.result import CellResult
from winml_perf.model.spec import CellSpec, IterationPolicy, WarmupPolicy


def _cell(policy: IterationPolicy, **opts) -> CellSpec:
    return CellSpec(
        "config", fake_spec(**opts), prompt_tokens=8, max_new_tokens=4, warmup=WarmupPolicy(count=2), iterations=policy
    )


def _through(schedule: str, cell: CellSpec) -> tuple[CellResult, list]:
    """The cell measured by one schedule alone, with the drivers it made."""
    context = SweepContext(open_fake_session, False, False, NullProgress(), random.Random(0))
    if schedule == "rounds":
        runner = RoundsSchedule(context, [cell], None)
        drivers = [d for group in runner.groups.values() for d in group]
    else:
        runner = InvocationsSchedule(context, [cell])
        drivers = [d for route in runner.by_route.values() for d in route]
    try:
        runner.run()
    finally:
        context.close_hosts()
    (result,) = context.results
    return result, drivers


@pytest.mark.parametrize(
    "policy, opts, stop",
    [
        (IterationPolicy(iterations=5), {}, "iterations"),
        (
            IterationPolicy.until_ci(1.0, min_iterations=8, max_iterations=400),
            dict(jitter_pct=3.0, jitter_seed=7),
            "ci_target",
        ),
        (IterationPolicy.until_ci(0.01, min_iterations=6, max_iterations=12), dict(jitter_pct=40.0), "max_iterations"),
    ],
    ids=["fixed", "adaptive-target", "adaptive-cap"],
)
def test_both_schedules_drive_a_cell_through_the_same_driver_and_stopping_rule(policy, opts, stop):
    rounds, by_rounds = _through("rounds", _cell(policy, **opts))
    invocations, by_invocations = _through("invocations", _cell(policy, **opts))
    assert all(type(d) is CellDriver for d in by_rounds + by_invocations)
    assert rounds.stop_reason == invocations.stop_reason == stop
    primary = rounds.cell.primary_metric
    assert metric_values(rounds.samples, primary) == metric_values(invocations.samples, primary)
    assert len(rounds.warmup_samples) == len(invocations.warmup_samples) == 2
    assert [f["iterations"] for f in rounds.invocations] == [f["iterations"] for f in invocations.invocations]
    assert rounds.status == invocations.status == "ok"


def test_a_failure_is_the_same_failure_through_both_schedules():
    policy = IterationPolicy(iterations=4)  # warmup is calls 1-2: call 3 is the first measured iteration
    rounds, _ = _through("rounds", _cell(policy, raise_on_call=3))
    invocations, _ = _through("invocations", _cell(policy, raise_on_call=3))
    for r in (rounds, invocations):
        assert r.failure is not None and (r.failure.kind, r.failure.phase) == ("error", "measure")
        assert "scripted failure on call 3" in r.failure.message
        assert r.status == "failed" and r.stop_reason is None and not r.samples
        assert len(r.warmup_samples) == 2 and [f["iterations"] for f in r.invocations] == [0]


def test_the_fixed_rule_ends_each_invocation_at_its_iterations_and_stops_after_the_last():
    policy = IterationPolicy(iterations=3, invocations=2)
    assert stopping.decide(policy, [[1.0, 2.0]], 0.0, 0.0, 0.0).action == "iteration"
    assert stopping.decide(policy, [[1.0, 2.0, 3.0]], 0.0, 0.0, 0.0).action == "invocation"
    done = stopping.decide(policy, [[1.0, 2.0, 3.0]] * 2, 0.0, 0.0, 0.0)
    assert (done.action, done.reason) == ("stop", stopping.STOP_ITERATIONS)
    assert stopping.next_batch(policy, 1, 5) == 2  # a fixed count is per invocation


def test_host_replies_are_frozen_picklable_dataclasses():
    host = LocalHost(fake_spec(), open_fake_session, sample_memory=False)
    cell = _cell(IterationPolicy(iterations=2))
    try:
        replies = [host.load(), host.begin_cell(cell), host.run_batch(2, 0), host.end_cell()]
    finally:
        host.close()
    assert [type(r) for r in replies] == [LoadReply, BeginReply, BatchReply, EndReply]
    load, begin, batch, _ = replies
    assert begin.load == load and len(begin.warmup_samples) == 2 and len(begin.prompt_ids) == 8
    assert len(batch.samples) == 2 and batch.wall_s > 0
    error = ErrorReply("RuntimeError", "boom", traceback="...")
    for reply in [*replies, error]:
        assert pickle.loads(pickle.dumps(reply)) == reply
        with pytest.raises(dataclasses.FrozenInstanceError):
            reply.__setattr__(dataclasses.fields(reply)[0].name, None)
