"""Per-stage routes against the real runtime, CPU and QNN (its HTP emulator): `winml perf` measures
`stages=context:qnn,iterator:cpu,lm_head:qnn` on the tiny pipeline with the record saying per stage
which EP was asked and which really ran it, judged against config; one route over CPU, WebGPU (over
lavapipe) and QNN at once; and `winml tune --eps cpu,qnn`
races an assignment that moves stages to both EPs (tiny-qwen2-npu: embeddings to QNN, context to CPU).

Kept cheap: one invocation of 2 iterations of 4-8 tokens; the tune searches two stages (4
assignments), with --min-placement 0 (QNN holds none of the embeddings' one node, so placement would
prune the mixed one) and --no-equivalence (its pruning is covered in tests/unit/test_tune_race.py).
"""

from __future__ import annotations

import importlib.util
import os
import sqlite3

import pytest

from tests.conftest import BUNDLES, TINY_PIPELINE, run_winml
from tests.e2e.test_webgpu_e2e import webgpu_env  # noqa: F401  (the session fixture: lavapipe's env)
from winml_perf.model.route import bare_label

pytestmark = [pytest.mark.e2e, pytest.mark.qnn]

CPU, QNN = "CPUExecutionProvider", "QNNExecutionProvider"
MIXED = "stages=context:qnn,iterator:cpu,lm_head:qnn"


@pytest.fixture(scope="module", autouse=True)
def _needs_qnn():
    if importlib.util.find_spec("onnxruntime_qnn") is None:
        reason = "onnxruntime-qnn is not installed (pip install onnxruntime-qnn)"
        if os.environ.get("CI"):
            pytest.fail(f"the qnn tests must run in CI, but: {reason}")
        pytest.skip(reason)


def test_perf_measures_a_per_stage_route_and_records_what_ran_each_stage():
    result = run_winml(
        "perf", TINY_PIPELINE, "--route", "config", "--route", MIXED, "--invocations", "1", "--iterations", "2",
        "--max-new-tokens", "8", "--prompt-tokens", "16", "--no-store", "--format", "json", timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    cells = {c["route"]["label"]: c for c in result.json()["cells"]}
    assert set(cells) == {"config", MIXED} and all(c["status"] == "ok" for c in cells.values())
    route = cells[MIXED]["route"]
    assert route["route"] == MIXED and "/_compiled/stages-" in route["derived_path"]
    assert route["target"]["stages"] == {"context": QNN, "iterator": CPU, "lm_head": QNN}
    stages = {s["stage"]: s for s in route["stages"]}
    asked = {name: s["ep_after"] for name, s in stages.items()}
    assert asked == {"embeddings": CPU, "context": QNN, "iterator": CPU, "lm_head": QNN}
    assert [name for name, s in stages.items() if s["forced"]] == ["context", "iterator", "lm_head"]
    # what really ran: QNN holds some of the context's nodes, none of lm_head's one node
    assert stages["context"]["placement"]["nodes_per_ep"].get(QNN, 0) > 0
    assert stages["lm_head"]["placement"]["nodes_per_ep"] == {CPU: 1} and stages["lm_head"]["ep_actual"] == CPU
    assert route["equivalence"]["verdict"] in ("equivalent", "within precision tolerance", "not equivalent")
    assert route["equivalence"]["route_path"] == route["derived_path"]


@pytest.mark.webgpu
def test_a_route_over_three_eps_runs_each_stage_where_it_says(webgpu_env):  # noqa: F811
    route = "stages=context:webgpu,iterator:qnn"
    result = run_winml(
        "perf", TINY_PIPELINE, "--route", route, "--invocations", "1", "--iterations", "2", "--max-new-tokens", "8",
        "--prompt-tokens", "16", "--no-store", "--format", "json", env=webgpu_env, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    [cell] = result.json()["cells"]
    assert cell["status"] == "ok" and cell["route"]["label"] == route
    stages = {s["stage"]: s for s in cell["route"]["stages"]}
    assert {n: s["ep_after"] for n, s in stages.items()} == {
        "embeddings": CPU, "context": "WebGpuExecutionProvider", "iterator": QNN, "lm_head": CPU,
    }  # fmt: skip
    placed = {n: s["placement"]["nodes_per_ep"] for n, s in stages.items()}
    assert placed["context"].get("WebGpuExecutionProvider", 0) > 0 and placed["iterator"].get(QNN, 0) > 0


def test_tune_races_an_assignment_over_two_eps(tmp_path):
    result = run_winml(
        "tune", BUNDLES / "tiny-qwen2-npu", "--eps", "cpu,qnn", "--stages", "embeddings,context",
        "--min-placement", "0", "--no-equivalence", "--iterations", "2", "--warmup", "1", "--max-new-tokens", "4",
        "--max-rounds", "2", "--screen-rounds", "0", "--budget", "300s", "--seed", "1", "--store", tmp_path / "store.db",
        "--format", "json", timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    doc = result.json()
    mixed = "stages=embeddings:qnn,context:cpu"
    # routes as shown (issue 35): a route with a stage on QNN's HTP emulator is marked (emulated)
    rows = {bare_label(s["route"]): s for s in doc["standings"]}
    assert set(rows) == {"config", "ep=qnn[embeddings]", "ep=cpu[context]", mixed} and not doc["pruned"]
    assert rows["ep=qnn[embeddings]"]["route"] == "ep=qnn[embeddings] (emulated)"
    assert rows[mixed]["status"] != "pruned" and rows[mixed]["pairs"] >= 1
    with sqlite3.connect(tmp_path / "store.db") as db:
        routes = [r for (r,) in db.execute("SELECT route FROM records")]
    assert routes.count(rows[mixed]["route"]) == doc["rounds"] >= 1
