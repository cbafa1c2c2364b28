"""Issue 26: device-free compile decisions that need no EP (bundle/epcontext/device_free.py)."""

from __future__ import annotations

import pytest

from winml_perf.bundle.epcontext import device_free
from winml_perf.bundle.epcontext.compile import CompileJob
from winml_perf.ep import child
from winml_perf.model.route import CompileOutcome
from winml_perf.support.errors import UsageError

QNN, WEBGPU = "QNNExecutionProvider", "WebGpuExecutionProvider"


def _ident(package, version):
    return lambda ep: {"package": package, "version": version, "sdk_version": "1", "library_path": "/lib.so"}


def test_a_version_the_table_says_cannot_is_refused_before_anything_starts(monkeypatch):
    monkeypatch.setattr(device_free, "_identity", _ident("onnxruntime-ep-webgpu", "0.4.0"))
    with pytest.raises(UsageError) as err:
        device_free.refuse_unless_possible(WEBGPU)
    assert err.value.exit_code == 2 and "onnxruntime-ep-webgpu 0.4.0" in str(err.value)


def test_an_ep_without_a_plugin_library_is_refused(monkeypatch):
    monkeypatch.setattr(device_free, "_identity", lambda ep: None)
    with pytest.raises(UsageError, match="QNNExecutionProvider.virtual"):
        device_free.refuse_unless_possible(QNN)


def test_a_compile_child_killed_by_a_signal_is_exit_2_naming_ep_and_version(monkeypatch, tmp_path):
    """An EP version the table does not know that aborts: a clear error, not a core dump."""
    monkeypatch.setattr(device_free, "_identity", _ident("onnxruntime-qnn", "9.9.9"))
    died = child.ChildResult(child.ChildExit.of(-6), "", "Assertion failed", 0.1)
    monkeypatch.setattr(device_free.child, "run_module", lambda *a, **k: died)
    job = CompileJob(("decoder",), "model.onnx", QNN, {"soc_model": "60"})
    with pytest.raises(UsageError) as err:
        device_free.runner(False)([job], tmp_path, tmp_path, 10.0)
    assert "onnxruntime-qnn 9.9.9" in str(err.value) and "SIGABRT" in str(err.value)


def test_the_reuse_report_says_ok_or_what_differs(monkeypatch):
    monkeypatch.setattr(device_free, "_identity", _ident("onnxruntime-qnn", "2.7.0"))
    made = {"made": "device-free", "package": "onnxruntime-qnn", "version": "2.7.0", "sdk_version": "1"}
    made["target_options"] = {"soc_model": "60", "backend_type": "htp"}
    ok = device_free.reuse_report(made, QNN, {"soc_model": "60", "backend_type": "htp"}, {"verdict": "verified"})
    assert ok["matched"] == "ok"
    other = device_free.reuse_report(made, QNN, {"soc_model": "88", "backend_type": "htp"}, None)
    assert other["matched"] == "mismatch: soc_model 60 -> 88"


def test_a_device_free_hit_opens_no_session_on_the_build_server(tmp_path, monkeypatch):
    """Failed before: the hit checked the compiled stage with a session on the EP (its device), so a
    build server without one recompiled every time."""
    from tests.unit.bundle_fakes import FLAT_QNN, ep_target, make_bundle
    from winml_perf.bundle.epcontext import compat
    from winml_perf.bundle.prepare import Compiling, prepare_route

    bundle = make_bundle(tmp_path, FLAT_QNN)

    def fake(jobs, src_dir, out_dir, timeout_s):
        for job in jobs:
            (out_dir / job.output).write_bytes(b"compiled")
        return [CompileOutcome(j.stages, j.source, j.ep, j.output, "compiled", "", 1.0) for j in jobs]

    fake.checks_on_device = False  # type: ignore[attr-defined]

    def no_device(*args, **kwargs):
        raise AssertionError("a session was opened on the EP's device")

    monkeypatch.setattr(compat, "check_stage_with", no_device)  # check_stage asks through it too
    first = prepare_route(bundle, ep_target("qnn"), compile=Compiling(runner=fake), require_available=False)
    again = prepare_route(bundle, ep_target("qnn"), compile=Compiling(runner=fake), require_available=False)
    assert (first.cache, again.cache) == ("miss", "hit") and again.path == first.path
