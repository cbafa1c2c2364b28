"""What a sweep's schedules and cell drivers share: how to open a route's host, the live hosts (an
interrupt kills them all at once), where finished cells go, and the order the cells ran in.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from winml_perf.measure.hosting.local import Host, new_host
from winml_perf.measure.progress import Progress
from winml_perf.model.result import CellResult
from winml_perf.model.spec import SessionSpec


@dataclass
class SweepContext:
    session_factory: Callable[[SessionSpec], Any]
    isolate: bool  # each route's session in a child process of its own
    sample_memory: bool
    progress: Progress
    rng: random.Random  # the seeded order of routes and cells
    explainer: Callable[..., dict[str, Any]] | None = None  # (cell, prompt_ids, timeout_s) -> explain section
    on_result: Callable[[CellResult], None] | None = None
    hosts: dict[str, Host] = field(default_factory=dict)  # route label -> its live host
    results: list[CellResult] = field(default_factory=list)  # kept only when there is no on_result
    order: list[dict[str, Any]] = field(default_factory=list)  # one entry per round, as the record's sweep.order
    meters: dict[str, Any] = field(default_factory=dict)  # route label -> its EnergyMeter (power/meters.py)
    meter_notes: dict[str, dict[str, Any]] = field(default_factory=dict)  # route label -> what it covers, or why none
    power_states: dict[str, dict[str, Any]] = field(default_factory=dict)  # route label -> its first cell's power state

    def open_host(self, label: str, spec: SessionSpec) -> Host:
        """A new host for the route ``label``, kept as its live host."""
        host = new_host(
            spec,
            self.session_factory,
            isolate=self.isolate,
            sample_memory=self.sample_memory,
            meter=self.meters.get(label),
        )
        self.hosts[label] = host
        return host

    def close_host(self, label: str) -> None:
        host = self.hosts.pop(label, None)
        if host is not None:
            host.close()

    def kill_host(self, label: str) -> None:
        """Stop the route's host now (an interrupt: its child does not finish its current request,
        nor get the exit grace period a normal close waits for)."""
        host = self.hosts.pop(label, None)
        if host is not None:
            getattr(host, "kill", host.close)()

    def deliver(self, result: CellResult) -> None:
        """A cell's final result: handed on at once to ``on_result``, else kept for the outcome (a
        sweep that hands them on does not keep them: its memory stays flat in the number of cells)."""
        if self.on_result is not None:
            self.on_result(result)
        else:
            self.results.append(result)

    def kill_hosts(self) -> None:
        """Stop every live host now (an interrupt: children do not finish their current request)."""
        for host in self.hosts.values():
            getattr(host, "kill", host.close)()

    def close_hosts(self) -> None:
        for host in self.hosts.values():
            host.close()
