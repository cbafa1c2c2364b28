"""The QNN plugin EP through `winml`, for real: found by protocol, placement on the config route, --ep qnn,
EPContext compile and reuse, a damaged binary rebuilt, clean JSON (the SoC mismatch: tests/unit/test_compat.py).

onnxruntime-qnn runs QNN's HTP emulator on x86_64 Linux. Each `winml` call is a subprocess (libQnnHtp
prints on stdout; a registration is per process). Without onnxruntime-qnn these tests skip; with ``CI``
set they fail instead.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil

import pytest

from tests.conftest import BUNDLES, TINY_FLAT, run_winml

pytestmark = [pytest.mark.e2e, pytest.mark.qnn]

NPU = BUNDLES / "tiny-qwen2-npu"
QNN = "QNNExecutionProvider"
RUN = ("--max-new-tokens", "4", "--warmup", "1", "--iterations", "2", "--invocations", "1", "--no-store", "-q")


@pytest.fixture(scope="module", autouse=True)
def qnn_installed():
    if importlib.util.find_spec("onnxruntime_qnn") is None:
        reason = "onnxruntime-qnn is not installed (pip install -e '.[qnn]')"
        if os.environ.get("CI"):
            pytest.fail(f"the qnn tests must run in CI, but: {reason}")
        pytest.skip(reason)


def _copy(src, tmp_path, name=None):
    dst = tmp_path / (name or src.name)
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("_compiled"))
    return dst


def _json(result):
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout)  # valid JSON although libQnnHtp printed on fd 1


def test_devices_lists_qnn_found_by_protocol_as_an_emulated_device():
    doc = _json(run_winml("devices", "--format", "json"))
    (qnn,) = [d for d in doc["devices"] if d["ep_name"] == QNN]
    assert qnn["source"] == "plugin" and qnn["device_type"] == "cpu" and qnn["emulated"] is True and qnn["serves"] == []
    assert any(p["ep_name"] == QNN and p["origin"] == "package:onnxruntime_qnn" for p in doc["plugins"])


def test_config_route_of_the_npu_bundle_runs_on_qnn_with_placement_and_json_parses(tmp_path):
    bundle = _copy(NPU, tmp_path)
    doc = _json(run_winml("perf", bundle, "--prompt-tokens", "16", "--format", "json", *RUN))
    (cell,) = doc["cells"]
    route = cell["route"]
    assert cell["status"] == "ok" and route["route"] == "config" and route["emulated"] == [QNN]
    stages = {s["stage"]: s for s in route["stages"]}
    for name in ("context", "iterator"):
        per_ep = stages[name]["placement"]["nodes_per_ep"]
        assert per_ep[QNN] > 0.8 * sum(per_ep.values()), per_ep  # measured: 28 of 30, 29 of 33
    assert stages["embeddings"]["placement"]["nodes_per_ep"] == {"CPUExecutionProvider": 1}
    assert any(w["code"] == "partial_cpu_fallback" for w in cell["warnings"])  # GQA stays on CPU
    assert not (bundle / "placement.json").exists()
    plugins = {p["ep_name"]: p for p in cell["environment"]["plugin_eps"]["plugins"]}
    assert plugins[QNN]["package"] == "onnxruntime-qnn" and plugins[QNN]["sdk_version"]
    assert cell["environment"]["versions"]["onnxruntime-qnn"]


def test_strict_fails_the_config_route_naming_the_ops_off_qnn(tmp_path):
    result = run_winml("perf", _copy(NPU, tmp_path), "--prompt-tokens", "16", "--strict", *RUN)
    assert result.returncode == 1, result.stderr
    assert "route config would run nodes off the EP" in result.stderr and "GroupQueryAttention" in result.stderr


def test_ep_qnn_on_the_flat_bundle_runs_marked_emulated(tmp_path):
    result = run_winml("perf", _copy(TINY_FLAT, tmp_path), "--ep", "qnn", "--prompt-tokens", "16", *RUN)
    assert result.returncode == 0, result.stderr
    assert "ep=qnn (emulated)" in result.stdout and "not NPU speed" in result.stdout
    assert f"decoder: CPUExecutionProvider -> {QNN}  [cpu" in result.stdout and "qnn " in result.stdout


def _prepare(bundle, *flags):
    return _json(run_winml("bundle", "prepare", bundle, "--ep", "qnn", "--compile", "--format", "json", *flags))


def test_compile_produces_an_epcontext_stage_and_a_second_run_reuses_it(tmp_path):
    bundle = _copy(TINY_FLAT, tmp_path)
    first = _prepare(bundle)
    (compiled,) = [c for c in first["compile"] if c["status"] == "compiled"]
    assert first["cache"] == "miss" and compiled["output"] == "decoder_qnn_ctx.onnx"
    assert compiled["compatibility"]["verdict"] == "verified" and compiled["compatibility"]["source"] == "session"
    assert compiled["compatibility"]["info"].startswith("v2:")  # ep_compatibility_info.QNNExecutionProvider
    import onnx

    model = onnx.load(os.path.join(first["path"], "decoder_qnn_ctx.onnx"), load_external_data=False)
    assert any(n.op_type == "EPContext" for n in model.graph.node)
    again = _prepare(bundle)
    assert again["cache"] == "hit" and again["path"] == first["path"]
    assert [c["compatibility"]["source"] for c in again["compile"] if c["status"] == "compiled"] == ["memo"]
    measured = _json(
        run_winml("perf", bundle, "--ep", "qnn", "--compile", "--prompt-tokens", "16", "--format", "json", *RUN)
    )
    route = measured["cells"][0]["route"]
    assert route["cache"] == "hit" and not any(w["code"] == "route_no_effect" for w in measured["cells"][0]["warnings"])


def test_binaries_for_two_socs_never_share_an_artifact(tmp_path):
    bundle = _copy(NPU, tmp_path)
    other = _prepare(bundle, "--stages", "iterator", "--ep-option", "soc_model=88")
    mine = _prepare(bundle, "--stages", "iterator")
    assert other["path"] != mine["path"]  # the options are in the key
    infos = [c["compatibility"]["info"] for d in (other, mine) for c in d["compile"] if c["status"] == "compiled"]
    assert infos[0].endswith(":88:0:0") and infos[1].endswith(":60:0:0")  # ep_compatibility_info records the SoC


def test_a_truncated_context_binary_in_the_cache_is_rebuilt_with_the_reason(tmp_path):
    bundle = _copy(NPU, tmp_path)
    first = _prepare(bundle, "--stages", "iterator")
    binary = os.path.join(first["path"], "iterator_qnn_ctx_qnn.bin")
    with open(binary, "r+b") as f:
        f.truncate(1000)
    again = _prepare(bundle, "--stages", "iterator")
    assert again["cache"] == "miss" and "iterator_qnn_ctx_qnn.bin" in again["cache_reason"]
    assert os.path.getsize(binary) > 1000


def test_device_npu_names_the_emulator_and_exits_2(tmp_path):
    result = run_winml("perf", TINY_FLAT, "--device", "npu", "--prompt-tokens", "16", *RUN)
    assert result.returncode == 2, result.stderr
    assert "QNN is installed but offers only an emulated HTP device of type CPU; use --ep qnn" in result.stderr


def test_route_device_npu_names_the_routes_own_spelling_and_exits_2(tmp_path):
    result = run_winml("perf", TINY_FLAT, "--route", "config", "--route", "device=npu", "--prompt-tokens", "16", *RUN)
    assert result.returncode == 2, result.stderr
    assert "use --ep qnn, or ep=qnn in --route (its timings" in " ".join(result.stderr.split())
    assert "Traceback" not in result.stderr


def test_a_soc_model_qnn_cannot_create_a_device_for_fails_the_compile_with_qnns_error(tmp_path):
    # QNN errs choosing its nodes; onnxruntime then says none compiled: not "qnn claims no node" (exit 0)
    bundle = _copy(TINY_FLAT, tmp_path)
    result = run_winml("bundle", "prepare", bundle, "--ep", "qnn", "--compile", "--ep-option", "soc_model=625")
    assert result.returncode == 1, result.stderr
    assert "compile decoder: failed (qnn failed while choosing the nodes it takes:" in result.stderr
    assert "QNN_DEVICE_ERROR_INVALID_CONFIG" in result.stderr and "claims no node" not in result.stderr


def test_an_unknown_ep_option_is_exit_2_naming_the_key(tmp_path):
    result = run_winml("perf", TINY_FLAT, "--ep", "qnn", "--ep-option", "htp_arhc=73", "--prompt-tokens", "16", *RUN)
    assert result.returncode == 2, result.stderr
    assert "htp_arhc" in result.stderr and "htp_arch" in result.stderr


def test_a_bundle_naming_qnn_without_the_plugin_is_exit_2_naming_the_package():
    result = run_winml("perf", NPU, "--prompt-tokens", "16", *RUN, env={"WINML_PERF_NO_PLUGIN_DISCOVERY": "1"})
    assert result.returncode == 2, result.stderr
    assert (
        "wants QNN, which is not available here" in result.stderr
        and "qnn: pip install -e '.[qnn]' (onnxruntime-qnn)" in result.stderr
    )
