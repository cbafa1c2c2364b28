"""`--check-outputs` says so when a route's outputs match config's (issue 28); a difference stays
a warning of its own."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests.unit.fakes import FAKE_ENV, fake_spec, open_fake_session
from winml_perf.measure.sweep import CellExtras, RunFacts, run_sweep
from winml_perf.model.route import OutputCheck, Route
from winml_perf.model.spec import IterationPolicy, RouteSpec, expand_sweep
from winml_perf.publish.render import render_run


@pytest.fixture(scope="module")
def run():
    routes = [
        RouteSpec("config", fake_spec(), route=Route("config", "config", "config")),
        RouteSpec("ep=cpu", fake_spec(), route=Route("ep=cpu", "ep=cpu", "ep=cpu")),
    ]
    cells = expand_sweep(routes, [8], [4], iterations=IterationPolicy(iterations=2))
    return run_sweep(
        cells,
        open_fake_session,
        isolate=False,
        facts=RunFacts(environment=FAKE_ENV, argv=["perf"]),
        extras=CellExtras(roofline=False),
    )


def _with_check(run, first_difference):
    check = OutputCheck(
        8, 4, 0, (1, 2, 3, 4), (1, 2, 3, 4) if first_difference is None else (1, 9, 3, 4), first_difference
    )
    cells = tuple(
        replace(c, route=replace(c.route, output_check=check)) if c.route.label == "ep=cpu" else c for c in run.cells
    )
    return replace(run, cells=cells)


def test_matching_outputs_print_a_line_on_screen_and_beside_machine_formats(run):
    same = _with_check(run, None)
    expected = "outputs of ep=cpu match config: the same 4 greedy tokens for a 8-token prompt (seed 0)"
    assert expected in render_run(same, width=10_000)
    assert expected in render_run(same, warnings_only=True)  # stderr beside --format json


def test_no_match_line_without_a_check_or_when_outputs_differ(run):
    assert "match config" not in render_run(run, width=10_000)
    assert "match config" not in render_run(_with_check(run, 1), width=10_000)
