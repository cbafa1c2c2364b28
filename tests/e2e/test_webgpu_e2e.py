"""WebGPU as a second real EP, end to end: forced routes run, keep the config's greedy tokens, record
where each stage's nodes were placed, and ``--strict`` fails routes with nodes on CPU.

On a machine without a GPU the WebGPU plugin EP runs over a software Vulkan driver (Mesa lavapipe)
that scripts/setup-webgpu-software.sh provides and verifies. Its exports (LD_LIBRARY_PATH among them)
must be in place before a process starts, so every WebGPU run here is a `winml` subprocess with them.
Without the driver these tests skip, saying why; with ``CI`` set they fail instead: CI must run them.
The first WebGPU run compiles shaders (15-22 s cold on lavapipe; MESA_SHADER_CACHE_DIR keeps them),
so the runs are few and short.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import subprocess
import sys

import pytest

from tests.conftest import BUNDLES, REPO, TINY_PIPELINE, run_winml
from tests.placement_models import CPU_ONLY_OPS, strict_bundle

pytestmark = [pytest.mark.e2e, pytest.mark.webgpu]

SCRIPT = REPO / "scripts" / "setup-webgpu-software.sh"
FP32_PIPELINE = BUNDLES / "tiny-qwen2-pipeline-fp32"
WEBGPU = "WebGpuExecutionProvider"
CPU = "CPUExecutionProvider"
ALL_STAGES = {"embeddings", "context", "iterator", "lm_head"}
# Short runs: 16-token prompts (WebGPU over lavapipe matches CPU's greedy tokens below 32 prompt tokens).
LEAN = (
    "--invocations",
    "1",
    "--prompt-tokens",
    "16",
    "--max-new-tokens",
    "8",
    "--warmup",
    "1",
    "--iterations",
    "1",
    "--format",
    "json",
    "-q",
)


def parse_exports(text: str) -> dict[str, str]:
    """``export NAME='value'`` lines (as the setup script prints them) -> {NAME: value}."""
    env = {}
    for line in text.splitlines():
        words = shlex.split(line)
        if len(words) == 2 and words[0] == "export" and "=" in words[1]:
            name, _, value = words[1].partition("=")
            env[name] = value
    return env


def _unavailable(reason: str):
    if os.environ.get("CI"):
        pytest.fail(f"the webgpu tests must run in CI, but: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def webgpu_env() -> dict[str, str]:
    """The environment the setup script prints, after it verified a MatMul on the WebGPU EP."""
    if importlib.util.find_spec("onnxruntime_ep_webgpu") is None:
        _unavailable("onnxruntime-ep-webgpu is not installed (pip install -e '.[webgpu]')")
    proc = subprocess.run(
        ["bash", str(SCRIPT), "--verify"],
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "PYTHON": sys.executable},
    )
    if proc.returncode != 0:
        lines = [
            ln for ln in proc.stderr.splitlines() if "cannot provide driver" in ln
        ] or proc.stderr.strip().splitlines()[-1:]
        _unavailable(lines[-1] if lines else f"{SCRIPT.name} exited {proc.returncode}")
    env = parse_exports(proc.stdout)
    missing = {"LD_LIBRARY_PATH", "VK_ICD_FILENAMES", "ORT_WEBGPU_EP_ALLOW_SOFTWARE_ADAPTER"} - set(env)
    assert not missing, f"{SCRIPT.name} printed no {sorted(missing)}:\n{proc.stdout}"
    return env


@pytest.fixture
def webgpu(webgpu_env):
    return lambda *args: run_winml(*args, env=webgpu_env, timeout=600)


def _cells(result) -> list[dict]:
    assert result.returncode == 0, result.stderr[-3000:]
    cells = result.json()["cells"]
    assert cells and all(c["status"] == "ok" for c in cells), [c.get("failure") for c in cells]
    return cells


def _stages(cell: dict) -> dict[str, dict]:
    return {s["stage"]: s for s in cell["route"]["stages"]}


def _on_webgpu(stages: dict[str, dict]) -> set[str]:
    """Stages whose recorded placement puts nodes on WebGPU."""
    return {name for name, s in stages.items() if s["placement"]["nodes_per_ep"].get(WEBGPU, 0) > 0}


@pytest.mark.parametrize("stages", [None, "context,iterator"], ids=["all-stages", "context-iterator"])
def test_forced_webgpu_route_runs_and_records_where_each_stage_ran(webgpu, stages):
    args = ["perf", TINY_PIPELINE, "--ep", "webgpu", "--check-outputs", *LEAN] + (
        ["--stages", stages] if stages else []
    )
    [cell] = _cells(webgpu(*args))
    forced = set(stages.split(",")) if stages else ALL_STAGES
    recorded = _stages(cell)
    assert set(recorded) == ALL_STAGES
    assert _on_webgpu(recorded) == forced
    for name, s in recorded.items():
        p = s["placement"]
        assert p["status"] == "ok" and "ep_actual" not in s, s  # nothing ran wholly elsewhere
        assert s["ep_after"] == (WEBGPU if name in forced else CPU) == p["ep"]
        if name not in forced:
            assert set(p["nodes_per_ep"]) == {CPU}
    # The builder's attention-mask subgraph has no WebGPU kernel: the record says so, op by op.
    assert recorded["context"]["placement"]["cpu_fallback_ops"].get("ReduceSum") == 1
    # int4 kernels differ between CPU and WebGPU, so tokens may differ here; a difference must be a warning.
    check = cell["route"]["output_check"]
    warned = [w for w in cell["warnings"] if w["code"] == "output_mismatch"]
    if check["equal"]:
        assert not warned
    else:
        assert [w["data"]["first_difference"] for w in warned] == [check["first_difference"]]


def test_forced_webgpu_routes_generate_the_config_routes_greedy_tokens(webgpu):
    routes = ["config", "ep=webgpu", "ep=webgpu;stages=context,iterator"]
    cells = _cells(webgpu("perf", FP32_PIPELINE, *[a for r in routes for a in ("--route", r)], *LEAN))
    by_route = {c["route"]["label"]: c for c in cells}
    assert set(by_route) == {"config", "ep=webgpu", "ep=webgpu[context,iterator]"}
    tokens = {label: c["output"]["tokens_sha256"] for label, c in by_route.items()}
    assert len(set(tokens.values())) == 1, {label: c["output"]["first_token_ids"] for label, c in by_route.items()}
    assert len(by_route["config"]["output"]["first_token_ids"]) == 8
    assert _on_webgpu(_stages(by_route["ep=webgpu"])) == ALL_STAGES
    assert _on_webgpu(_stages(by_route["ep=webgpu[context,iterator]"])) == {"context", "iterator"}
    # lavapipe runs WebGPU on the CPU: every stage reads host memory, and the fraction is physical.
    for label, c in by_route.items():
        roof = c["roofline"]
        assert [e["device"] for e in roof["devices"]] == ["host"], (label, roof)
        assert 0 < (roof["fraction_of_bound"] or 0) <= 1, (label, roof)
    assert any(WEBGPU in lbl for lbl in by_route["ep=webgpu"]["roofline"]["devices"][0]["labels"])


def test_strict_fails_the_builders_decoder_stages_naming_their_cpu_ops(webgpu):
    result = webgpu("perf", TINY_PIPELINE, "--ep", "webgpu", "--strict", *LEAN)
    assert result.returncode == 1, result.stderr[-3000:]
    assert result.stdout == ""  # failed before measuring anything
    err = result.stderr
    assert "--strict" in err and "`context`" in err and "`iterator`" in err
    assert "`embeddings`" not in err.split("; drop")[0] and "`lm_head`" not in err.split("; drop")[0]
    for op in ("Cast x2", "Gather", "ReduceSum", "Shape", "Sub"):
        assert op in err


def test_strict_passes_a_route_whose_forced_stages_run_whole_on_webgpu(webgpu):
    [cell] = _cells(
        webgpu("perf", TINY_PIPELINE, "--ep", "webgpu", "--stages", "embeddings,lm_head", "--strict", *LEAN)
    )
    recorded = _stages(cell)
    assert _on_webgpu(recorded) == {"embeddings", "lm_head"}
    assert all(recorded[s]["placement"]["cpu_fallback_nodes"] == 0 for s in ("embeddings", "lm_head"))


def test_strict_fails_a_route_with_a_cpu_only_op(webgpu, tmp_path):
    bundle = strict_bundle(tmp_path / "strict")
    result = webgpu("perf", bundle, "--ep", "webgpu", "--strict", *LEAN)
    assert result.returncode == 1, result.stderr[-3000:]
    line = next(ln for ln in result.stderr.splitlines() if "--strict" in ln)
    assert "`decoder`" in line and "2 of 3 nodes" in line
    assert all(op in line for op in CPU_ONLY_OPS) and "Add" not in line


def test_bundle_show_placement_prints_nodes_per_ep_and_cpu_ops(webgpu):
    result = webgpu("bundle", "show", TINY_PIPELINE, "--placement", "--ep", "webgpu")
    assert result.returncode == 0, result.stderr[-3000:]
    rows = {
        cells[0]: cells
        for cells in (
            [c.strip() for c in ln.strip("|").split("|")]
            for ln in result.stdout.splitlines()
            if ln.startswith("| ") and not ln.startswith("| stage")
        )
    }
    assert set(rows) == ALL_STAGES
    assert rows["embeddings"][5:] == ["webgpu 1", "-"] and rows["lm_head"][5:] == ["webgpu 1", "-"]
    for name in ("context", "iterator"):
        assert re.fullmatch(r"webgpu \d+, cpu \d+", rows[name][5]), rows[name]
        assert "ReduceSum" in rows[name][6]
    doc = json.loads(
        webgpu("bundle", "show", TINY_PIPELINE, "--placement", "--ep", "webgpu", "--format", "json").stdout
    )
    assert {s["stage"]: s["placement"]["nodes_per_ep"] for s in doc["stages"]}["lm_head"] == {WEBGPU: 1}
