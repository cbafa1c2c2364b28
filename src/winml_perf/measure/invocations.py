"""Invocation rounds: every route measured in several invocations, each a fresh process and model load.

Kalibera & Jones ("Rigorous Benchmarking in Reasonable Time", ISMM 2013): what differs between
processes (memory layout, clocks, thread placement, the allocator's luck) does not shrink with
more iterations, so a route is measured in invocations x iterations. An invocation round starts
one invocation of every unfinished route, in a seeded shuffled order, so slow drift of the machine
hits the routes of a round alike and cancels in their ratio (pairs = the same round). One
invocation serves every unfinished cell (shape) of its route: load once, then for each cell its
warmup and iterations. Samples carry the invocation index, and ``round_index`` is the invocation
round, which pairs the routes' invocations in the store.

Fixed policy: exactly ``invocations`` x ``iterations`` per cell. Adaptive: bench/stopping.py decides
after every iteration whether to stop, iterate, or end this invocation for a new one.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any

from winml_perf.measure import stopping
from winml_perf.measure.cell_progress import CellProgress, utc_now
from winml_perf.measure.hosts import LocalHost, cell_failure
from winml_perf.measure.isolate import ChildFailure, ChildHost
from winml_perf.model.metrics import metric_values
from winml_perf.model.result import CellResult, LoadPhases
from winml_perf.model.sample import IterationSample
from winml_perf.model.spec import CellSpec
from winml_perf.stats import sample_stats as stats


@dataclass
class _Cell(CellProgress):
    """A cell measured in invocation rounds: its samples kept per invocation."""

    invocations: list[list[IterationSample]] = field(default_factory=list)
    warmups: list[IterationSample] = field(default_factory=list)
    figures: list[dict[str, Any]] = field(default_factory=list)
    peak_rss: int | None = None

    def per_invocation(self) -> list[list[float]]:
        return [metric_values(inv, self.cell.primary_metric) for inv in self.invocations]

    @property
    def samples(self) -> list[IterationSample]:
        return [s for inv in self.invocations for s in inv]


class InvocationRounds:
    """Runs a SweepRunner's cells in invocation rounds (see module doc)."""

    def __init__(self, runner: Any) -> None:
        self.r = runner  # the SweepRunner: hosts' factory, rng, progress, results, order
        self.cells = [_Cell(c, i) for i, c in enumerate(runner.cells)]
        self.by_route: dict[str, list[_Cell]] = {}
        for c in self.cells:
            self.by_route.setdefault(c.cell.route_label, []).append(c)

    def _new_host(self, cell: CellSpec):
        cls = ChildHost if self.r.isolate else LocalHost
        return cls(cell.session, self.r.session_factory, sample_memory=self.r.sample_memory)

    def run(self) -> None:
        k = 0
        while True:
            routes = [label for label, cells in self.by_route.items() if any(not c.finished for c in cells)]
            if not routes:
                return
            order = self.r.rng.sample(routes, len(routes))
            ran: list[str] = []
            for label in order:
                ran += self._invocation(label, k)
            self.r._order.append({"group": 0, "round": k, "invocation": k, "order": ran})
            k += 1

    # -- one invocation of one route -------------------------------------------------------------
    def _invocation(self, label: str, k: int) -> list[str]:
        cells = [c for c in self.by_route[label] if not c.finished]
        host = self._new_host(cells[0].cell)
        self.r._hosts[label] = host  # so that an interrupt kills it at once
        t0 = time.perf_counter()
        ran = []
        try:
            load = self._load(host, cells)
            if load is None:
                return []
            load_share_s = (time.perf_counter() - t0) / len(cells)
            for c in cells:
                if not host.alive:  # an earlier cell's crash took the process: a fresh one for this cell
                    host.close()
                    host = self.r._hosts[label] = self._new_host(c.cell)
                    if self._load(host, [c]) is None:
                        continue
                ran.append(c.cell.key)
                c.spent_s += load_share_s
                self._serve(host, c, k, load, load_share_s)
        finally:
            host.close()
            self.r._hosts.pop(label, None)
        return ran

    def _load(self, host, cells: list[_Cell]) -> dict | None:
        first = cells[0]
        for c in cells:
            if not c.started_utc:
                c.started_utc, c.t0 = utc_now(), time.perf_counter()
                planned = (
                    None if c.cell.iterations.adaptive else c.cell.iterations.iterations * c.cell.iterations.invocations
                )
                self.r.progress.cell_started(c.cell.key, planned)
        try:
            return self.r._timed(first, host.load)
        except ChildFailure as exc:
            failure = cell_failure(exc, "load", first.cell)
            for c in cells:
                c.failure = failure
                self._finish(c)
            return None

    def _serve(self, host, c: _Cell, k: int, load: dict, load_share_s: float) -> None:
        policy = c.cell.iterations
        samples: list[IterationSample] = []
        c.invocations.append(samples)
        figure: dict[str, Any] = {
            "index": len(c.invocations) - 1,
            "round": k,
            "pid": getattr(host, "pid", None),
            "model_load_ms": load.get("model_load_ms"),
        }
        phase = "warmup"
        try:
            begin = self.r._timed(c, host.begin_cell, c.cell)
            c.begin = c.begin or begin
            warm = [replace(s, invocation=figure["index"]) for s in begin.get("warmup_samples") or ()]
            c.warmups += warm
            invocation_cost_s = load_share_s + float(begin.get("warmup_s") or 0.0)
            phase, spent_here, next_step = "measure", 0.0, None
            while True:
                n = 1 if policy.adaptive else policy.iterations
                reply = self.r._timed(c, host.run_batch, n, k, 0)
                samples += [replace(s, invocation=figure["index"]) for s in reply["samples"]]
                c.measure_s += reply["wall_s"]
                spent_here += reply["wall_s"]
                self._advanced(c)
                if not policy.adaptive:
                    break
                d = stopping.decide(policy, c.per_invocation(), c.spent_s, spent_here / len(samples), invocation_cost_s)
                if d.action == "stop":
                    c.stop = d.reason
                if d.action != "iteration":
                    next_step = d.reason
                    break
            phase = "end"
            c.end = self.r._timed(c, host.end_cell)
            rss = (c.end.get("memory") or {}).get("peak_rss_bytes")
            if isinstance(rss, int):
                c.peak_rss = max(rss, c.peak_rss or 0)
            figure.update(
                {
                    "warmup_iterations": len(warm),
                    "warmup_s": begin.get("warmup_s"),
                    "measure_s": spent_here,
                    "next": next_step,
                }
            )
        except ChildFailure as exc:
            c.failure = cell_failure(exc, phase, c.cell)
        figure["iterations"] = len(samples)
        figure["medians"] = {c.cell.primary_metric: stats.median(metric_values(samples, c.cell.primary_metric))}
        c.figures.append(figure)
        if not policy.adaptive and c.failure is None and len(c.invocations) >= policy.invocations:
            c.stop = stopping.STOP_ITERATIONS
        if c.finished:
            self._finish(c)

    def _advanced(self, c: _Cell) -> None:
        policy = c.cell.iterations
        planned = None if policy.adaptive else policy.iterations * policy.invocations
        values = c.values()
        self.r.progress.cell_advanced(c.cell.key, len(values), planned, c.cell.primary_metric, stats.median(values))

    # -- results ---------------------------------------------------------------------------------
    def _finish(self, c: _Cell) -> None:
        explain = self.r._explain(c) if c.failure is None and self.r.explainer is not None else {}
        b = c.begin or {}
        load = b.get("load") or {}
        phases = LoadPhases(
            plugin_registration_ms=load.get("plugin_registration_ms"),
            prepare_ms=c.cell.prepare_ms,
            compile_ms=c.cell.compile_ms,
            model_load_ms=load.get("model_load_ms"),
            first_generation_ms=b.get("first_generation_ms"),
            session_reused=False,
        )
        memory = dict(c.end.get("memory") or {})
        if memory:
            if c.peak_rss is not None:
                memory["peak_rss_bytes"] = c.peak_rss
            memory["scope"] = (
                "the child process of each invocation (largest peak)"
                if self.r.isolate
                else "the measuring process (one session per invocation)"
            )
        result = CellResult(
            cell=c.cell,
            status="failed" if c.failure else "ok",
            samples=tuple(c.samples),
            warmup_samples=tuple(c.warmups),
            load=phases,
            prompt_info=dict(b.get("prompt_info") or {}),
            stop_reason=c.stop,
            failure=c.failure,
            memory=memory,
            route_actual=dict(c.end.get("route_actual") or {}),
            started_utc=c.started_utc,
            finished_utc=utc_now(),
            wall_s=time.perf_counter() - c.t0,
            measure_s=c.measure_s,
            index=c.index,
            invocations=tuple(c.figures),
            invocation_kind="process" if self.r.isolate else "session",
            explain=dict(explain),
        )
        self.r._results.append(result)
        med = stats.median(c.values())
        summary = (
            c.failure.reason
            if c.failure
            else f"median {c.cell.primary_metric} {med:,.2f} ({len(c.invocations)} inv. x {len(c.samples)} it., {c.stop})"
        )
        self.r.progress.cell_finished(c.cell.key, result.status, summary)
        if self.r.on_result is not None:
            self.r.on_result(result)
