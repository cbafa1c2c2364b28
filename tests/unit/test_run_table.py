"""The perf table (publish/run_table.py, issue 28): it fits the terminal, names the CI's metric,
shows a spread per metric, and reads as the exports do (iterations, metric-named CSV headers)."""

from __future__ import annotations

import csv
import io

import pytest

from tests.unit.fakes import FAKE_ENV, fake_spec, open_fake_session
from winml_perf.measure.sweep import CellExtras, RunFacts, run_sweep
from winml_perf.model.route import Route
from winml_perf.model.spec import IterationPolicy, RouteSpec, expand_sweep
from winml_perf.publish.render import render_run, run_text


@pytest.fixture(scope="module")
def run():
    routes = [RouteSpec("config", fake_spec(jitter_pct=3.0), route=Route("config", "config", "config"))]
    cells = expand_sweep(routes, [8], [4], iterations=IterationPolicy(iterations=4, invocations=3))
    return run_sweep(
        cells,
        open_fake_session,
        isolate=False,
        facts=RunFacts(environment=FAKE_ENV, argv=["perf"]),
        extras=CellExtras(roofline=False),
    )


def _table_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("|")]


def test_the_table_fits_a_narrow_terminal_and_says_what_it_left_out(run):
    wide = render_run(run, width=10_000)
    assert max(map(len, _table_lines(wide))) > 80  # the whole table does not fit 80 columns
    narrow = render_run(run, width=80)
    assert max(map(len, _table_lines(narrow))) <= 80
    assert "(left out to fit 80 columns: " in narrow and "p99" in narrow.split("left out")[1]
    head = _table_lines(narrow)[:2]  # headers wrapped onto two lines before any column leaves
    assert "| decode " in head[0] and "| tok/s " in head[1] and "| route " in head[0]
    assert "decode CI95" in head[0] and "(3 proc)" in head[1]  # the primary metric's interval stays longest


def test_the_ci_column_names_its_metric_and_each_metric_shows_its_spread(run):
    text = render_run(run, width=10_000)
    head = _table_lines(text)[0]
    assert "decode CI95 (3 proc)" in head
    row = _table_lines(text)[2]
    assert row.count("σ") >= 4  # TTFT, prompt, decode, e2e: each median with its σ


def test_exports_name_metrics_and_count_iterations_as_the_screen_does(run):
    rows = list(csv.DictReader(io.StringIO(run_text(run, "csv"))))
    (row,) = rows
    for name in ("ttft_ms", "decode_tokens_per_s", "decode_tokens_per_s_sd", "e2e_ms", "itl_ms_p50"):
        assert name in row, name
    assert "TTFT ms" not in row and "decode_tokens_per_s_ci95_half_width_pct" in row
    assert (row["invocations"], row["iterations_per_invocation"], row["iterations"]) == ("3", "4", "12")
    assert "3x4" in render_run(run, width=10_000)
    assert "decode CI95 (3 proc)" in run_text(run, "markdown")  # markdown keeps every column, as on screen
