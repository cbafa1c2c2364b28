"""EPContext compile: job grouping, nothing-to-compile, child process success / failure / timeout, compatibility."""

from __future__ import annotations

import json

import onnx
import pytest
from onnx import TensorProto, helper

from tests.unit.bundle_fakes import (
    cpu_compiles,
    ep_target,
    fake_model_bytes,
    make_bundle,
    pipeline_config,
    unframed,
)
from winml_perf.bundle.config import load_config
from winml_perf.bundle.epcontext import compile as compiler
from winml_perf.bundle.prepare import Compiling, prepare_route
from winml_perf.bundle.routing import plan_route
from winml_perf.support.errors import BundleError

CPU = "CPUExecutionProvider"


def _tiny_model(path):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9), path)


def test_shared_source_compiled_once_and_cpu_stages_have_nothing_to_compile(tmp_path):
    plan = plan_route(load_config(make_bundle(tmp_path, pipeline_config())), ep_target("qnn"), ["context", "iterator"])
    jobs, notes = compiler.compile_jobs(plan)
    assert [(j.stages, j.source, j.output) for j in jobs] == [
        (("context", "iterator"), "transformer.onnx", "context_qnn_ctx.onnx")
    ]
    assert {n.stages[0]: n.status for n in notes} == {
        "embeddings": "nothing to compile",
        "lm_head": "nothing to compile",
    }


def test_cpu_route_with_compile_is_nothing_to_compile(tmp_path):
    bundle = make_bundle(tmp_path, pipeline_config())
    prepared = prepare_route(bundle, ep_target("cpu"), compile=Compiling(), require_available=False)
    assert {c.status for c in prepared.compile} == {"nothing to compile"}
    assert prepared.path == prepare_route(bundle, ep_target("cpu"), require_available=False).path


@pytest.fixture
def real_bundle(tmp_path, monkeypatch):
    """A pipeline whose stage files are real (tiny) ONNX models; CPU is treated as a compiling EP."""
    raw = pipeline_config()
    del raw["model"]["decoder"]["pipeline"][0]["embeddings"]  # two compile jobs keep the test quick
    bundle = make_bundle(tmp_path, raw)
    for name in ("transformer.onnx", "lm_head.onnx"):
        _tiny_model(bundle / name)
    cpu_compiles(monkeypatch)
    return bundle


def test_compile_in_child_writes_ctx_model_and_rewrites_filenames(real_bundle):
    prepared = prepare_route(real_bundle, ep_target("cpu"), compile=Compiling(), require_available=False)
    compiled = {c.output: c for c in prepared.compile if c.status == "compiled"}
    assert set(compiled) == {"context_cpu_ctx.onnx", "lm_head_cpu_ctx.onnx"}
    assert compiled["context_cpu_ctx.onnx"].stages == ("context", "iterator")
    onnx.load(prepared.path / "context_cpu_ctx.onnx")  # a valid model
    stages = json.loads((prepared.path / "genai_config.json").read_text())["model"]["decoder"]["pipeline"][0]
    assert stages["iterator"]["filename"] == "context_cpu_ctx.onnx"
    again = prepare_route(real_bundle, ep_target("cpu"), compile=Compiling(), require_available=False)
    assert again.cache == "hit" and again.path == prepared.path


def test_compile_failure_falls_back_to_source_model(real_bundle):
    (real_bundle / "lm_head.onnx").write_bytes(fake_model_bytes(b"not an onnx model"))  # whole, but no model
    prepared = prepare_route(real_bundle, ep_target("cpu"), compile=Compiling(), require_available=False)
    failed = [c for c in prepared.compile if c.status == "failed"]
    assert failed and failed[0].stages == ("lm_head",) and "keeps its source model" in failed[0].reason
    assert any("lm_head" in w for w in prepared.warnings)
    stages = json.loads((prepared.path / "genai_config.json").read_text())["model"]["decoder"]["pipeline"][0]
    assert stages["lm_head"]["filename"] == "lm_head.onnx"


def test_a_model_the_ep_claims_no_node_of_is_a_note_not_a_failure(real_bundle, monkeypatch):
    monkeypatch.setattr(compiler, "CHILD_MODULE", "tests.unit.child_no_nodes")
    plan = plan_route(load_config(real_bundle), ep_target("cpu"), ["lm_head"])
    jobs, _ = compiler.compile_jobs(plan)
    outcome = compiler.compile_in_child(jobs[0], real_bundle, real_bundle.parent, timeout_s=60)
    assert outcome.status == "nothing to compile" and outcome.output is None and "claims no node" in outcome.reason


def test_an_ep_that_errs_choosing_its_nodes_is_a_failed_compile_naming_its_error(real_bundle, monkeypatch):
    # onnxruntime says no node compiled, but the EP never looked (QNN given a soc_model it has no device for)
    monkeypatch.setattr(compiler, "CHILD_MODULE", "tests.unit.child_ep_setup_fails")
    plan = plan_route(load_config(real_bundle), ep_target("cpu"), ["lm_head"])
    jobs, _ = compiler.compile_jobs(plan)
    outcome = compiler.compile_in_child(jobs[0], real_bundle, real_bundle.parent, timeout_s=60)
    assert outcome.status == "failed" and outcome.output is None
    assert "claims no node" not in outcome.reason
    assert outcome.reason == (
        "cpu failed while choosing the nodes it takes: [ONNXRuntimeError] : 11 : EP_FAIL : QNN SetupBackend failed "
        "Failed to create device. Error: QNN_DEVICE_ERROR_INVALID_CONFIG: Invalid config values; "
        "the stage keeps its source model"
    )


def test_compile_timeout_falls_back(real_bundle, monkeypatch):
    monkeypatch.setattr(compiler, "CHILD_MODULE", "tests.unit.child_hangs")  # a compile child that hangs
    plan = plan_route(load_config(real_bundle), ep_target("cpu"), ["lm_head"])
    jobs, _ = compiler.compile_jobs(plan)
    outcome = compiler.compile_in_child(jobs[0], real_bundle, real_bundle.parent, timeout_s=0.5)
    assert outcome.status == "timeout" and outcome.output is None and "--compile-timeout" in outcome.reason


def test_compatibility_without_info_is_not_checked(real_bundle):
    status, detail = compiler.compatibility(real_bundle / "lm_head.onnx", "QNNExecutionProvider")
    assert status == "NOT_CHECKED" and "ep_compatibility_info" in detail


def test_incompatible_compiled_stage_is_recompiled(real_bundle, monkeypatch):
    first = prepare_route(real_bundle, ep_target("cpu"), compile=Compiling(), require_available=False)
    from winml_perf.bundle.epcontext import compat

    monkeypatch.setattr(
        compat,
        "ask_onnxruntime",
        lambda path, ep: compat.Verdict("recompile", "onnxruntime", "EP_UNSUPPORTED", "v", "fake device"),
    )
    second = prepare_route(real_bundle, ep_target("cpu"), compile=Compiling(), require_available=False)
    assert second.cache == "miss" and "EP_UNSUPPORTED" in second.cache_reason and "recompiling" in second.cache_reason
    assert second.path == first.path and (second.path / "manifest.json").is_file()


def test_compile_child_receives_ep_library_plugins(real_bundle, monkeypatch):
    """A plugin given only by --ep-library reaches the compile child: it is registered there from
    the specs this process hands it (the child discovers nothing by itself)."""
    from winml_perf.ep import plugins

    webgpu = pytest.importorskip("onnxruntime_ep_webgpu")
    path = webgpu.get_library_path()
    plugins.register_plugin_eps([f"webgpu={path}"], env={}, discover=False)  # what --ep-library does at the edge
    monkeypatch.setattr(compiler, "CHILD_MODULE", "tests.unit.child_probes")  # writes what it sees to OUT
    prepared = prepare_route(real_bundle, ep_target("cpu"), compile=Compiling(), require_available=False)
    reports = [
        json.loads(unframed((prepared.path / c.output).read_bytes()))
        for c in prepared.compile
        if c.status == "compiled"
    ]
    assert len(reports) == 2
    for report in reports:
        assert report["registered"].get("WebGpuExecutionProvider") == path and report["discovered"] is False


def test_bundle_prepare_registers_ep_library_before_compiling(monkeypatch):
    """`winml bundle prepare --ep X --ep-library ...` registers the flag's library before anything
    (formerly only with --device), so the compile children get it."""
    from winml_perf.commands import bundle as bundle_cmd

    calls = []
    monkeypatch.setattr(
        "winml_perf.ep.plugins.register_plugin_eps", lambda extra=(), *a, **k: calls.append(list(extra)) or []
    )
    target = bundle_cmd.target_for("qnn", None, ["qnn=/opt/qnn/libQnnHtp.so"])
    assert calls == [["qnn=/opt/qnn/libQnnHtp.so"]] and target.ep == "QNNExecutionProvider"


def test_each_stage_is_compiled_at_the_level_it_loads_at_and_the_level_is_keyed(tmp_path):
    """Issue 23 finding 2: ModelCompiler's default (ORT_DISABLE_ALL) made the NPU context stage fail to
    load at genai's ORT_ENABLE_ALL. Failed before: jobs had no level and the key did not hold it."""
    raw = pipeline_config()
    raw["model"]["decoder"]["pipeline"][0]["context"]["session_options"] = {
        "provider_options": [],
        "graph_optimization_level": "ORT_ENABLE_BASIC",
    }
    raw["model"]["decoder"]["pipeline"][0]["context"]["filename"] = "context.onnx"
    bundle = make_bundle(tmp_path, raw)
    plan = plan_route(load_config(bundle), ep_target("qnn"), ["context", "iterator"])
    jobs, _ = compiler.compile_jobs(plan)
    levels = {j.stages: j.graph_optimization_level for j in jobs}
    assert levels == {("context",): "basic", ("iterator",): "all"}  # iterator: onnxruntime-genai's default
    assert all(j.key_dict()["graph_optimization_level"] == j.graph_optimization_level for j in jobs)


def test_a_stage_level_onnxruntime_does_not_know_is_a_bundle_error_naming_the_key(tmp_path):
    raw = pipeline_config()
    raw["model"]["decoder"]["session_options"]["graph_optimization_level"] = "fast"
    plan = plan_route(load_config(make_bundle(tmp_path, raw)), ep_target("qnn"), ["lm_head"])
    with pytest.raises(BundleError, match="graph_optimization_level"):
        compiler.compile_jobs(plan)
