"""onnx_prepare: optimized model under _compiled/, cache hit/miss and why, prepared load, failures leave nothing."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import numpy as np
import pytest

from tests import models
from tests.conftest import needs_openvino_absent
from winml_perf.bundle import cache
from winml_perf.bundle.onnx_prepare import clean_onnx, prepare_onnx
from winml_perf.ep.devices import Target, resolve_target
from winml_perf.onnxfile.external_data import external_data_files
from winml_perf.session.onnx_session import OnnxSession
from winml_perf.support.errors import EXIT_USAGE, BundleError

CPU = Target("ep", "cpu", None, "CPUExecutionProvider", "cpu")


def _sha(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


def _compiled_entries(folder: Path) -> list[str]:
    root = folder / cache.COMPILED_DIR
    return sorted(p.name for p in root.iterdir() if not p.name.endswith(".lock")) if root.exists() else []


def test_prepare_writes_optimized_model_then_hits(tmp_path):
    model = models.multi_io(tmp_path / "multi.onnx")
    before = _sha(model)
    first = prepare_onnx(model, CPU, "all")
    assert (
        first.cache == "miss"
        and first.kind == "optimized"
        and first.cache_reason == "no prepared model for this route yet"
    )
    assert first.path.is_file() and first.path.name == "multi_cpu_all.onnx"
    assert first.folder.parent == tmp_path / "_compiled" and first.folder.name.startswith("multi-cpu-")
    manifest = json.loads((first.folder / "manifest.json").read_text())
    assert (
        manifest["key"] == first.key and manifest["kind"] == "optimized" and "multi_cpu_all.onnx" in manifest["files"]
    )
    second = prepare_onnx(model, CPU, "all")
    assert second.cache == "hit" and second.path == first.path and second.compile_ms == 0.0
    assert _sha(model) == before  # the source is never written
    json.dumps(first.to_dict())


def test_prepared_load_disables_optimisation_and_gives_same_outputs(tmp_path):
    model = models.multi_io(tmp_path / "multi.onnx")
    prepared = prepare_onnx(model, CPU, "all")
    opts = dict(ep="cpu", shapes={"seq": [3]}, seed=5)
    with OnnxSession.from_options(model, **opts) as plain:
        expected = plain.run()
    with OnnxSession.from_options(prepared.path, **opts, **prepared.session_options()) as ready:
        got = ready.run()
        d = ready.describe()
    for e, g in zip(expected, got):
        np.testing.assert_allclose(e, g, rtol=1e-6, atol=1e-6)
    assert d["options"]["graph_optimization_level"] == "disable"
    assert d["options"]["requested_graph_optimization_level"] == "all"
    assert d["prepared"] and d["source_model"] == str(model.resolve())
    assert d["session_create_ms"] > 0 and d["unprepared_session_create_ms"] > 0


def test_level_change_and_source_change_miss_with_reason(tmp_path):
    model = models.mlp(tmp_path / "mlp.onnx")
    all_level = prepare_onnx(model, CPU, "all")
    basic = prepare_onnx(model, CPU, "basic")
    assert basic.cache == "miss" and "graph_optimization_level" in basic.cache_reason and basic.path != all_level.path
    st = model.stat()
    os.utime(model, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    again = prepare_onnx(model, CPU, "basic")
    assert again.cache == "miss" and "source files" in again.cache_reason


def test_external_data_is_part_of_the_key(tmp_path):
    model = models.with_external_data(tmp_path / "ext.onnx")
    assert external_data_files(model) == ["ext.onnx.data"]
    first = prepare_onnx(model, CPU, "basic")
    with (
        OnnxSession(model, ep="cpu") as a,
        OnnxSession.from_options(first.path, ep="cpu", **first.session_options()) as b,
    ):
        np.testing.assert_allclose(a.run()[0], b.run()[0], rtol=1e-6, atol=1e-6)
    data = tmp_path / "ext.onnx.data"
    st = data.stat()
    os.utime(data, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    assert prepare_onnx(model, CPU, "basic").cache == "miss"


def test_broken_cache_folder_is_rebuilt(tmp_path):
    model = models.mlp(tmp_path / "mlp.onnx")
    first = prepare_onnx(model, CPU, "basic")
    (first.folder / "manifest.json").unlink()
    leftover = first.folder.parent / f".tmp-{first.folder.name}-999-dead"
    leftover.mkdir()
    again = prepare_onnx(model, CPU, "basic")
    assert again.cache == "miss" and "no valid manifest" in again.cache_reason
    assert not leftover.exists() and (again.folder / "manifest.json").is_file()
    first.path.unlink()
    third = prepare_onnx(model, CPU, "basic")
    assert third.cache == "miss" and "lacks mlp_cpu_basic.onnx" in third.cache_reason


def test_concurrent_prepares_agree(tmp_path):
    model = models.mlp(tmp_path / "mlp.onnx")
    results, errors = [], []

    def work():
        try:
            results.append(prepare_onnx(model, CPU, "extended"))
        except Exception as exc:  # pragma: no cover - reported by the assert below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len({r.path for r in results}) == 1 and [r.cache for r in results].count("miss") == 1
    assert _compiled_entries(tmp_path) == [results[0].folder.name]


def test_unwritable_model_folder_uses_cache_dir(tmp_path, monkeypatch):
    model = models.mlp(tmp_path / "models" / "mlp.onnx")
    cache_dir = tmp_path / "cache"
    monkeypatch.setenv(cache.CACHE_ENV, str(cache_dir))
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: False if Path(p) == model.parent else real_access(p, mode))
    prepared = prepare_onnx(model, CPU, "basic")
    assert cache_dir in prepared.path.parents and not (model.parent / cache.COMPILED_DIR).exists()


# -- failures -------------------------------------------------------------------------------------------
def test_not_onnx_leaves_nothing(tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_text("not a model")
    with pytest.raises(BundleError, match="bad.onnx: not an ONNX model") as info:
        prepare_onnx(bad, CPU, "all")
    assert info.value.exit_code == EXIT_USAGE
    assert _compiled_entries(tmp_path) == []


def test_missing_model_and_config_target(tmp_path):
    with pytest.raises(BundleError, match="model file not found"):
        prepare_onnx(tmp_path / "nope.onnx", CPU)
    with pytest.raises(BundleError, match="is a folder, not an .onnx file"):  # a bundle folder given by mistake
        prepare_onnx(tmp_path, CPU)
    assert _compiled_entries(tmp_path) == []
    model = models.mlp(tmp_path / "mlp.onnx")
    with pytest.raises(BundleError, match="needs an EP"):
        prepare_onnx(model, Target("config", None, None, None, None))


@needs_openvino_absent
def test_compiling_ep_without_its_device_fails_in_child_and_leaves_nothing(tmp_path, monkeypatch):
    """OpenVINO compiles to EPContext: the compile runs in a child; without an OpenVINO device here it is an
    error. (Not QNN: onnxruntime-qnn may be installed here, and its plugin is found by protocol.)"""
    calls = []
    monkeypatch.setattr(
        "winml_perf.ep.plugins.register_plugin_eps", lambda extra=(), *a, **k: calls.append(list(extra)) or []
    )
    model = models.mlp(tmp_path / "mlp.onnx")
    openvino = Target("ep", "openvino", None, "OpenVINOExecutionProvider", "npu")
    with pytest.raises(
        BundleError, match=r"compiling for OpenVINOExecutionProvider \(epcontext\) failed: .*no device for OpenVINO"
    ):
        prepare_onnx(model, openvino, "all", plugin_libraries=["openvino=/opt/ov/libopenvino_ep.so"])
    assert calls == [["openvino=/opt/ov/libopenvino_ep.so"]]  # plugin EPs are registered before compiling
    assert _compiled_entries(tmp_path) == []


def test_device_target_resolves_to_an_ep(tmp_path):
    model = models.mlp(tmp_path / "mlp.onnx")
    prepared = prepare_onnx(model, resolve_target(None, "cpu", "winml"), "basic")
    assert prepared.ep == "CPUExecutionProvider" and prepared.device == "cpu"


def test_clean_removes_only_this_models_copies(tmp_path):
    mlp = models.mlp(tmp_path / "mlp.onnx")
    other = models.multi_io(tmp_path / "mlp-b.onnx")  # a stem that starts like the first one's
    a, b = prepare_onnx(mlp, CPU, "basic"), prepare_onnx(other, CPU, "basic")
    removed = clean_onnx(mlp)
    assert a.folder in removed and not a.folder.exists() and b.folder.exists()
    assert (
        not (a.folder.parent / f".{a.folder.name}.lock").exists()
        and (b.folder.parent / f".{b.folder.name}.lock").exists()
    )
    assert prepare_onnx(mlp, CPU, "basic").cache == "miss"
