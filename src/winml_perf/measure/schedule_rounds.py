"""The rounds schedule: each route's session stays loaded, and its cells run in rounds of batches.

A sweep's cells are grouped by shape (prompt tokens, new tokens, prompt). Within a group every
route runs in rounds: each round runs one batch of iterations of every unfinished cell, in an order
shuffled with the sweep's seeded RNG, so slow drift of the machine (thermal, background load) hits
all routes alike. Each route's session lives in one host (this process, or one child process with
isolation) that stays loaded across rounds and shapes; a crashed child is replaced for the next
cell, and a route that cannot load fails its cells without another try. The cell driver
(measure/driver.py) runs each batch and decides when a cell is done.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import replace

from winml_perf.measure.context import SweepContext
from winml_perf.measure.driver import CellDriver
from winml_perf.measure.hosting.local import Host
from winml_perf.model.result import CellFailure
from winml_perf.model.spec import CellSpec, IterationPolicy, PromptSpec


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


class RoundsSchedule:
    """Runs cells in rounds of batches (see module doc)."""

    def __init__(self, context: SweepContext, cells: Sequence[CellSpec], rounds: int | None) -> None:
        self.context = context
        self.rounds = rounds
        self.groups: dict[tuple[int | None, int | None, PromptSpec], list[CellDriver]] = {}
        for i, cell in enumerate(cells):
            driver = CellDriver(context, cell, i, fresh_session_per_invocation=False)
            self.groups.setdefault(cell.shape_key, []).append(driver)
        self._broken: dict[str, CellFailure] = {}  # route label -> why it could not load

    def run(self) -> None:
        for g, drivers in enumerate(self.groups.values()):
            self._run_group(g, drivers)

    def _run_group(self, g: int, drivers: list[CellDriver]) -> None:
        interleaved = len(drivers) > 1
        by_key = {d.cell.key: d for d in drivers}
        round_index = 0
        while True:
            active = [d.cell.key for d in drivers if not d.finished]
            if not active:
                return
            order = round_order(active, self.context.rng) if interleaved else active
            self.context.order.append({"group": g, "round": round_index, "order": order})
            for key in order:
                d = by_key[key]
                d.start()
                self._step(d, round_index, batch_size(d.cell.iterations, self.rounds, interleaved), interleaved)
                if d.finished:
                    self._finish(d)
            round_index += 1

    def _host(self, cell: CellSpec) -> Host:
        host = self.context.hosts.get(cell.route_label)
        return host if host is not None else self.context.open_host(cell.route_label, cell.session)

    def _step(self, d: CellDriver, round_index: int, batch: int, interleaved: bool) -> None:
        if d.state.begin is None and d.state.failure is None:
            self._begin(d, round_index)
        if d.finished:
            return
        rewarm = d.cell.warmup.per_batch if (interleaved and d.state.batches) else 0
        d.measure(self._host(d.cell), batch, round_index, rewarm)

    def _begin(self, d: CellDriver, round_index: int) -> None:
        label = d.cell.route_label
        broken = self._broken.get(label)
        if broken is not None:
            message = f"route {label} could not be loaded: {broken.message}"
            d.state.failure = replace(broken, message=message, phase="load")
            return
        host = self._host(d.cell)
        d.announce()
        if not host.alive and d.load(host) is None:
            assert d.state.failure is not None
            self._broken[label] = d.state.failure
            host.close()
            return
        d.begin(host, round_index, host.load_info)

    def _finish(self, d: CellDriver) -> None:
        host = self.context.hosts.get(d.cell.route_label)
        if d.state.failure is None and host is not None:
            d.end(host)
        d.finish(self._memory_scope())

    def _memory_scope(self) -> str:
        if self.context.isolate:
            return "child process of this route"
        routes = len(self.context.hosts)
        return "the measuring process" + (f", shared by {routes} loaded routes" if routes > 1 else "")
