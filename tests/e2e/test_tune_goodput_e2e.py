"""`winml tune --objective goodput` against the real runtime: tiny-qwen2 over CPU and WebGPU (over
lavapipe), each round one serving invocation per route through og.Engine in fresh children, the
cells stored as serving records, the standings ranked by goodput and the verdict naming the
objective and the load; a decoder-pipeline bundle, which og.Engine refuses, exits 2 saying so.

Kept cheap: --no-equivalence, 4 requests of 8 + 4 tokens at concurrency 2, at most 2 rounds.
"""

from __future__ import annotations

import json
import sqlite3

import pytest

from tests.conftest import TINY_FLAT, TINY_PIPELINE, run_winml
from tests.e2e.test_webgpu_e2e import webgpu_env  # noqa: F401  (the session fixture: lavapipe's env)

pytestmark = [pytest.mark.e2e]

SMALL_LOAD = (
    "--concurrency", "2", "--requests", "4", "--prompt-tokens", "8", "--max-new-tokens", "4",
    "--slo", "ttft=5s,tpot=1s",
)  # fmt: skip


@pytest.mark.webgpu
def test_a_goodput_tune_races_serving_rounds_and_stores_serving_cells(webgpu_env, tmp_path):  # noqa: F811
    result = run_winml(
        "tune", TINY_FLAT, "--objective", "goodput", "--eps", "cpu,webgpu", "--no-equivalence", *SMALL_LOAD,
        "--max-rounds", "2", "--budget", "300s", "--seed", "2", "--store", tmp_path / "store.db",
        "--report", tmp_path / "report.json", "--format", "json",
        env=webgpu_env, timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    doc = result.json()
    assert doc["objective"] == "goodput" and doc["rounds"] == 2
    assert doc["load"] == {
        "mode": "closed",
        "concurrency": 2,
        "requests": 4,
        "slo": {"ttft_ms": 5000.0, "tpot_ms": 1000.0, "e2e_ms": None},
    }
    rows = {s["route"]: s for s in doc["standings"]}
    assert set(rows) == {"config", "ep=webgpu"} and rows["ep=webgpu"]["pairs"] == 2
    assert rows["ep=webgpu"]["speedup"] > 0  # a goodput ratio: every request met so loose an SLO
    assert "goodput" in doc["verdict"]["text"] and "concurrency 2" in doc["verdict"]["text"]
    assert json.loads((tmp_path / "report.json").read_text())["verdict"] == doc["verdict"]
    with sqlite3.connect(tmp_path / "store.db") as db:
        stored = [json.loads(r) for (r,) in db.execute("SELECT record_json FROM records")]
    assert len(stored) == 4  # 2 routes x 2 rounds, one run per round
    assert len({r["run_id"] for r in stored}) == 2 == len(doc["run_ids"])
    for record in stored:
        section = record["serving"]
        assert section["load"]["key"] == "c2" and section["server"] == "engine"
        (inv,) = section["invocations"]
        assert len(inv["requests"]) == 4 and max(s[2] for s in inv["steps"]) == 2  # steps: start, end, batch, waiting
    compared = run_winml("compare", "routes", "--store", tmp_path / "store.db", timeout=300)
    assert compared.returncode == 0, compared.stderr[-3000:]
    assert "a serving run (a round of winml tune --objective goodput)" in compared.stderr
    assert "at concurrency 2, ep=webgpu serves" in compared.stdout


def test_a_goodput_tune_of_a_bundle_the_engine_refuses_exits_2_saying_why():
    result = run_winml(
        "tune", TINY_PIPELINE, "--objective", "goodput", "--eps", "cpu", "--no-equivalence", "--no-store", timeout=300
    )
    assert result.returncode == 2, result.stderr[-3000:]
    assert "--objective goodput" in result.stderr and "decoder-pipeline" in result.stderr
    assert "--objective decode" in result.stderr  # the fix
