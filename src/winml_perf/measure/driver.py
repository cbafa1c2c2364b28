"""The cell driver: one cell's measurement, whichever schedule runs it.

It times every host call against the cell's --cell-timeout, opens the cell's invocations and runs
their warmup and batches, applies the one stopping rule (measure/stopping.py) after every batch,
reports progress, and at the end builds the cell's CellResult and hands it over. The two schedules
only say which cell runs when, on which host: schedule_rounds.py (rounds of batches in one loaded
session per route) and schedule_invocations.py (a fresh session per invocation).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any, TypeVar

from winml_perf.measure import stopping
from winml_perf.measure.cell_progress import CellProgress, Invocation, utc_now
from winml_perf.measure.context import SweepContext
from winml_perf.measure.energy import cell as energy
from winml_perf.measure.hosting.isolate import ChildFailure, ChildTimeout
from winml_perf.measure.hosting.local import Host, cell_failure
from winml_perf.measure.hosting.replies import LoadReply
from winml_perf.model.cell_status import CellStatus
from winml_perf.model.result import CellResult, LoadPhases
from winml_perf.model.spec import CellSpec
from winml_perf.stats import sample_stats as stats
from winml_perf.support.human_numbers import human

#: Seconds of iterations per batch of a fixed count in a fresh invocation: how often progress moves.
PROGRESS_INTERVAL_S = 0.5

Reply = TypeVar("Reply")


class CellDriver:
    """Measures one cell (see module doc); ``state`` is what it measured so far.

    ``fresh_session_per_invocation``: the schedule loads a session for each invocation of the cell.
    Then loads and warmups count against --max-time (they are part of what more precision costs), no
    session counts as reused, and each invocation's figures say why it ended."""

    def __init__(
        self, context: SweepContext, cell: CellSpec, index: int, *, fresh_session_per_invocation: bool
    ) -> None:
        self.context = context
        self.state = CellProgress(cell, index)
        self.fresh_session_per_invocation = fresh_session_per_invocation

    @property
    def cell(self) -> CellSpec:
        return self.state.cell

    @property
    def finished(self) -> bool:
        return self.state.finished

    # -- time and failures -----------------------------------------------------------------------
    def start(self) -> bool:
        """Stamp the cell's start; True the first time only."""
        if self.state.started_utc:
            return False
        self.state.started_utc, self.state.t0 = utc_now(), time.perf_counter()
        return True

    def announce(self) -> None:
        """Show the cell in the progress display."""
        policy = self.cell.iterations
        planned = None if policy.adaptive or policy.duration_s else policy.iterations * policy.invocations
        self.context.progress.cell_started(self.cell.key, planned)

    def call(self, fn: Callable[..., Reply], *args: Any) -> Reply:
        """Call a host method with the cell's remaining time budget, charging the time to the cell."""
        t0 = time.perf_counter()
        try:
            out = fn(*args, timeout_s=self.state.remaining_s())
        finally:
            self.state.spent_s += time.perf_counter() - t0
        limit = self.cell.cell_timeout_s
        if not self.context.isolate and limit is not None and self.state.spent_s > limit:
            raise ChildTimeout(
                f"cell took {self.state.spent_s:.1f} s, past --cell-timeout {limit:g} s",
                remedy="in-process runs cannot be interrupted; use --isolate to kill a hung cell",
            )
        return out

    def fail(self, exc: ChildFailure, phase: str) -> None:
        self.state.failure = cell_failure(exc, phase, self.cell)

    # -- the steps -------------------------------------------------------------------------------
    def load(self, host: Host) -> LoadReply | None:
        """Load the host's session for this cell; None when that failed (the cell failed at load)."""
        try:
            return self.call(host.load)
        except ChildFailure as exc:
            self.fail(exc, "load")
            return None

    def begin(self, host: Host, round_index: int, load: LoadReply | None, load_share_s: float = 0.0) -> bool:
        """Open a new invocation on a loaded host and run the cell's warmup there; False when it failed.
        ``load_share_s``: this cell's share of a load that served several cells, charged to it here."""
        self.state.spent_s += load_share_s
        inv = Invocation(
            len(self.state.invocations),
            round_index,
            getattr(host, "pid", None),
            None if load is None else load.model_load_ms,
        )
        self.state.invocations.append(inv)
        try:
            reply = self.call(host.begin_cell, self.cell)
        except ChildFailure as exc:
            self.fail(exc, "warmup")
            return False
        self.state.begin = self.state.begin or reply
        if not self.state.idle_marks:
            self.state.idle_marks = reply.idle_marks
        if not self.state.power_state:
            self.state.power_state = energy.power_state_of(
                self.cell, self.context.meter_notes.get(self.cell.route_label)
            )
        self.state.warmups += [replace(s, invocation=inv.index) for s in reply.warmup_samples]
        inv.warmed, inv.warmup_iterations, inv.warmup_s = True, len(reply.warmup_samples), reply.warmup_s
        inv.cost_s = load_share_s + reply.warmup_s
        return True

    def measure(self, host: Host, batch: int, round_index: int, rewarm: int = 0) -> stopping.Decision | None:
        """Run a batch of up to ``batch`` iterations (after ``rewarm`` discarded ones) in the current
        invocation, then apply the stopping rule; None when the batch failed."""
        inv = self.state.invocations[-1]
        policy = self.cell.iterations
        done = sum(len(i.samples) for i in self.state.invocations) if policy.adaptive else len(inv.samples)
        try:
            reply = self.call(host.run_batch, stopping.next_batch(policy, done, batch), round_index, rewarm)
        except ChildFailure as exc:
            self.fail(exc, "measure")
            return None
        self.state.add(inv, [replace(s, invocation=inv.index) for s in reply.samples])
        self.state.energy_readings += energy.readings_of_batch(reply.samples, reply.energy_marks, inv.index)
        if self.cell.iterations.duration_s is not None:
            self.state.timeline.append(energy.timeline_point(self.state.measure_s, reply, getattr(host, "pid", None)))
        inv.measure_s += reply.wall_s
        self.state.measure_s += reply.wall_s
        self.state.batches += 1
        planned = None if policy.adaptive or policy.duration_s else policy.iterations * policy.invocations
        self.context.progress.cell_advanced(  # running figures: O(1) per batch, never a pass over the samples
            self.cell.key,
            sum(map(len, self.state.per_invocation())),
            planned,
            self.cell.primary_metric,
            self.state.running_median(),
        )
        decision = self._decide(inv)
        if decision.action == "stop":
            self.state.stop = decision.reason
        if decision.action != "iteration" and policy.adaptive and self.fresh_session_per_invocation:
            inv.next = decision.reason  # why this invocation is the last, or why another one follows
        return decision

    def progress_batch(self) -> int:
        """The next batch of a fixed count: about PROGRESS_INTERVAL_S of iterations (the first one
        alone), so the progress display moves within an invocation instead of at its end."""
        inv, total = self.state.invocations[-1], self.cell.iterations.iterations
        if not inv.samples or inv.measure_s <= 0:
            return 1
        per_iteration_s = inv.measure_s / len(inv.samples)
        return max(1, min(total, int(PROGRESS_INTERVAL_S / per_iteration_s)))

    def _decide(self, inv: Invocation) -> stopping.Decision:
        clock_s = self.state.spent_s if self.fresh_session_per_invocation else self.state.measure_s
        return stopping.decide(
            self.cell.iterations, self.state.per_invocation(), clock_s, inv.measure_s / len(inv.samples), inv.cost_s
        )

    def end(self, host: Host) -> bool:
        """End the cell on its host: memory figures, the EPs that ran; False when that failed."""
        try:
            self.state.end = self.call(host.end_cell)
        except ChildFailure as exc:
            self.fail(exc, "end")
            return False
        rss, model = (self.state.end.memory.get(k) for k in ("peak_rss_bytes", "model_rss_bytes"))
        if isinstance(rss, int):
            self.state.peak_rss = max(rss, self.state.peak_rss or 0)
        if isinstance(model, int):
            self.state.peak_model_rss = max(model, self.state.peak_model_rss or 0)
        return True

    def finish(self, memory_scope: str) -> CellResult:
        """Explain the cell (when asked), build its result, show it and hand it over.
        ``memory_scope`` says what the memory figures cover, as the schedule ran the cell."""
        explain = self._explain() if self.state.failure is None and self.context.explainer is not None else {}
        result = self._result(memory_scope, explain)
        self.context.progress.cell_finished(self.cell.key, result.status, self._summary())
        self.context.deliver(result)
        self.state.release()  # the schedule keeps its drivers to the end of the sweep: not their samples
        return result

    # -- the result --------------------------------------------------------------------------------
    def _result(self, memory_scope: str, explain: dict[str, Any]) -> CellResult:
        s, begin = self.state, self.state.begin
        load = begin.load if begin is not None else LoadReply()
        phases = LoadPhases(
            plugin_registration_ms=load.plugin_registration_ms,
            prepare_ms=self.cell.prepare_ms,
            compile_ms=self.cell.compile_ms,
            model_load_ms=load.model_load_ms,
            first_generation_ms=None if begin is None else begin.first_generation_ms,
            session_reused=begin is not None and begin.session_reused and not self.fresh_session_per_invocation,
        )
        return CellResult(
            cell=self.cell,
            status=CellStatus.FAILED if s.failure else CellStatus.OK,
            samples=tuple(s.samples),
            warmup_samples=tuple(s.warmups),
            load=phases,
            prompt_info=dict(begin.prompt_info) if begin is not None else {},
            stop_reason=s.stop,
            failure=s.failure,
            memory=self._memory(memory_scope),
            route_actual=dict(s.end.route_actual) if s.end is not None else {},
            started_utc=s.started_utc,
            finished_utc=utc_now(),
            wall_s=time.perf_counter() - s.t0,
            measure_s=s.measure_s,
            index=s.index,
            explain=dict(explain),
            invocations=tuple(inv.figure(self.cell.primary_metric) for inv in s.invocations),
            invocation_kind="process" if self.context.isolate else "session",
            energy=energy.cell_section(self.context, self.cell.route_label, s),
            timeline=tuple(s.timeline),
            output_text=s.end.output_text if s.end is not None else None,
        )

    def _memory(self, scope: str) -> dict[str, Any]:
        memory = dict(self.state.end.memory) if self.state.end is not None else {}
        if memory:
            if self.state.peak_rss is not None:
                memory["peak_rss_bytes"] = self.state.peak_rss
            if self.state.peak_model_rss is not None:
                memory["model_rss_bytes"] = self.state.peak_model_rss
            memory["scope"] = scope
        return memory

    def _explain(self) -> dict[str, Any]:
        explainer, begin = self.context.explainer, self.state.begin
        assert explainer is not None
        prompt_ids = list(begin.prompt_ids) if begin is not None else []
        try:
            return explainer(self.cell, prompt_ids, self.cell.cell_timeout_s)
        except Exception as exc:  # an explanation is an extra: its failure never fails the measured cell
            return {"error": f"{type(exc).__name__}: {exc}"}

    def _summary(self) -> str:
        """The line the progress display keeps for the finished cell."""
        s = self.state
        if s.failure is not None:
            return s.failure.reason
        n, k = len(s.samples), len(s.invocations)
        counts = f"{n} it."
        if self.fresh_session_per_invocation:  # as the table writes it: 5x400 is 5 inv. x 400 it.
            counts = f"{k} inv. x {n // k} it." if k and n % k == 0 else f"{n} it. in {k} inv."
        return f"median {self.cell.primary_metric} {human(stats.median(s.values()))} ({counts}, {s.stop})"
