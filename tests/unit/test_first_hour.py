"""Issue 38's small conventions and quiet stderr: `compare runs A B` takes the two runs
positionally; the gate's many 'insufficient' rows are one summary line; `winml --help | head -1`
exits 0; a folder of bundles is named with its bundles and how to pick one."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from tests.conftest import BUNDLES
from tests.results_fakes import hex_id, make_cell
from winml_perf.cli import app
from winml_perf.results.store import open_store


@pytest.fixture(scope="module")
def two_nights(tmp_path_factory):
    """Two runs of 2 routes x 3 testbeds: a gate over one earlier run is insufficient for every row."""
    path = tmp_path_factory.mktemp("nights") / "s.db"
    with open_store(path) as s:
        for night in range(2):
            for i, (route, testbed) in enumerate((r, t) for r in ("config", "ep=cpu") for t in ("a", "b", "c")):
                s.write_json_record(
                    make_cell(hex_id("n", night), route=route, testbed=f"tb-{testbed}", index=i,
                              when=f"2025-01-0{night + 1}T02:00:00Z")
                )  # fmt: skip
    return path


def _runs(store, *args: str):
    return CliRunner().invoke(app, ["compare", "runs", "--store", str(store), *args], env={"COLUMNS": "200"})


def _main(capsys, *args: str) -> tuple[int, str]:
    """`winml ARGS` through cli.main (its one place that turns an error into an exit code)."""
    from winml_perf import cli

    with pytest.raises(SystemExit) as ended:
        cli.main(list(args))
    return int(ended.value.code or 0), " ".join(capsys.readouterr().err.split())


def test_compare_runs_takes_the_two_runs_positionally(two_nights):
    positional = _runs(two_nights, "previous", "latest")
    named = _runs(two_nights, "--baseline", "previous", "--candidate", "latest")
    assert positional.exit_code == 0, positional.output
    assert positional.stdout == named.stdout and "ep=cpu" in positional.stdout
    base, cand = hex_id("n", 0)[:8], hex_id("n", 1)[:8]
    assert _runs(two_nights, base, cand).stdout == named.stdout  # run id prefixes, as hyperfine/asv users type
    assert _runs(two_nights, "previous").stdout == named.stdout  # CANDIDATE defaults to latest


@pytest.mark.parametrize(
    "args, words",
    [
        ((), "needs a baseline"),
        (("previous", "--baseline", "previous"), "named twice"),
        (("previous", "latest", "--candidate", "latest"), "named twice"),
        (("a", "b", "c"), "takes two runs"),
    ],
)
def test_compare_runs_refuses_ambiguous_or_missing_runs_with_exit_2(two_nights, args, words, capsys):
    code, err = _main(capsys, "compare", "runs", "--store", str(two_nights), *args)
    assert code == 2 and words in err, err
    assert "winml compare runs BASELINE" in err or "one way" in err


def test_the_gates_insufficient_rows_are_one_summary_line(two_nights):
    from dataclasses import replace

    from winml_perf.commands.compare_store import compare_stored_runs
    from winml_perf.compare.gate import explanation_lines
    from winml_perf.stats.series.changepoint import INSUFFICIENT

    with open_store(two_nights, create=False) as s:
        report = compare_stored_runs(s, "previous", "latest", fail_threshold_pct=5.0)
    assert len(report.rows) == 30
    reasons = ("no earlier run to compare the newest with", "1 runs (< 4) and no interval for the newest run")
    rows = tuple(replace(r, gate=INSUFFICIENT, gate_reason=reasons[i % 3 == 0]) for i, r in enumerate(report.rows))
    lines = [line for line in explanation_lines(replace(report, rows=rows)) if line.startswith("gate: ")]
    assert lines == [
        f"gate: insufficient for 30 metric(s) of 6 series: {reasons[0]} (and 1 other reason(s); --format json has each)"
    ]  # one line, the most common reason first; the table's gate column keeps each row's verdict
    unchanged = [line for line in explanation_lines(report) if line.startswith("gate: ")]
    assert unchanged == ["gate: unchanged for 24 metric(s) of 6 series"], unchanged  # 6 counted once (inverses)


def _into_a_closed_pipe(*args: str) -> subprocess.CompletedProcess:
    read, write = os.pipe()
    os.close(read)
    try:
        return subprocess.run(
            [sys.executable, "-m", "winml_perf", *args], stdout=write, stderr=subprocess.PIPE, text=True, timeout=120
        )
    finally:
        os.close(write)


@pytest.mark.parametrize("args", [("--help",), ("perf", "--help"), ("compare", "runs", "--help")])
def test_help_into_head_exits_0(args):
    result = _into_a_closed_pipe(*args)
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr


def test_a_folder_of_bundles_names_them_and_how_to_pick_one(capsys):
    for command in (("perf",), ("bundle", "show"), ("tune",)):
        code, err = _main(capsys, *command, str(BUNDLES))
        assert code == 2, (command, err)
        assert "is a folder of 4 bundle(s), not a bundle: tiny-qwen2, tiny-qwen2-npu" in err, err
        assert f"pass one of them, e.g. {BUNDLES / 'tiny-qwen2'}" in err


@pytest.mark.parametrize("flag", ["--concurrency", "--request-rate"])
def test_perf_with_a_load_points_to_winml_serve(capsys, flag):
    """Issue 40's load axis is winml serve's: perf with --concurrency/--request-rate says so, exit 2."""
    code, err = _main(capsys, "perf", str(BUNDLES / "tiny-qwen2"), flag, "4", "--route", "config")
    assert code == 2
    assert "are winml serve's" in err and f"winml serve {BUNDLES / 'tiny-qwen2'} --concurrency 1,4" in err
