"""Issue 23 (findings 1-3) on the QNN HTP emulator: the NPU bundle's context and iterator compile at the
level they load at, load, and give the uncompiled route's tokens; a compile that fails fails the route
unless --allow-uncompiled, whose label then says so; the bundle's KV head dimension is concrete."""

from __future__ import annotations

import importlib.util
import json
import shutil

import pytest

from tests.conftest import BUNDLES, QUICK_RUN, run_winml
from winml_perf.onnxfile.header import input_shapes

pytestmark = [pytest.mark.e2e, pytest.mark.qnn]

NPU = BUNDLES / "tiny-qwen2-npu"
RUN = QUICK_RUN


@pytest.fixture(scope="module", autouse=True)
def qnn_installed():
    if importlib.util.find_spec("onnxruntime_qnn") is None:
        pytest.skip("onnxruntime-qnn is not installed (pip install -e '.[qnn]')")


@pytest.fixture
def bundle(tmp_path):
    dst = tmp_path / "npu"
    shutil.copytree(NPU, dst, ignore=shutil.ignore_patterns("_compiled"))
    return dst


def test_the_committed_npu_bundle_has_a_concrete_kv_head_dimension():
    """Finding 3: a symbolic kv_cache_dim kept GroupQueryAttention off QNN. Failed before: (1, 2, 128, None)."""
    for name in ("transformer_context.onnx", "transformer_iterator.onnx"):
        shapes = input_shapes(NPU / name)
        assert shapes["past_key_values.0.key"] == (1, 2, 128, 32), (name, shapes)


def test_prepare_compiles_context_and_iterator_and_perf_matches_the_uncompiled_route(bundle):
    """Finding 2 (and the issue's done-when). Failed before: the context compile failed to load (exit 1)."""
    prepared = run_winml("bundle", "prepare", bundle, "--ep", "qnn", "--compile", "--format", "json")
    assert prepared.returncode == 0, prepared.stderr[-3000:]
    doc = json.loads(prepared.stdout)
    status = {s: c["status"] for c in doc["compile"] for s in c["stages"]}
    assert status["context"] == "compiled" and status["iterator"] == "compiled", status
    # Finding 7: the compiled stage's placement counts nodes, not EPContext partitions (was "qnn 3, cpu 2").
    placed = {s["stage"]: s["placement"]["nodes_per_ep"] for s in doc["stages"]}
    assert placed["context"] == {"QNNExecutionProvider": 28, "CPUExecutionProvider": 2}, placed
    measured = run_winml("perf", bundle, "--ep", "qnn", "--compile", "--check-outputs", "--format", "json", *RUN)
    assert measured.returncode == 0, measured.stderr[-3000:]
    (cell,) = json.loads(measured.stdout)["cells"]
    check = cell["route"]["output_check"]
    assert check["first_difference"] is None and check["route_token_ids"] == check["config_token_ids"], check


def test_a_failed_compile_fails_the_cell_unless_allowed_and_then_the_label_says_so(bundle):
    """Finding 1. Failed before: exit 0, label ep=qnn, over the source models."""
    flags = ("perf", bundle, "--ep", "qnn", "--stages", "iterator", "--compile", "--compile-timeout", "0.01")
    failed = run_winml(*flags, *RUN)
    assert failed.returncode == 1, failed.stderr[-3000:]
    assert "--compile failed" in failed.stderr and "iterator" in failed.stderr
    allowed = run_winml(*flags, "--allow-uncompiled", "--format", "json", *RUN)
    assert allowed.returncode == 0, allowed.stderr[-3000:]
    (cell,) = json.loads(allowed.stdout)["cells"]
    assert cell["route"]["label"].endswith("(uncompiled)")


def test_qnn_placement_of_the_context_stage_is_printed_per_node():
    """Finding 7 (done-when): the context stage's QNN placement, one line per node from its session.
    Failed before: no such flag (exit 2)."""
    shown = run_winml(
        "bundle", "show", NPU, "--ep", "qnn", "--stages", "context", "--placement-nodes", "--format", "json"
    )
    assert shown.returncode == 0, shown.stderr[-3000:]
    doc = json.loads(shown.stdout[shown.stdout.index("{") :])  # libQnnHtp prints a LIBNATIVE line on stdout
    nodes = {s["stage"]: s["nodes"] for s in doc["nodes"]}["context"]
    counted = {s["stage"]: s["placement"]["nodes_per_ep"] for s in doc["stages"]}["context"]
    per_ep: dict[str, int] = {}
    for node in nodes:
        per_ep[node["ep"]] = per_ep.get(node["ep"], 0) + 1
    assert per_ep == counted and per_ep.get("QNNExecutionProvider", 0) >= 28, per_ep
    on_cpu = {n["op_type"] for n in nodes if n["ep"] == "CPUExecutionProvider"}
    assert on_cpu <= {"com.microsoft.GroupQueryAttention"}, on_cpu
