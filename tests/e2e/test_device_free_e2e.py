"""Issue 26: device-free preparation and prepared routes that travel.

A bundle compiled device-free (QNN's library registered as QNNExecutionProvider.virtual in a child)
for soc_model=60 in one process is measured by `winml perf` in another: a cache hit, the compiled
model's `.virtual` compatibility info read for QNNExecutionProvider, and "matched: ok". The same
route with soc_model changed in the running options is detected and recompiled, or refused with
--no-recompile. WebGPU 0.4.0 cannot compile device-free: exit 2 naming the EP and version."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil

import pytest

from tests.conftest import BUNDLES, QUICK_RUN, run_winml

pytestmark = [pytest.mark.e2e]

RUN = QUICK_RUN
SOC60 = ("--ep", "qnn", "--compile", "--ep-option", "soc_model=60")
needs_qnn = pytest.mark.skipif(importlib.util.find_spec("onnxruntime_qnn") is None, reason="needs onnxruntime-qnn")


@pytest.fixture
def bundle(tmp_path):
    dst = tmp_path / "tiny"
    shutil.copytree(BUNDLES / "tiny-qwen2", dst, ignore=shutil.ignore_patterns("_compiled"))
    return dst


def _prepare(bundle, *extra):
    done = run_winml("bundle", "prepare", bundle, *SOC60, "--device-free", *extra)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def _compiled(stdout: str) -> dict:
    (cell,) = json.loads(stdout)["cells"]
    route = cell["route"]
    (outcome,) = [c for c in route["compile"] if c["status"] == "compiled"]
    return {"route": route, "outcome": outcome}


@pytest.mark.qnn
@needs_qnn
def test_prepared_device_free_is_measured_by_perf_in_another_process_with_a_hit_and_ok(bundle):
    """Failed before: `bundle prepare --device-free` was no such option (exit 2)."""
    prepared = _prepare(bundle)
    derived = prepared.stdout.strip().splitlines()[-1]
    assert "device-free on QNNExecutionProvider.virtual" in prepared.stderr
    made = json.loads((bundle / "_compiled" / os.path.basename(derived) / "prepared.json").read_text())
    (stage,) = made["stages"].values()
    assert stage["made"] == "device-free" and stage["compatibility_info"].endswith(":0:60:0:0"), stage
    assert stage["placement"]["partitions"] >= 1 and stage["version"] == "2.7.0", stage
    measured = run_winml("perf", bundle, *SOC60, "--format", "json", *RUN)
    assert measured.returncode == 0, measured.stderr[-3000:]
    got = _compiled(measured.stdout)
    assert got["route"]["cache"] == "hit", got["route"]["cache_reason"]
    compat = got["outcome"]["compatibility"]
    assert compat["info"] == stage["compatibility_info"]  # the .virtual key, read for the running EP's name
    assert compat["prepared"]["matched"] == "ok", compat["prepared"]
    assert compat["prepared"]["built"]["made"] == "device-free"


@pytest.mark.qnn
@needs_qnn
def test_soc_model_changed_in_the_running_options_is_detected_and_recompiled(bundle):
    """Failed before: no --device-free (prepare)."""
    _prepare(bundle)
    soc88 = ("--ep", "qnn", "--compile", "--ep-option", "soc_model=88")
    measured = run_winml("perf", bundle, *soc88, "--format", "json", *RUN)
    assert measured.returncode == 0, measured.stderr[-3000:]
    got = _compiled(measured.stdout)
    assert got["route"]["cache"] == "miss" and "soc_model" in got["route"]["cache_reason"], got["route"]
    made = got["outcome"]["compatibility"]["prepared"]  # compiled here, on the device, and the record says so
    assert made["built"]["made"] == "on-device" and made["built"]["target_options"]["soc_model"] == "88", made
    assert made["built"]["compatibility_info"].endswith(":0:88:0:0") and made["matched"] == "ok", made


@pytest.mark.qnn
@needs_qnn
def test_strict_is_enforced_at_compile_time(bundle):
    """QNN leaves most of this bundle's nodes on CPU: --strict (session.disable_cpu_ep_fallback) fails the compile."""
    done = run_winml("bundle", "prepare", bundle, *SOC60, "--device-free", "--strict")
    assert done.returncode == 1, done.stderr[-3000:]
    assert "--strict (session.disable_cpu_ep_fallback)" in done.stderr, done.stderr[-3000:]


def test_webgpu_0_4_0_device_free_prepare_exits_2_naming_ep_and_version(bundle):
    """Failed before: no --device-free; registered virtually, this plugin aborts the process when compiling."""
    if importlib.util.find_spec("onnxruntime_ep_webgpu") is None:
        pytest.skip("needs onnxruntime-ep-webgpu")
    from importlib.metadata import version

    if version("onnxruntime-ep-webgpu") != "0.4.0":
        pytest.skip("the table's measurement is of onnxruntime-ep-webgpu 0.4.0")
    done = run_winml("bundle", "prepare", bundle, "--ep", "webgpu", "--compile", "--device-free")
    assert done.returncode == 2, done.stderr[-3000:]
    assert "webgpu" in done.stderr and "onnxruntime-ep-webgpu 0.4.0" in done.stderr, done.stderr
    assert not (bundle / "_compiled").exists() or not any((bundle / "_compiled").glob("webgpu-*"))


@pytest.mark.qnn
@needs_qnn
def test_a_plain_onnx_model_prepared_device_free_is_loaded_by_perf_prepare_with_a_hit(tmp_path):
    """Failed before: no --device-free."""
    from tests import models

    model = models.mlp(tmp_path / "mlp.onnx")
    opts = ("--ep", "qnn", "--ep-option", "soc_model=60")
    done = run_winml("bundle", "prepare", model, *opts, "--compile", "--device-free", "--format", "json")
    assert done.returncode == 0, done.stderr[-3000:]
    doc = json.loads(done.stdout[done.stdout.index("{") :])
    made = json.loads((tmp_path / "_compiled" / os.path.basename(doc["folder"]) / "prepared.json").read_text())
    (stage,) = made["stages"].values()
    assert stage["made"] == "device-free" and stage["placement"]["cpu_nodes"] == 0, stage  # QNN claims the MLP whole
    run = ("--iterations", "2", "--warmup", "1", "--invocations", "1", "--no-store", "--format", "json", "-q")
    measured = run_winml("perf", model, *opts, "--prepare", *run)
    assert measured.returncode == 0, measured.stderr[-3000:]
    (cell,) = json.loads(measured.stdout[measured.stdout.index("{") :])["cells"]
    assert cell["route"]["prepared"]["cache"] == "hit" and cell["route"]["prepared"]["key"] == doc["key"]
    assert cell["route"]["actual"]["model"] == "QNNExecutionProvider"


def test_a_plugin_that_aborts_in_the_compile_child_is_exit_2_naming_it_not_a_core_dump(tmp_path, monkeypatch):
    """The second defence, run for real: past the table's refusal, WebGPU 0.4.0's virtual GPU aborts the
    child (SIGABRT); the user gets exit 2 naming the EP and version. Failed before: the child looked for
    devices named WebGpuExecutionProvider.virtual, but WebGPU's virtual device keeps its factory's name."""
    if importlib.util.find_spec("onnxruntime_ep_webgpu") is None:
        pytest.skip("needs onnxruntime-ep-webgpu")
    # the scenario is a machine with no Vulkan driver: hide the software one .ci/run provides (with a
    # driver, WebGPU's virtual device compiles instead of aborting)
    for name in ("VK_DRIVER_FILES", "VK_ICD_FILENAMES", "ORT_WEBGPU_EP_ALLOW_SOFTWARE_ADAPTER"):
        monkeypatch.delenv(name, raising=False)
    from winml_perf.bundle.epcontext import device_free
    from winml_perf.bundle.epcontext.compile import CompileJob
    from winml_perf.support.errors import UsageError

    job = CompileJob(("decoder",), "model.onnx", "WebGpuExecutionProvider", {}, "all")
    with pytest.raises(UsageError) as err:
        device_free._compile_one(job, BUNDLES / "tiny-qwen2" / "model.onnx", tmp_path / "w_ctx.onnx", 120, False)
    assert "onnxruntime-ep-webgpu" in str(err.value) and "SIGABRT" in str(err.value), str(err.value)


@pytest.mark.qnn
@needs_qnn
def test_a_soc_model_qnn_has_no_virtual_device_for_fails_naming_qnns_error(bundle):
    # onnxruntime says "Unable to compile any nodes"; the cause is QNN's, logged under QNNExecutionProvider.virtual
    done = run_winml(
        "bundle", "prepare", bundle, "--ep", "qnn", "--compile", "--device-free", "--ep-option", "soc_model=625"
    )
    assert done.returncode == 1, done.stderr[-3000:]
    assert "compile decoder: failed (device-free: qnn failed while choosing the nodes it takes:" in done.stderr
    assert "QNN_DEVICE_ERROR_INVALID_CONFIG" in done.stderr
