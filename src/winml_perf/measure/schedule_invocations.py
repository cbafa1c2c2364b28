"""The invocations schedule: every route measured in several invocations, each a fresh session.

Kalibera & Jones ("Rigorous Benchmarking in Reasonable Time", ISMM 2013): what differs between
processes (memory layout, clocks, thread placement, the allocator's luck) does not shrink with
more iterations, so a route is measured in invocations x iterations. An invocation round starts
one invocation of every unfinished route, in a seeded shuffled order, so slow drift of the machine
hits the routes of a round alike and cancels in their ratio (pairs = the same round). One
invocation serves every unfinished cell (shape) of its route: load once, then for each cell its
warmup and iterations. Samples carry the invocation index, and ``round_index`` is the invocation
round, which pairs the routes' invocations in the store.

The cell driver (measure/driver.py) runs each cell's batches and applies the stopping rule: a
fixed policy's ``iterations`` per invocation, or measure/stopping.py's choice after every iteration
to stop, iterate, or end this invocation for a new one.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from winml_perf.measure.context import SweepContext
from winml_perf.measure.driver import CellDriver
from winml_perf.measure.hosting.local import Host
from winml_perf.measure.hosting.replies import LoadReply
from winml_perf.model.spec import CellSpec


class InvocationsSchedule:
    """Runs cells in invocation rounds (see module doc)."""

    def __init__(self, context: SweepContext, cells: Sequence[CellSpec]) -> None:
        self.context = context
        self.by_route: dict[str, list[CellDriver]] = {}
        for i, cell in enumerate(cells):
            driver = CellDriver(context, cell, i, fresh_session_per_invocation=True)
            self.by_route.setdefault(cell.route_label, []).append(driver)

    def run(self) -> None:
        k = 0
        while True:
            routes = [label for label, drivers in self.by_route.items() if any(not d.finished for d in drivers)]
            if not routes:
                return
            ran: list[str] = []
            for label in self.context.rng.sample(routes, len(routes)):
                ran += self._invocation(label, k)
            self.context.order.append({"group": 0, "round": k, "invocation": k, "order": ran})
            k += 1

    def _invocation(self, label: str, k: int) -> list[str]:
        """One invocation of a route: one load, then every unfinished cell of it; the keys it ran."""
        drivers = [d for d in self.by_route[label] if not d.finished]
        host = self.context.open_host(label, drivers[0].cell.session)  # live: an interrupt kills it at once
        t0 = time.perf_counter()
        ran = []
        try:
            load = self._load(host, drivers)
            if load is None:
                return []
            load_share_s = (time.perf_counter() - t0) / len(drivers)
            for d in drivers:
                if not host.alive:  # an earlier cell's crash took the process: a fresh one for this cell
                    host.close()
                    host = self.context.open_host(label, d.cell.session)
                    if self._load(host, [d]) is None:
                        continue
                ran.append(d.cell.key)
                self._serve(host, d, k, load, load_share_s)
        except KeyboardInterrupt:  # Ctrl-C: kill the child now, not after the exit grace period
            self.context.kill_host(label)
            raise
        finally:
            self.context.close_host(label)
        return ran

    def _load(self, host: Host, drivers: list[CellDriver]) -> LoadReply | None:
        """Load the host for these cells; when it fails, each of them fails with the same reason."""
        for d in drivers:
            if d.start():
                d.announce()
        first = drivers[0]
        load = first.load(host)
        if load is None:
            for d in drivers:
                d.state.failure = first.state.failure
                d.finish(self._memory_scope())
        return load

    def _serve(self, host: Host, d: CellDriver, k: int, load: LoadReply, load_share_s: float) -> None:
        """One invocation of one cell on a loaded host: warmup, batches until the rule ends it, end."""
        if d.begin(host, k, load, load_share_s):
            adaptive = d.cell.iterations.adaptive
            decision = d.measure(host, 1 if adaptive else d.progress_batch(), k)
            while decision is not None and decision.action == "iteration":
                decision = d.measure(host, 1 if adaptive else d.progress_batch(), k)
            if decision is not None:
                d.end(host)
        if d.finished:
            d.finish(self._memory_scope())

    def _memory_scope(self) -> str:
        if self.context.isolate:
            return "the child process of each invocation (largest peak)"
        return "the measuring process (one session per invocation)"
