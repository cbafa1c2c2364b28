"""Issue 35, labels that keep what ran and a "vs config" from one run, for real: QNN's HTP emulator
(onnxruntime-qnn on x86_64) runs tiny-qwen2 as `ep=qnn (emulated)`, and with --compile as
`ep=qnn (compiled) (emulated)`. Each place a route is shown keeps both marks (a test per place), the
compiled and the uncompiled route are two series, and the overview's ratio to config is the one
`compare routes` gives for the run that measured the route beside config.

The store: run A measures config and ep=qnn side by side; run B measures ep=qnn alone (newer, no
config in it); run C measures ep=qnn --compile alone."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import re
import shutil

import pytest

from tests.conftest import TINY_FLAT, run_winml

pytestmark = [pytest.mark.e2e, pytest.mark.qnn]

LEAN = ("--invocations", "2", "--prompt-tokens", "16", "--max-new-tokens", "4", "--warmup", "1", "--iterations", "2")
EMULATED, COMPILED = "ep=qnn (emulated)", "ep=qnn (compiled) (emulated)"


@pytest.fixture(scope="module")
def labelled(tmp_path_factory):
    if importlib.util.find_spec("onnxruntime_qnn") is None:
        if os.environ.get("CI"):
            pytest.fail("the qnn tests must run in CI, but onnxruntime-qnn is not installed")
        pytest.skip("onnxruntime-qnn is not installed (pip install -e '.[qnn]')")
    root = tmp_path_factory.mktemp("labels")
    bundle = root / "tiny-qwen2"
    shutil.copytree(TINY_FLAT, bundle, ignore=shutil.ignore_patterns("_compiled"))
    db = root / "s.db"
    a = run_winml("perf", bundle, "--route", "config", "--route", "ep=qnn", *LEAN, "--store", db, "--format", "json")
    assert a.returncode == 0, a.stderr[-3000:]
    b = run_winml("perf", bundle, "--route", "ep=qnn", *LEAN, "--store", db, "-q")
    assert b.returncode == 0, b.stderr[-3000:]
    c = run_winml("perf", bundle, "--route", "ep=qnn", "--compile", *LEAN, "--store", db)
    assert c.returncode == 0, c.stderr[-3000:]
    return {"db": db, "run_a": a.json()["run_id"], "perf_compiled": c.stdout, "root": root}


def _list(db):
    return run_winml("results", "list", "--store", db, "--format", "json").json()


def test_perf_table(labelled):
    assert COMPILED in labelled["perf_compiled"], labelled["perf_compiled"]


def test_compiled_and_uncompiled_are_two_series_with_two_labels(labelled):
    rows = _list(labelled["db"])
    by_route = {}
    for r in rows:
        by_route.setdefault(r["route"], set()).add(r["run_id"])
    assert set(by_route) == {"config", EMULATED, COMPILED}, by_route
    assert len(by_route[EMULATED]) == 2 and len(by_route[COMPILED]) == 1
    bare = run_winml("results", "list", "--store", labelled["db"], "--route", "ep=qnn", "--format", "json").json()
    assert {r["route"] for r in bare} == {EMULATED, COMPILED}  # --route names the route without its marks


def test_results_list_table(labelled):
    table = run_winml("results", "list", "--store", labelled["db"])
    assert table.returncode == 0 and EMULATED in table.stdout and COMPILED in table.stdout, table.stdout


def test_results_show(labelled):
    (rid,) = [r["id"] for r in _list(labelled["db"]) if r["route"] == COMPILED]
    shown = run_winml("results", "show", str(rid), "--store", labelled["db"])
    assert shown.returncode == 0 and f"route {COMPILED}" in shown.stdout, shown.stdout


@pytest.mark.parametrize("fmt", ["csv", "json", "jsonl", "markdown", "bmf", "gab-bigger"])
def test_every_export(labelled, fmt):
    out = run_winml("results", "export", "--store", labelled["db"], "--format", fmt)
    assert out.returncode == 0, out.stderr[-2000:]
    assert EMULATED in out.stdout and COMPILED in out.stdout, out.stdout[:3000]


def test_compare_routes(labelled):
    out = run_winml("compare", "routes", "--store", labelled["db"], "--run", labelled["run_a"])
    assert out.returncode == 0, out.stderr[-2000:]
    assert re.search(rf"^{re.escape(EMULATED)} decode ", out.stdout, re.M), out.stdout


def test_compare_runs(labelled):
    out = run_winml(
        "compare", "runs", "--store", labelled["db"], "--baseline", f"run:{labelled['run_a']}", "--candidate", "latest",
        "--route", "ep=qnn", "--force", "--metric", "decode_tokens_per_s", env={"COLUMNS": "250"},
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    assert EMULATED in out.stdout + out.stderr and COMPILED in out.stdout + out.stderr, out.stdout + out.stderr


def test_dashboard_and_its_ratio_to_config_from_one_run(labelled, tmp_path):
    db, run_a = labelled["db"], labelled["run_a"]
    site = tmp_path / "site"
    done = run_winml("dashboard", "--store", db, "-o", site)
    assert done.returncode == 0, done.stderr[-2000:]
    html = (site / "index.html").read_text()
    rows = {re.search(r'data-route="([^"]+)"', r).group(1): r for r in re.findall(r"<tr data-testbed=.*?</tr>", html)}
    assert set(rows) == {"config", EMULATED, COMPILED}, list(rows)
    page = next((site / "pages").rglob("*.html")).read_text()
    assert f"{EMULATED} · p16 n4" in page and f"{COMPILED} · p16 n4" in page
    # the emulated route's newest record (run B) has no config beside it: its ratio comes from run A
    routes = run_winml(
        "compare", "routes", "--store", db, "--run", run_a, "--metric", "decode_tokens_per_s", "--format", "json"
    )
    (qnn,) = [c for c in routes.json()["comparisons"] if c["route"] == EMULATED]
    cell = re.search(r'data-run="([0-9a-f]+)" data-ratio="([^"]+)">×([\d.]+)', rows[EMULATED])
    assert cell is not None and cell.group(1) == run_a and f"run {run_a[:8]}" in rows[EMULATED], rows[EMULATED]
    assert math.isclose(float(cell.group(2)), qnn["speedup"], rel_tol=1e-12), (cell.group(2), qnn)
    assert 'data-ratio="' not in rows[COMPILED]  # never measured beside config: no ratio across runs


def test_json_run_record_keeps_what_ran(labelled):
    """The stored record keeps route.emulated and route.compile (what the marks are made from)."""
    (rid,) = [r["id"] for r in _list(labelled["db"]) if r["route"] == COMPILED]
    record = json.loads(run_winml("results", "show", str(rid), "--store", labelled["db"], "--format", "json").stdout)
    assert record["route"]["emulated"] and any(c["status"] == "compiled" for c in record["route"]["compile"])
