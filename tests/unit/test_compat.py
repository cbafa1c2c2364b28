"""Compatibility before reuse: onnxruntime's answer, else a session with the run's options (real QNN emulator)."""

from __future__ import annotations

import shutil

import pytest

from tests.conftest import BUNDLES
from winml_perf.bundle.epcontext import compat
from winml_perf.bundle.prepare import Compiling, prepare_route
from winml_perf.ep.devices import Target

QNN = "QNNExecutionProvider"
QNN_TARGET = Target("ep", "qnn", None, QNN, "cpu")


@pytest.fixture
def npu_bundle(tmp_path):
    pytest.importorskip("onnxruntime_qnn")
    bundle = tmp_path / "npu"
    shutil.copytree(BUNDLES / "tiny-qwen2-npu", bundle, ignore=shutil.ignore_patterns("_compiled"))
    return bundle


def test_a_soc_88_binary_under_htp_arch_68_is_found_by_a_session_and_recompiled_once(npu_bundle, monkeypatch):
    first = prepare_route(
        npu_bundle,
        QNN_TARGET,
        ["iterator"],
        compile=Compiling(),
        require_available=False,
        ep_options={"soc_model": "88"},
    )
    (compiled,) = [c for c in first.compile if c.status == "compiled"]
    assert compiled.compatibility["verdict"] == "verified" and compiled.compatibility["source"] == "session"
    # The same artifact, now to be run where the options say htp_arch=68 (e.g. another machine's settings):
    other = {"backend_type": "htp", "htp_arch": "68"}
    check_stage_with = compat.check_stage_with
    monkeypatch.setattr(
        compat, "check_stage_with", lambda folder, out, ep, options, *a: check_stage_with(folder, out, ep, other, *a)
    )
    verdict = compat.check_stage(first.path, compiled.output, QNN, {"backend_type": "htp", "htp_arch": "68"})
    assert (
        verdict.verdict == "failed"
        and verdict.source == "session"
        and "QNN_CONTEXT_ERROR_CREATE_FROM_BINARY" in verdict.detail
    )
    again = prepare_route(
        npu_bundle,
        QNN_TARGET,
        ["iterator"],
        compile=Compiling(),
        require_available=False,
        ep_options={"soc_model": "88"},
    )
    assert again.cache == "miss" and "recompiling" in again.cache_reason
    assert (
        "QNN_CONTEXT_ERROR_CREATE_FROM_BINARY" in again.cache_reason
        and "unknown" not in again.cache_reason.split("(")[0]
    )


def test_a_kept_session_verdict_makes_a_hit_need_no_session(npu_bundle, monkeypatch):
    first = prepare_route(npu_bundle, QNN_TARGET, ["iterator"], compile=Compiling(), require_available=False)
    monkeypatch.setattr(compat, "load_error", lambda *a: pytest.fail("a hit with a kept verdict opened a session"))
    again = prepare_route(npu_bundle, QNN_TARGET, ["iterator"], compile=Compiling(), require_available=False)
    assert again.cache == "hit" and again.path == first.path
    (compiled,) = [c for c in again.compile if c.status == "compiled"]
    assert compiled.compatibility["source"] == "memo" and compiled.compatibility["status"] == "EMULATED_DEVICE"


def test_without_compatibility_info_the_verdict_is_unknown_then_a_session_decides(tmp_path):
    import onnx
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    model = tmp_path / "relu.onnx"
    onnx.save(
        helper.make_model(
            helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y]),
            opset_imports=[helper.make_opsetid("", 17)],
            ir_version=9,
        ),
        model,
    )
    asked = compat.ask_onnxruntime(model, "CPUExecutionProvider")
    assert asked.verdict == "unknown" and asked.status == "NO_INFO"
    assert compat.check(model, "CPUExecutionProvider", {}).verdict == "verified"
    (tmp_path / "broken.onnx").write_bytes(model.read_bytes()[:40])
    broken = compat.check(tmp_path / "broken.onnx", "CPUExecutionProvider", {})
    assert broken.verdict == "failed" and broken.status == "ERROR" and broken.source == "session"
