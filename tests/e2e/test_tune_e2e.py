"""`winml tune` against the real runtime on the tiny pipeline bundle, CPU and WebGPU (over lavapipe):
pruning by device crossings, a real race in fresh processes with every cell stored, the verdict, the
emitted bundle measured again by `winml perf`, and Ctrl-C keeping the standings (exit 130).

Kept cheap: --max-device-crossings 0 leaves two routes (config, ep=webgpu), --no-equivalence skips
the teacher-forced pass (tests/unit/test_tune_race.py covers that pruning), 2 iterations of 8 tokens.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys

import pytest

from tests.conftest import TINY_PIPELINE, run_winml
from tests.e2e.test_webgpu_e2e import webgpu_env  # noqa: F401  (the session fixture: lavapipe's env)

pytestmark = [pytest.mark.e2e, pytest.mark.webgpu]

CHEAP = (
    "--eps", "cpu,webgpu", "--max-device-crossings", "0", "--no-equivalence",
    "--iterations", "2", "--warmup", "1", "--max-new-tokens", "8", "--prompt-tokens", "16",
)  # fmt: skip


@pytest.fixture(scope="module")
def tuned(webgpu_env, tmp_path_factory):  # noqa: F811
    out = tmp_path_factory.mktemp("tune")
    result = run_winml(
        "tune", TINY_PIPELINE, *CHEAP, "--max-rounds", "3", "--budget", "300s", "--seed", "3",
        "--store", out / "store.db", "--report", out / "report.json", "--emit", out / "best", "--format", "json",
        env=webgpu_env, timeout=600,
    )  # fmt: skip
    return result, out


def test_tune_prunes_races_and_names_config_over_a_far_slower_webgpu(tuned):
    result, out = tuned
    assert result.returncode == 0, result.stderr[-3000:]
    doc = result.json()
    pruned = {p["route"]: p for p in doc["pruned"]}
    assert len(pruned) == 14 and all(p["check"] == "crossings" for p in pruned.values())
    assert all("device crossings > --max-device-crossings 0" in p["reason"] for p in pruned.values())
    assert "2 route(s) to race, 14 pruned (each with its reason in the standings)" in result.stderr  # said once
    rows = {s["route"]: s for s in doc["standings"] if s["status"] != "pruned"}
    assert set(rows) == {"config", "ep=webgpu"}
    webgpu = rows["ep=webgpu"]
    assert webgpu["status"] == "dropped" and webgpu["why"].startswith("worse than config")
    assert webgpu["high"] < 1.0  # its interval lies wholly below config's speed
    assert doc["verdict"]["kind"] == "ship config" and doc["verdict"]["winner"] == "config"
    assert json.loads((out / "report.json").read_text())["verdict"] == doc["verdict"]


def test_every_measured_cell_is_in_the_store(tuned):
    result, out = tuned
    doc = result.json()
    with sqlite3.connect(out / "store.db") as db:
        routes = [r for (r,) in db.execute("SELECT route FROM records")]
    assert len(routes) == 2 * doc["rounds"] and set(routes) == {"config", "ep=webgpu"}


def test_the_emitted_bundle_runs_with_winml_perf(tuned, webgpu_env):  # noqa: F811
    _, out = tuned
    best = out / "best"
    assert json.loads((best / "tune.json").read_text())["route"] == "config"
    assert not (best / "_compiled").exists()
    assert os.path.samefile(best / "transformer.onnx.data", TINY_PIPELINE / "transformer.onnx.data")
    perf = run_winml(
        "perf", best, "--invocations", "1", "--iterations", "2", "--max-new-tokens", "8", "--prompt-tokens", "16",
        "--no-store", "--format", "json", "-q", env=webgpu_env, timeout=300,
    )  # fmt: skip
    assert perf.returncode == 0, perf.stderr[-3000:]
    [cell] = perf.json()["cells"]
    assert cell["status"] == "ok" and cell["route"]["label"] == "config"


def test_ctrl_c_keeps_the_rounds_and_prints_the_standings(webgpu_env, tmp_path):  # noqa: F811
    proc = subprocess.Popen(
        [sys.executable, "-m", "winml_perf", "tune", str(TINY_PIPELINE), *CHEAP, "--max-rounds", "50",
         "--budget", "600s", "--no-store", "--format", "json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1", **webgpu_env},
    )  # fmt: skip
    assert proc.stderr is not None
    seen = []
    for line in proc.stderr:  # interrupt once a round is in
        seen.append(line)
        if line.startswith("tune: round 1:"):
            proc.send_signal(signal.SIGINT)
            break
    stdout, rest = proc.communicate(timeout=300)
    assert proc.returncode == 130, "".join(seen) + rest[-3000:]
    doc = json.loads(stdout)
    assert doc["interrupted"] == signal.SIGINT and doc["rounds"] >= 1
    assert {s["route"] for s in doc["standings"] if s["status"] != "pruned"} >= {"config"}
    assert "interrupted by SIGINT" in rest


def test_a_budget_that_ends_before_a_round_gives_no_verdict_and_exit_1(webgpu_env, tmp_path):  # noqa: F811
    """10 tokens cannot pay for one invocation: no route was measured, so nothing is said about speed."""
    result = run_winml(
        "tune", TINY_PIPELINE, *CHEAP, "--budget", "10tok", "--no-store", "--report", tmp_path / "r.json",
        env=webgpu_env, timeout=600,
    )  # fmt: skip
    assert result.returncode == 1, result.stderr[-3000:]
    assert "verdict: no verdict: the budget ran out before racing (no round ran" in result.stdout
    assert "outside --budget" in result.stderr  # the preparation's cost, printed, not charged to the race
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["rounds"] == 0 and doc["verdict"]["kind"] == "no verdict" and doc["preparation_s"] > 0
