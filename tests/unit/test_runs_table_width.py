"""`compare runs` fits the terminal (issue 28), as the perf table does: at COLUMNS=200 every column
and whole series labels; at COLUMNS=80 the shared series parts go above the table and columns
leave in the documented order (p first; series, metric, Δ %, verdict and gate stay), no cell cut."""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from tests.results_fakes import hex_id, make_cell
from winml_perf.cli import app
from winml_perf.results.store import open_store

HEADS = ("series", "metric", "inv base", "inv cand", "baseline", "candidate", "Δ %", "Δ 95% CI", "p", "verdict", "gate")
TESTBEDS = ("tb-linux", "tb-windows-arm64")


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    path = tmp_path_factory.mktemp("width") / "s.db"
    with open_store(path) as s:
        for night in range(2):
            slower = 1.0 + 0.3 * night  # the second night regresses: the gate column says so
            for route in ("config", "ep=cpu"):
                for testbed in TESTBEDS:
                    steps = [2.0 * slower + 0.01 * k for k in range(6)]
                    when = f"2025-01-0{night + 1}T02:00:00Z"
                    s.write_json_record(
                        make_cell(hex_id("w", night), route=route, testbed=testbed, when=when, step_ms=steps,
                                  bundle="bundles/tiny-qwen2-pipeline")
                    )  # fmt: skip
    return path


def _table(store, columns: int) -> list[str]:
    args = ["compare", "runs", "--store", str(store), "--baseline", "previous", "--candidate", "latest"]
    result = CliRunner().invoke(app, [*args, "--fail-on-regression", "5%"], env={"COLUMNS": str(columns)})
    assert result.exit_code == 1, result.output  # the regression is found whatever the width
    return result.stdout.splitlines()


def _rows(lines: list[str]) -> list[str]:
    """The table's data rows: those naming a route of the fixture."""
    return [line for line in lines if re.search(r"\b(config|ep=cpu)\b", line)]


def test_at_200_columns_every_column_and_whole_series_labels(store):
    lines = _table(store, 200)
    assert max(map(len, lines)) <= 200
    assert all(h in lines[0] for h in HEADS), lines[0]
    rows = _rows(lines)
    assert len(rows) == 2 * 2 * 5  # routes x testbeds x metrics
    assert all(re.match(r"tiny-qwen2-pipeline (config|ep=cpu) p16 n8 @tb-", r) for r in rows), rows
    assert not any("left out" in line for line in lines)


def test_at_80_columns_it_fits_and_drops_columns_in_the_documented_order(store):
    lines = _table(store, 80)
    assert max(map(len, lines)) <= 80, "\n".join(lines)
    assert lines[0] == "every series: tiny-qwen2-pipeline p16 n8"  # the parts all rows share, once
    head = lines[1]
    for kept in ("series", "metric", "Δ %", "verdict", "gate"):
        assert kept in head, head
    assert not re.search(r"\bp\b", head) and "inv cand" not in head  # the first to leave
    note = " ".join(lines[lines.index(next(x for x in lines if x.startswith("(left out"))) :])
    left = re.search(r"left out to fit 80 columns: ([^;]+);", note).group(1).split(", ")
    assert left[:2] == ["p", "inv cand"], left
    rows = _rows(lines)
    assert len(rows) == 20
    for row in rows:  # each cell whole: its route and testbed, its gate verdict
        assert re.match(r"(config|ep=cpu) @(tb-linux|tb-windows-arm64) ", row), row
    decode = [r for r in rows if " decode " in r]
    assert decode and all(r.rstrip().endswith("REGRESSION") for r in decode), decode
