"""The runner: warmup, measured iterations, stopping rules, interleaved multi-route sweeps.

A sweep's cells are grouped by shape (prompt tokens, new tokens, prompt). Within a group every
route runs in rounds: each round runs one batch of iterations of every unfinished route, in an
order shuffled with a seeded RNG, so slow drift of the machine (thermal, background load) hits all
routes alike. Each route's session lives in one host (this process, or one child process with
isolation) that stays loaded across rounds and shapes; a crashed child is replaced for the next
cell. Stopping rules and statistics run here, in the parent, between batches; never in the loop.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from winml_perf.measure.cell_progress import CellProgress, utc_now
from winml_perf.measure.hosts import LocalHost, cell_failure
from winml_perf.measure.isolate import ChildCrashed, ChildFailure, ChildHost, ChildTimeout
from winml_perf.measure.progress import NullProgress, Progress
from winml_perf.measure.stopping import STOP_CI_TARGET, STOP_ITERATIONS, STOP_MAX_ITERATIONS, STOP_MAX_TIME  # noqa: F401
from winml_perf.model.result import CellFailure, CellResult, LoadPhases
from winml_perf.model.sample import IterationSample
from winml_perf.model.spec import CellSpec, IterationPolicy
from winml_perf.session.factory import open_session
from winml_perf.stats import sample_stats as stats


# -- pure rules ------------------------------------------------------------------------------------
def stop_reason(policy: IterationPolicy, values: Sequence[float], measure_s: float) -> str | None:
    """Why to stop measuring a cell now, or None to go on.

    Fixed: after ``iterations``. Adaptive: once at least ``min_iterations`` are in and the 95 % CI
    of the median is within ±target_ci_pct; or at ``max_iterations``; or after ``max_time_s`` of
    measured time (whichever comes first)."""
    n = len(values)
    if not policy.adaptive:
        return STOP_ITERATIONS if n >= policy.iterations else None
    if n >= policy.min_iterations:
        half = stats.ci_half_width_pct(values)
        if not math.isnan(half) and half <= policy.target_ci_pct:
            return STOP_CI_TARGET
    if n >= policy.max_iterations:
        return STOP_MAX_ITERATIONS
    if measure_s >= policy.max_time_s:
        return STOP_MAX_TIME
    return None


def next_batch(policy: IterationPolicy, done: int, batch: int) -> int:
    """Iterations to run in the next batch (never past the fixed count or max_iterations)."""
    limit = policy.max_iterations if policy.adaptive else policy.iterations
    return max(0, min(batch, limit - done))


def batch_size(policy: IterationPolicy, rounds: int | None, interleaved: bool) -> int:
    """Iterations per round. One route alone: 1 (progress and stopping checked every iteration).
    Interleaved routes: spread the fixed count (or the adaptive minimum) over ``rounds`` rounds;
    rounds=None interleaves every single iteration."""
    if not interleaved or not rounds:
        return 1
    planned = policy.min_iterations if policy.adaptive else policy.iterations
    return max(1, math.ceil(planned / rounds))


def round_order(keys: Sequence[str], rng: random.Random) -> list[str]:
    """This round's order of the unfinished cells: a seeded shuffle."""
    order = list(keys)
    rng.shuffle(order)
    return order


# -- one cell's progress through a sweep ----------------------------------------------------------
@dataclass
class _Driver(CellProgress):
    """A cell measured in rounds of batches in one loaded session of its route."""

    samples: list[IterationSample] = field(default_factory=list)
    batches: int = 0
    explain: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SweepOutcome:
    results: tuple[CellResult, ...]
    order: tuple[dict, ...]  # one entry per round: {"group": g, "round": r, "order": [cell keys]}


class SweepRunner:
    """Runs cells (see module doc). ``on_result`` gets each CellResult as soon as it is final."""

    def __init__(
        self,
        cells: Sequence[CellSpec],
        session_factory: Callable = open_session,
        *,
        rounds: int | None = None,
        seed: int = 0,
        isolate: bool = False,
        progress: Progress | None = None,
        on_result: Callable[[CellResult], None] | None = None,
        sample_memory: bool = True,
        explainer: Callable[..., dict] | None = None,
    ) -> None:
        self.cells = list(cells)
        self.session_factory = session_factory
        self.rounds = rounds
        self.rng = random.Random(seed)
        self.isolate = isolate
        self.progress = progress or NullProgress()
        self.on_result = on_result
        self.sample_memory = sample_memory
        self.explainer = explainer  # (cell, prompt_ids, timeout_s) -> explain section, after the measured iterations
        self._hosts: dict[str, Any] = {}
        self._broken: dict[str, CellFailure] = {}
        self._results: list[CellResult] = []
        self._order: list[dict] = []

    # -- hosts ---------------------------------------------------------------------------------
    def _host(self, cell: CellSpec):
        host = self._hosts.get(cell.route_label)
        if host is None:
            cls = ChildHost if self.isolate else LocalHost
            host = cls(cell.session, self.session_factory, sample_memory=self.sample_memory)
            self._hosts[cell.route_label] = host
        return host

    def _timed(self, d: CellProgress, fn, *args):
        """Call a host method with the cell's remaining time budget, charging the time to the cell."""
        t0 = time.perf_counter()
        try:
            out = fn(*args, timeout_s=d.remaining_s())
        finally:
            d.spent_s += time.perf_counter() - t0
        limit = d.cell.cell_timeout_s
        if not self.isolate and limit is not None and d.spent_s > limit:
            raise ChildTimeout(
                f"cell took {d.spent_s:.1f} s, past --cell-timeout {limit:g} s",
                remedy="in-process runs cannot be interrupted; use --isolate to kill a hung cell",
            )
        return out

    # -- one step of one cell ------------------------------------------------------------------
    def _begin(self, d: _Driver) -> None:
        label = d.cell.route_label
        if label in self._broken:
            b = self._broken[label]
            d.failure = CellFailure(
                b.kind,
                f"route {label} could not be loaded: {b.message}",
                b.remedy,
                b.error_type,
                b.exit_code,
                b.signal,
                b.signal_name,
                b.traceback,
                "load",
            )
            return
        host = self._host(d.cell)
        self.progress.cell_started(d.cell.key, None if d.cell.iterations.adaptive else d.cell.iterations.iterations)
        if not host.alive:
            try:
                self._timed(d, host.load)
            except ChildFailure as exc:
                d.failure = cell_failure(exc, "load", d.cell)
                self._broken[label] = d.failure
                host.close()
                return
        try:
            d.begin = self._timed(d, host.begin_cell, d.cell)
        except ChildFailure as exc:
            d.failure = cell_failure(exc, "warmup", d.cell)

    def _step(self, d: _Driver, round_index: int, batch: int, interleaved: bool) -> None:
        if d.begin is None and d.failure is None:
            self._begin(d)
        if d.failure is not None:
            return
        n = next_batch(d.cell.iterations, len(d.samples), batch)
        rewarm = d.cell.warmup.per_batch if (interleaved and d.batches) else 0
        try:
            reply = self._timed(d, self._host(d.cell).run_batch, n, round_index, rewarm)
        except ChildFailure as exc:
            d.failure = cell_failure(exc, "measure", d.cell)
            return
        d.samples.extend(reply["samples"])
        d.measure_s += reply["wall_s"]
        d.batches += 1
        values = d.values()
        d.stop = stop_reason(d.cell.iterations, values, d.measure_s)
        planned = None if d.cell.iterations.adaptive else d.cell.iterations.iterations
        self.progress.cell_advanced(d.cell.key, len(d.samples), planned, d.cell.primary_metric, stats.median(values))

    def _finish(self, d: _Driver) -> CellResult:
        host = self._hosts.get(d.cell.route_label)
        if d.failure is None and host is not None:
            try:
                d.end = self._timed(d, host.end_cell)
            except ChildFailure as exc:
                d.failure = cell_failure(exc, "end", d.cell)
        if d.failure is None and self.explainer is not None:
            d.explain = self._explain(d)
        result = self._result(d)
        self._results.append(result)
        med = stats.median(d.values())
        summary = (
            d.failure.reason
            if d.failure
            else f"median {d.cell.primary_metric} {med:,.2f} ({len(d.samples)} it., {d.stop})"
        )
        self.progress.cell_finished(d.cell.key, result.status, summary)
        if self.on_result is not None:
            self.on_result(result)
        return result

    def _result(self, d: _Driver) -> CellResult:
        b = d.begin or {}
        load = b.get("load") or {}
        primary = d.cell.primary_metric
        figure = {
            "index": 0,
            "round": 0,
            "pid": getattr(self._hosts.get(d.cell.route_label), "pid", None),
            "model_load_ms": load.get("model_load_ms"),
            "warmup_iterations": len(b.get("warmup_samples") or ()),
            "warmup_s": b.get("warmup_s"),
            "measure_s": d.measure_s,
            "iterations": len(d.samples),
            "medians": {primary: stats.median(d.values())},
            "next": None,
        }
        phases = LoadPhases(
            plugin_registration_ms=load.get("plugin_registration_ms"),
            prepare_ms=d.cell.prepare_ms,
            compile_ms=d.cell.compile_ms,
            model_load_ms=load.get("model_load_ms"),
            first_generation_ms=b.get("first_generation_ms"),
            session_reused=bool(b.get("session_reused", False)),
        )
        return CellResult(
            cell=d.cell,
            status="failed" if d.failure else "ok",
            samples=tuple(d.samples),
            warmup_samples=tuple(b.get("warmup_samples") or ()),
            load=phases,
            prompt_info=dict(b.get("prompt_info") or {}),
            stop_reason=d.stop,
            failure=d.failure,
            memory=self._memory(d),
            route_actual=dict(d.end.get("route_actual") or {}),
            started_utc=d.started_utc,
            finished_utc=utc_now(),
            wall_s=time.perf_counter() - d.t0,
            measure_s=d.measure_s,
            index=d.index,
            explain=dict(d.explain),
            invocations=(figure,) if d.begin is not None else (),
            invocation_kind="process" if self.isolate else "session",
        )

    def _explain(self, d: CellProgress) -> dict:
        try:
            return self.explainer(d.cell, (d.begin or {}).get("prompt_ids") or [], d.cell.cell_timeout_s)
        except Exception as exc:  # an explanation is an extra: its failure never fails the measured cell
            return {"error": f"{type(exc).__name__}: {exc}"}

    def _memory(self, d: _Driver) -> dict:
        memory = dict(d.end.get("memory") or {})
        if memory:
            routes = len(self._hosts)
            memory["scope"] = (
                "child process of this route"
                if self.isolate
                else "the measuring process" + (f", shared by {routes} loaded routes" if routes > 1 else "")
            )
        return memory

    # -- groups and rounds ---------------------------------------------------------------------
    def _groups(self) -> list[list[_Driver]]:
        groups: dict[tuple, list[_Driver]] = {}
        for i, cell in enumerate(self.cells):
            groups.setdefault(cell.shape_key, []).append(_Driver(cell, i))
        return list(groups.values())

    def _run_group(self, g: int, drivers: list[_Driver]) -> None:
        interleaved = len(drivers) > 1
        by_key = {d.cell.key: d for d in drivers}
        round_index = 0
        while True:
            active = [d.cell.key for d in drivers if not d.finished]
            if not active:
                return
            order = round_order(active, self.rng) if interleaved else active
            self._order.append({"group": g, "round": round_index, "order": order})
            for key in order:
                d = by_key[key]
                if not d.started_utc:
                    d.started_utc, d.t0 = utc_now(), time.perf_counter()
                self._step(d, round_index, batch_size(d.cell.iterations, self.rounds, interleaved), interleaved)
                if d.finished:
                    self._finish(d)
            round_index += 1

    @property
    def order_so_far(self) -> tuple[dict, ...]:
        return tuple(self._order)

    def run(self) -> SweepOutcome:
        self.progress.sweep_started(len(self.cells))
        try:
            if any(c.iterations.multi_invocation for c in self.cells):
                from winml_perf.measure.invocations import InvocationRounds

                InvocationRounds(self).run()
            else:
                for g, drivers in enumerate(self._groups()):
                    self._run_group(g, drivers)
        except KeyboardInterrupt:  # a signal: the children stop now, not after their current batch
            for host in self._hosts.values():
                getattr(host, "kill", host.close)()
            raise
        finally:
            for host in self._hosts.values():
                host.close()
            self.progress.sweep_finished()
        results = tuple(sorted(self._results, key=lambda r: r.index))
        return SweepOutcome(results, tuple(self._order))


def run_cell(
    cell: CellSpec,
    session_factory: Callable = open_session,
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
