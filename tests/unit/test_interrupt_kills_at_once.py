"""Ctrl-C during an invocation kills its child at once (issue 28): the invocation's cleanup used to
close the host gracefully first, which waits EXIT_GRACE_S (5 s) for a child that ignores SIGINT and
is busy with its batch. Asserted on the mechanism: which of kill / close reaches the host first."""

from __future__ import annotations

import pytest

from tests.unit.fakes import FAKE_ENV, fake_spec, open_fake_session
from winml_perf.measure.context import SweepContext
from winml_perf.measure.sweep import CellExtras, RunFacts, run_sweep
from winml_perf.model.route import Route
from winml_perf.model.spec import IterationPolicy, RouteSpec, expand_sweep


class InterruptedHost:
    """Wraps a host; its first batch raises KeyboardInterrupt (a Ctrl-C mid-batch); calls recorded."""

    def __init__(self, inner, calls: list[str]) -> None:
        self._inner, self.calls = inner, calls

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def run_batch(self, *args, **kwargs):
        raise KeyboardInterrupt

    def kill(self) -> None:
        self.calls.append("kill")
        self._inner.close()

    def close(self) -> None:
        self.calls.append("close")
        self._inner.close()


def test_an_interrupted_invocation_kills_its_host_before_any_graceful_close(monkeypatch):
    calls: list[str] = []
    opened = SweepContext.open_host

    def open_spied(self, label, spec):
        host = InterruptedHost(opened(self, label, spec), calls)
        self.hosts[label] = host
        return host

    monkeypatch.setattr(SweepContext, "open_host", open_spied)
    routes = [RouteSpec("config", fake_spec(), route=Route("config", "config", "config"))]
    cells = expand_sweep(routes, [8], [4], iterations=IterationPolicy(iterations=2, invocations=2))
    with pytest.raises(KeyboardInterrupt):
        run_sweep(
            cells,
            open_fake_session,
            isolate=False,
            facts=RunFacts(environment=FAKE_ENV, argv=["perf"]),
            extras=CellExtras(roofline=False),
        )
    assert calls and calls[0] == "kill", calls
