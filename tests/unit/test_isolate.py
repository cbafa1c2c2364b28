"""Isolation: each route in a spawned child that stays loaded; crashes, exits and hangs become
failed cells with their reason, and the sweep goes on."""

from __future__ import annotations

import dataclasses
import os
import signal

import pytest

from tests.unit.fakes import FAKE_ENV, fake_spec, open_fake_session, read_log
from winml_perf.ep.child import describe_exit
from winml_perf.measure.hosting.isolate import ChildCrashed, ChildHost
from winml_perf.measure.sweep import CellExtras, RunFacts, run_sweep
from winml_perf.model.spec import CellSpec, IterationPolicy, RouteSpec, WarmupPolicy, expand_sweep
from winml_perf.record.validation import validate_record


def sweep(cells, **kw):
    return run_sweep(
        cells,
        open_fake_session,
        isolate=True,
        **kw,
        facts=RunFacts(environment=FAKE_ENV),
        extras=CellExtras(roofline=False, sample_memory=False),
    )


def by_key(rr):
    return {c.cell_key: c for c in rr.cells}


def test_a_killed_child_fails_its_cell_and_the_sweep_continues(tmp_path):
    log = tmp_path / "calls.log"
    routes = [
        RouteSpec("config", fake_spec(path="a", label="config", log_path=str(log))),
        # warmup is call 1; the child SIGKILLs itself on call 3 (second measured iteration), once
        RouteSpec(
            "ep=cpu", fake_spec(path="b", label="ep=cpu", kill_on_call=3, kill_once_path=str(tmp_path / "killed"))
        ),
    ]
    cells = expand_sweep(routes, [8, 16], [4], warmup=WarmupPolicy(count=1), iterations=IterationPolicy(iterations=3))
    seen = []
    rr = sweep(cells, seed=1, on_cell_done=seen.append)
    cells_ = by_key(rr)
    dead = cells_["ep=cpu|p8|n4"]
    assert dead.status == "failed"
    assert dead.failure.kind == "crash" and dead.failure.phase == "measure"
    assert dead.failure.signal == signal.SIGKILL and dead.failure.signal_name == "SIGKILL"
    assert "SIGKILL" in dead.failure.message
    assert len(dead.samples.iterations) == 1  # the iteration before the crash is kept
    # the sweep went on: the other route, and the same route's next cell in a fresh child
    assert cells_["config|p8|n4"].status == "ok" and cells_["config|p16|n4"].status == "ok"
    revived = cells_["ep=cpu|p16|n4"]
    assert revived.status == "ok" and revived.load.session_reused is False
    assert cells_["config|p16|n4"].load.session_reused is True  # its child stayed loaded
    assert len(seen) == 4
    for c in rr.cells:
        validate_record(c.to_dict())
    validate_record(rr.to_dict())


def test_an_exit_code_is_recorded():
    c = CellSpec(
        "config",
        fake_spec(exit_on_call=2, exit_code=7),
        prompt_tokens=4,
        max_new_tokens=2,
        iterations=IterationPolicy(iterations=2),
    )
    rr = sweep([c])
    f = rr.cells[0].failure
    assert f.kind == "crash" and f.exit_code == 7 and f.signal is None
    assert "exited with code 7" in f.message


def test_a_hung_cell_is_killed_at_the_cell_timeout_and_the_next_cell_runs():
    routes = [RouteSpec("hang", fake_spec(hang_on_call=2)), RouteSpec("fine", fake_spec())]
    cells = expand_sweep(routes, [4], [2], iterations=IterationPolicy(iterations=2), cell_timeout_s=1.5)
    # the budget covers spawning and loading the child: the cell that must finish gets a generous one,
    # so a slow start on a loaded machine cannot time it out
    cells = [c if c.route_label == "hang" else dataclasses.replace(c, cell_timeout_s=120.0) for c in cells]
    rr = sweep(cells, seed=0)
    hung, fine = by_key(rr)["hang|p4|n2"], by_key(rr)["fine|p4|n2"]
    assert hung.failure.kind == "timeout" and hung.failure.signal_name == "SIGKILL"
    assert "1.5 s" in hung.failure.message
    assert fine.status == "ok" and len(fine.samples.iterations) == 2


def test_an_exception_in_the_child_leaves_it_loaded_for_the_next_cell():
    routes = [RouteSpec("config", fake_spec(raise_on_call=2))]
    rr = sweep(expand_sweep(routes, [4, 8], [2], iterations=IterationPolicy(iterations=2)))
    first, second = rr.cells
    assert first.failure.kind == "error" and "scripted failure on call 2" in first.failure.message
    assert first.failure.traceback and "RuntimeError" in first.failure.traceback
    assert second.status == "ok" and second.load.session_reused is True


def test_isolated_interleaving_runs_in_the_recorded_order_without_reloading(tmp_path):
    log = tmp_path / "calls.log"
    routes = [RouteSpec(n, fake_spec(path=n, label=n, log_path=str(log))) for n in ("a", "b", "c")]
    cells = expand_sweep(routes, [4], [2], warmup=WarmupPolicy(count=0), iterations=IterationPolicy(iterations=4))
    rr = sweep(cells, seed=11)
    orders = [o["order"] for o in rr.sweep["order"]]
    calls = read_log(log)
    assert [label for label, _ in calls] == [k.split("|")[0] for o in orders for k in o]
    # one child per route: its call counter runs 1..4 without restarting (no reload between rounds)
    for name in ("a", "b", "c"):
        assert [n for label, n in calls if label == name] == [1, 2, 3, 4]
    assert all(c.status == "ok" for c in rr.cells)
    assert len({tuple(o) for o in orders}) > 1


def test_child_host_reports_a_crash_during_load():
    host = ChildHost(fake_spec(kill_on_call=1), open_fake_session, sample_memory=False)
    try:
        host.load(timeout_s=30)
        cell = CellSpec("config", host.spec, prompt_tokens=2, max_new_tokens=2, warmup=WarmupPolicy(count=1))
        with pytest.raises(ChildCrashed) as info:
            host.begin_cell(cell, timeout_s=30)
        assert info.value.details["signal"] == signal.SIGKILL
        assert not host.alive
    finally:
        host.close()


def test_describe_exit():
    assert describe_exit(-9)["signal_name"] == "SIGKILL"
    assert describe_exit(3) == {"exit_code": 3, "signal": None, "signal_name": None, "text": "exited with code 3"}
    assert os.getpid() > 0
