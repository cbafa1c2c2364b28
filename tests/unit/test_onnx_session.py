"""OnnxSession on the CPU EP with the small models of tests/models.py: runs, IO binding, checks, errors."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from tests import models
from winml_perf.ep import table
from winml_perf.ep.devices import Target
from winml_perf.session.onnx_options import (
    options_from_flags,
    parse_graph_optimization_level,
    parse_session_config,
    parse_threads,
)
from winml_perf.session.onnx_session import OnnxIO, OnnxSession, OnnxSettings, ort_ep_devices, preflight
from winml_perf.support.errors import EXIT_USAGE, BundleError, EPUnavailableError, UsageError


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("onnx_models")
    models.mlp(d / "mlp.onnx")
    models.dynamic_batch(d / "dyn.onnx")
    models.multi_io(d / "multi.onnx")
    return d


# -- flag parsing -------------------------------------------------------------------------------------
def test_graph_optimization_levels():
    assert [parse_graph_optimization_level(x) for x in ("disable", "BASIC", "extended", "layout", "all")] == [
        "disable",
        "basic",
        "extended",
        "layout",
        "all",
    ]
    assert parse_graph_optimization_level("ORT_ENABLE_ALL") == "all"
    assert parse_graph_optimization_level(None) == "all"
    with pytest.raises(UsageError, match="disable|basic|extended|layout|all"):
        parse_graph_optimization_level("max")


def test_session_config_and_threads():
    assert parse_session_config(["session.intra_op.allow_spinning=0", "a.b= x=y "]) == {
        "session.intra_op.allow_spinning": "0",
        "a.b": "x=y",
    }
    with pytest.raises(UsageError, match="KEY=VALUE"):
        parse_session_config(["novalue"])
    with pytest.raises(UsageError, match="twice"):
        parse_session_config(["a=1", "a=2"])
    assert parse_threads(None, "--intra-op-threads") is None and parse_threads(4, "--intra-op-threads") == 4
    with pytest.raises(UsageError, match="--inter-op-threads"):
        parse_threads(-1, "--inter-op-threads")


def test_ep_devices_helper_returns_ort_objects():
    import onnxruntime as ort

    devices = ort_ep_devices("CPUExecutionProvider", "cpu")
    assert devices and all(isinstance(d, ort.OrtEpDevice) and d.ep_name == "CPUExecutionProvider" for d in devices)
    assert ort_ep_devices("CPUExecutionProvider", "npu") == []


# -- running --------------------------------------------------------------------------------------------
def test_mlp_matches_numpy_and_reports(model_dir):
    settings = OnnxSettings(
        intra_op_threads=1, inter_op_threads=1, session_config={"session.intra_op.allow_spinning": "0"}
    )
    with OnnxSession(model_dir / "mlp.onnx", ep="cpu", settings=settings) as s:
        (y,) = s.run()
        np.testing.assert_allclose(y, models.reference_mlp(s.feeds["x"]), rtol=1e-5, atol=1e-5)
        ms = s.run_timed()
        d = s.describe()
    assert ms > 0 and s.session_create_ms > 0 and s.load_ms >= s.session_create_ms
    assert d["providers"] == ["CPUExecutionProvider"] and d["creation"] == "ep-devices"
    assert d["ep_device"]["ep_name"] == "CPUExecutionProvider" and d["target"]["label"] == "ep=cpu"
    assert d["options"]["intra_op_threads"] == 1 and d["options"]["session_config"] == {
        "session.intra_op.allow_spinning": "0"
    }
    assert d["inputs"][0]["shape"] == [1, 8] and d["outputs"][0]["name"] == "y"
    assert sum(d["node_assignment"].values()) >= 1 and set(d["node_assignment"]) == {"CPUExecutionProvider"}
    assert d["io_binding"] == {"enabled": False, "input_device": "cpu", "output_device": "cpu"}
    json.dumps(d)


def test_default_target_is_auto_device(model_dir):
    with OnnxSession(model_dir / "mlp.onnx") as s:
        assert s.target.kind == "device" and s.target.requested_device is None
        assert s.target.ep in s.providers


def test_dynamic_batch_from_shape_flag(model_dir):
    with OnnxSession(model_dir / "dyn.onnx", ep="cpu", io=OnnxIO(shapes={"x": [3, 8]})) as s:
        (y,) = s.run()
        x = s.feeds["x"]
    assert x.shape == (3, 8) and y.shape == (3, 4)
    np.testing.assert_allclose(y, models.reference_mlp(x), rtol=1e-5, atol=1e-5)


def test_real_input_file(model_dir, tmp_path):
    data = np.linspace(-1, 1, 16, dtype=np.float32).reshape(2, 8)
    np.save(tmp_path / "x.npy", data)
    with OnnxSession(model_dir / "dyn.onnx", ep="cpu", io=OnnxIO(inputs={"x": str(tmp_path / "x.npy")})) as s:
        (y,) = s.run()
    np.testing.assert_allclose(y, models.reference_mlp(data), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("level", ["disable", "basic", "all"])
def test_io_binding_equals_plain_run(model_dir, level):
    kwargs = dict(ep="cpu", shapes={"features": [2, 3, 4]}, graph_optimization_level=level, seed=3)
    with OnnxSession.from_options(model_dir / "multi.onnx", **kwargs) as plain:
        expected = plain.run()
    with OnnxSession.from_options(model_dir / "multi.onnx", io_binding=True, **kwargs) as bound:
        first = bound.run()  # first bound run: onnxruntime allocates outputs, then they are pinned
        assert bound._outputs_pinned
        bound.run_timed()
        again = bound.run()  # later runs reuse the pinned buffers
        io = bound.describe()["io_binding"]
    assert [o.shape for o in expected] == [(2, 3, 4), (2, 3), (2, 3)]
    for e, a, b in zip(expected, first, again):
        assert e.dtype == a.dtype and np.array_equal(e, a) and np.array_equal(e, b)
    assert io["enabled"] and io["input_device"] == "cpu" and io["output_device"] == "cpu" and io["note"] is None


def test_io_binding_run_timed_first(model_dir):
    with OnnxSession(model_dir / "mlp.onnx", ep="cpu", io=OnnxIO(io_binding=True)) as s:
        assert s.run_timed() > 0 and s.run_timed() > 0
        (y,) = s.run()
        x = s.feeds["x"]
    np.testing.assert_allclose(y, models.reference_mlp(x), rtol=1e-5, atol=1e-5)


def test_io_binding_device_refused_goes_to_host_and_says_why(model_dir, monkeypatch):
    cpu = table.EPS["CPUExecutionProvider"]
    monkeypatch.setitem(table.EPS, cpu.name, dataclasses.replace(cpu, io_device="cuda"))  # no CUDA allocator here
    with OnnxSession(model_dir / "mlp.onnx", ep="cpu", io=OnnxIO(io_binding=True)) as s:
        (y,) = s.run()
        x = s.feeds["x"]
        io = s.describe()["io_binding"]
    assert io["input_device"] == "cpu" and io["output_device"] == "cpu"
    assert "refused cuda tensors" in io["note"]
    np.testing.assert_allclose(y, models.reference_mlp(x), rtol=1e-5, atol=1e-5)


def test_lifecycle(model_dir):
    s = OnnxSession(model_dir / "mlp.onnx", ep="cpu")
    with pytest.raises(RuntimeError, match="not loaded"):
        s.run_timed()
    s.load()
    assert s.loaded and s.load() is s
    s.unload()
    assert not s.loaded


def test_options_from_flags_build_a_session(model_dir, tmp_path):
    np.save(tmp_path / "f.npy", np.ones((1, 2, 4), np.float32))
    options = options_from_flags(
        ep="cpu",
        shape=["seq=2"],
        input=[f"features={tmp_path / 'f.npy'}"],
        io_binding=True,
        intra_op_threads=2,
        graph_optimization_level="extended",
        session_config=["session.intra_op.allow_spinning=0"],
    )
    assert json.loads(json.dumps(options)) == options  # travels to a child process as is
    with OnnxSession.from_options(model_dir / "multi.onnx", **options) as s:
        scaled, total, _ = s.run()
        d = s.describe()
    assert total.shape == (1, 2) and np.allclose(total, 4.0)
    assert d["options"]["graph_optimization_level"] == "extended" and d["io_binding"]["enabled"]


# -- what ran: no silent fallback --------------------------------------------------------------------
def test_fallback_to_cpu_is_an_error(model_dir, monkeypatch):
    """onnxruntime silently runs on CPU when the asked EP cannot start: the session must refuse."""
    webgpu = Target("ep", "webgpu", None, "WebGpuExecutionProvider", "gpu")
    monkeypatch.setattr("winml_perf.ep.devices.resolve_target", lambda ep, device, runtime: webgpu)
    monkeypatch.setattr(OnnxSession, "_add_provider", lambda self, so: None)  # onnxruntime ends up with CPU only
    s = OnnxSession(model_dir / "mlp.onnx", ep="webgpu")
    with pytest.raises(
        EPUnavailableError, match="asked for WebGpuExecutionProvider.*CPUExecutionProvider only"
    ) as info:
        s.load()
    assert info.value.exit_code == EXIT_USAGE and not s.loaded


def test_partial_placement_warning():
    s = OnnxSession("unused.onnx")
    s.target = Target("ep", "webgpu", None, "WebGpuExecutionProvider", "gpu")
    s.node_assignment = {"WebGpuExecutionProvider": 5, "CPUExecutionProvider": 2}
    (w,) = s._placement_warnings()
    assert w["code"] == "ep_partial_fallback" and "2 of 7 nodes did not run on WebGpuExecutionProvider" in w["message"]
    s.node_assignment = {"WebGpuExecutionProvider": 7}
    assert s._placement_warnings() == []


def test_actual_route_names_the_ep_that_ran(model_dir):
    with OnnxSession(model_dir / "mlp.onnx", ep="cpu") as s:
        actual = s.actual_route()
    assert actual["model"] == "CPUExecutionProvider" and actual["session"]["providers"] == ["CPUExecutionProvider"]


# -- bad input -------------------------------------------------------------------------------------------
def test_not_an_onnx_file(tmp_path):
    bad = tmp_path / "notes.onnx"
    bad.write_text("this is not a model")
    with pytest.raises(BundleError, match="notes.onnx: not an ONNX model") as info:
        OnnxSession(bad, ep="cpu").load()
    assert info.value.exit_code == EXIT_USAGE


def test_missing_model_file(tmp_path):
    with pytest.raises(BundleError, match="model file not found"):
        OnnxSession(tmp_path / "nope.onnx", ep="cpu").load()


def test_a_bundle_folder_is_named_a_folder_not_a_missing_file(tmp_path):
    # winml perf BUNDLE --runtime winml said "BUNDLE: model file not found" of a folder that exists
    with pytest.raises(BundleError) as info:
        OnnxSession(tmp_path, ep="cpu").load()
    assert str(info.value).startswith(f"{tmp_path} is a folder, not an .onnx file")
    assert "--runtime winml-genai" in info.value.remedy and info.value.exit_code == EXIT_USAGE


def test_bad_inputs_fail_at_load(model_dir, tmp_path):
    with pytest.raises(UsageError, match="no input or dimension named 'nope'"):
        OnnxSession(model_dir / "mlp.onnx", ep="cpu", io=OnnxIO(shapes={"nope": [1]})).load()
    with pytest.raises(UsageError, match="'seq'"):
        OnnxSession(model_dir / "multi.onnx", ep="cpu").load()
    np.save(tmp_path / "i.npy", np.ones((1, 8), np.int32))
    with pytest.raises(UsageError, match="dtype int32"):
        OnnxSession(model_dir / "mlp.onnx", ep="cpu", io=OnnxIO(inputs={"x": str(tmp_path / "i.npy")})).load()


def test_preflight_checks_without_target(model_dir, tmp_path):
    out = preflight(model_dir / "multi.onnx", {"ep": "webgpu", "io_binding": True, "shapes": {"seq": [4]}})
    assert [i["shape"] for i in out["inputs"]] == [[1, 4, 4], [1], [1, 4]]
    with pytest.raises(UsageError, match="model has no input 'y'"):
        np.save(tmp_path / "y.npy", np.ones((1, 8), np.float32))
        preflight(model_dir / "mlp.onnx", {"inputs": {"y": str(tmp_path / "y.npy")}})
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x00\x01garbage")
    with pytest.raises(BundleError, match="not an ONNX model"):
        preflight(bad, {})


def test_preflight_accepts_the_fallback_rule_meant_for_the_target_session(model_dir):
    """Issue 23 finding 5: the preflight CPU session inherited session.disable_cpu_ep_fallback=1 and
    onnxruntime refused it ("Conflicting session configuration"), so every such run exited 2.
    Failed before: preflight raised."""
    out = preflight(model_dir / "mlp.onnx", {"session_config": {"session.disable_cpu_ep_fallback": "1"}})
    assert [i["name"] for i in out["inputs"]] == ["x"]


def test_flat_options_go_to_their_groups_and_an_unknown_one_is_refused(model_dir):
    """SessionSpec.options is flat JSON; from_options sorts each key into OnnxIO, OnnxSettings or the session's own."""
    s = OnnxSession.from_options(
        model_dir / "mlp.onnx", ep="cpu", shapes={"x": [1, 8]}, seed=3, intra_op_threads=2, prepared=True
    )
    assert (s.ep_requested, s.shapes, s.seed, s.intra_op_threads, s.prepared) == ("cpu", {"x": (1, 8)}, 3, 2, True)
    with pytest.raises(TypeError, match="nope"):
        OnnxSession.from_options(model_dir / "mlp.onnx", nope=1)
