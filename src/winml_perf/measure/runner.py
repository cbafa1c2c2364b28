"""The runner: measures a sweep's cells with warmup, measured iterations and one stopping rule.

Two schedules run the cells over one cell driver (measure/driver.py): in-process rounds of batches
in one loaded session per route (measure/schedule_rounds.py), or, when a cell's policy spans
several invocations, a fresh session per invocation (measure/schedule_invocations.py). Each route's
session lives in a host: this process, or a child process of its own with isolation. Stopping rules
and statistics run here, in the parent, between batches; never in the timing loop.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from winml_perf.measure.context import SweepContext
from winml_perf.measure.hosting.isolate import ChildCrashed, ChildTimeout
from winml_perf.measure.progress import NullProgress, Progress
from winml_perf.measure.schedule_invocations import InvocationsSchedule
from winml_perf.measure.schedule_rounds import RoundsSchedule
from winml_perf.model.result import CellResult
from winml_perf.model.spec import CellSpec
from winml_perf.session.factory import open_session


@dataclass(frozen=True)
class SweepOutcome:
    results: tuple[CellResult, ...]  # empty when each went to on_result instead
    order: tuple[dict[str, Any], ...]  # one entry per round: {"group": g, "round": r, "order": [cell keys]}


class SweepRunner:
    """Runs cells (see module doc). ``on_result`` gets each CellResult as soon as it is final (the
    outcome then keeps none of them); without it, the outcome has them all."""

    def __init__(
        self,
        cells: Sequence[CellSpec],
        session_factory: Callable[..., Any] = open_session,
        *,
        rounds: int | None = None,
        seed: int = 0,
        isolate: bool = False,
        progress: Progress | None = None,
        on_result: Callable[[CellResult], None] | None = None,
        sample_memory: bool = True,
        explainer: Callable[..., dict[str, Any]] | None = None,
        meters: tuple[dict[str, Any], dict[str, Any]] = ({}, {}),
    ) -> None:
        """``meters``: (route label -> EnergyMeter, route label -> its note), see measure/sweep.py."""
        self.cells = list(cells)
        self.rounds = rounds
        self.context = SweepContext(
            session_factory=session_factory,
            isolate=isolate,
            sample_memory=sample_memory,
            progress=progress or NullProgress(),
            rng=random.Random(seed),
            explainer=explainer,  # (cell, prompt_ids, timeout_s) -> explain section, after the measured iterations
            on_result=on_result,
            meters=dict(meters[0]),
            meter_notes=dict(meters[1]),
        )

    @property
    def order_so_far(self) -> tuple[dict[str, Any], ...]:
        return tuple(self.context.order)

    def run(self) -> SweepOutcome:
        context = self.context
        context.progress.sweep_started(len(self.cells))
        try:
            if any(c.iterations.multi_invocation for c in self.cells):
                InvocationsSchedule(context, self.cells).run()
            else:
                RoundsSchedule(context, self.cells, self.rounds).run()
        except KeyboardInterrupt:  # a signal: the children stop now, not after their current batch
            context.kill_hosts()
            raise
        finally:
            context.close_hosts()
            context.progress.sweep_finished()
        results = tuple(sorted(context.results, key=lambda r: r.index))
        return SweepOutcome(results, tuple(context.order))


def run_cell(
    cell: CellSpec,
    session_factory: Callable[..., Any] = open_session,
    progress: Progress | None = None,
    *,
    isolate: bool = False,
    sample_memory: bool = True,
) -> CellResult:
    """Measure one cell: load, warm up, measure until its iteration policy says stop."""
    outcome = SweepRunner(
        [cell], session_factory, isolate=isolate, progress=progress, sample_memory=sample_memory
    ).run()
    return outcome.results[0]


def crashed(result: CellResult) -> bool:
    return result.failure is not None and result.failure.kind in (ChildCrashed.kind, ChildTimeout.kind)
