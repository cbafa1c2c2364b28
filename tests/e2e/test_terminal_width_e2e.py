"""Every command's default output fits the terminal (issue 38): at COLUMNS=80 and 100 no line of
stdout or stderr is wider, over a store of several runs, routes, testbeds and long bundle names,
and real runs of a bundle whose folder name is long. One table writer does it
(support/text_table.py): headers on two lines, columns leave in each table's order and the line
under the table names them, a cell still too wide shortened with an ellipsis; prose is wrapped."""

from __future__ import annotations

import shutil

import pytest

from tests.conftest import BUNDLES, QUICK_RUN, TINY_FLAT, TINY_PIPELINE, run_winml
from tests.results_fakes import hex_id, make_cell
from winml_perf.results.store import open_store
from winml_perf.support.optional import importable
from winml_perf.support.text_table import fit, fitted, shorten

pytestmark = pytest.mark.e2e

LONG = "tiny-qwen2-pipeline-int4-block32-accuracy4-with-a-very-long-variant-name"
WIDTHS = (80, 100)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """Two nights of an interleaved sweep (three routes) on two testbeds, two long-named bundles."""
    path = tmp_path_factory.mktemp("width") / "s.db"
    with open_store(path) as s:
        for night in range(2):
            run = hex_id("night", night)
            index = 0
            for bundle in (f"bundles/{LONG}", f"bundles/{LONG}-and-another-one"):
                for testbed in ("tb-linux-x86_64-h200", "tb-windows-arm64-snapdragon-x-elite"):
                    for route, slower in (("config", 1.0), ("ep=cpu", 0.9 + 0.2 * night), ("ep=webgpu", 0.5)):
                        steps = [2.0 * slower + 0.01 * k for k in range(6)]
                        s.write_json_record(
                            make_cell(run, route=route, bundle=bundle, testbed=testbed, step_ms=steps,
                                      when=f"2025-01-0{night + 1}T02:00:00Z", index=index)
                        )  # fmt: skip
                        index += 1
    return path


@pytest.fixture(scope="module")
def long_bundle(tmp_path_factory):
    folder = tmp_path_factory.mktemp("long") / LONG
    shutil.copytree(TINY_PIPELINE, folder, ignore=shutil.ignore_patterns("_compiled"))
    return folder


def _fits(result, width: int, args) -> None:
    """No line wider than ``width``, but a command's value on stdout alone on its line (the derived
    bundle's path `bundle prepare` prints for `$(...)`: cut, it would no longer be the path)."""
    for stream, value_ok in ((result.stdout, True), (result.stderr, False)):
        wide = [line for line in stream.splitlines() if len(line) > width and not (value_ok and " " not in line)]
        assert not wide, (width, args, wide)


@pytest.mark.parametrize("width", WIDTHS)
def test_store_commands_fit_the_terminal(store, tmp_path, width):
    commands = [
        ("results", "list"),
        ("results", "show", "1"),
        ("results", "show", hex_id("night", 1)[:8]),
        ("compare", "routes"),
        ("compare", "runs", "previous", "latest"),
        ("compare", "runs", "previous", "latest", "--fail-on-regression", "5%"),
        ("results", "export", "--format", "bmf", "--testbed", "tb-linux-x86_64-h200", "-o", str(tmp_path / "b.json")),
        ("dashboard", "-o", str(tmp_path / "site")),
    ]
    for args in commands:
        result = run_winml(*args, "--store", str(store), env={"COLUMNS": str(width)})
        assert result.returncode in (0, 1), (args, result.stderr[-2000:])
        _fits(result, width, args)
    listed = run_winml("results", "list", "--store", str(store), env={"COLUMNS": str(width)})
    assert "left out to fit" in listed.stdout and "tiny-qwen2" in listed.stdout  # the rule, not a cut


@pytest.mark.parametrize("width", WIDTHS)
def test_bundle_and_device_commands_fit_the_terminal(long_bundle, width):
    for args in (
        ("devices",),
        ("bundle", "show", str(long_bundle)),
        ("bundle", "show", str(long_bundle), "--ep", "cpu", "--placement"),
        ("bundle", "prepare", str(long_bundle), "--ep", "cpu"),
    ):
        result = run_winml(*args, env={"COLUMNS": str(width)})
        assert result.returncode == 0, (args, result.stderr[-2000:])
        _fits(result, width, args)


@pytest.mark.parametrize("width", WIDTHS)
def test_perf_fits_the_terminal(long_bundle, tmp_path, width):
    args = ("perf", str(long_bundle), "--route", "config", "--route", "ep=cpu", *QUICK_RUN)
    result = run_winml(*[a for a in args if a != "-q"], env={"COLUMNS": str(width)})
    assert result.returncode == 0, result.stderr[-2000:]
    _fits(result, width, args)
    assert "| config" in result.stdout


@pytest.mark.parametrize("width", WIDTHS)
def test_serve_fits_the_terminal_and_names_the_columns_that_left(tmp_path, width):
    """winml serve's table of 14 columns (177 characters of headers alone) through the one writer:
    route, load and TTFT stay, the ITL percentiles leave first, and the line under it says so."""
    flat = tmp_path / f"{LONG}-flat"
    shutil.copytree(TINY_FLAT, flat, ignore=shutil.ignore_patterns("_compiled"))
    args = ("serve", str(flat), "--concurrency", "1,2", "--requests", "4", "--prompt-tokens", "8")
    args += ("--max-new-tokens", "4", "--invocations", "2", "--no-store")
    result = run_winml(*args, env={"COLUMNS": str(width)})
    assert result.returncode == 0, result.stderr[-2000:]
    _fits(result, width, args)
    out = result.stdout
    assert "route" in out and "load" in out and "TTFT" in out and "concurrency 2" in out
    table, _, note = out.partition("(left out to fit")
    assert "ITL p50/p90/p99 ms" not in table and "ITL p50/p90/p99 ms" in note


@pytest.mark.skipif(not importable("onnxruntime_qnn"), reason="needs onnxruntime-qnn (pip install -e '.[qnn]')")
def test_perf_and_tune_with_qnn_fit_the_terminal_and_say_nothing_of_libnative(tmp_path):
    npu = tmp_path / f"{LONG}-npu"
    shutil.copytree(BUNDLES / "tiny-qwen2-npu", npu, ignore=shutil.ignore_patterns("_compiled"))
    perf = ("perf", str(npu), "--route", "config", "--route", "ep=cpu", "--no-equivalence", *QUICK_RUN)
    tune = (
        *("tune", str(TINY_PIPELINE), "--eps", "cpu,qnn", "--no-equivalence", "--iterations", "2"),
        *("--max-new-tokens", "4", "--prompt-tokens", "16", "--max-rounds", "2", "--budget", "60s", "--no-store"),
    )
    for args in (perf, tune):
        result = run_winml(*args, env={"COLUMNS": "80"})
        assert result.returncode == 0, (args, result.stderr[-2000:])
        _fits(result, 80, args)
        assert "LIBNATIVE" not in result.stdout + result.stderr  # libQnnHtp's line, filtered where fd 1 is read
        if args is tune:  # each pruned route once: in the standings, not also as it was pruned
            assert sum("ep=qnn[context]" in line for line in (result.stdout + result.stderr).splitlines()) == 1


def test_the_writer_drops_in_order_names_what_left_and_shortens_last():
    heads = ["bundle", "route", "decode", "commit"]
    rows = [[LONG, "config", "123.4", "1111111aaaaaaa"], [LONG + "-b", "ep=cpu", "234.5", "2222222bbbbbbb"]]
    text, dropped = fit(heads, rows, 60, drop=["commit", "route"])
    assert dropped == ["commit", "route"] and max(map(len, text.splitlines())) <= 60
    assert "…" in text and "decode" in text  # the long name shortened, the kept columns kept
    wide, none = fit(heads, rows, 500)
    assert none == [] and LONG in wide and "…" not in wide
    assert "(left out to fit 60 columns: commit, route;" in fitted(heads, rows, 60, drop=["commit", "route"])
    assert shorten("placement: stage context: 0% of nodes", 20) == "placement: stage co…"
    assert shorten("abcdefghijklmnopqrstuvwxyz", 9) == "abcd…wxyz"
