"""bundle/derive.py's one verdict step for a derived bundle's compiled stages (``_shown``): a hit on a
device shows the verdict its freshness check found (it is not checked again), a stage just compiled or
made device-free is not checked, and a stage's options and its EP's plugin identity are those derive.py
holds for the route (each asked once a route: the options from the plan's config, the identity the
derived bundle was keyed under)."""

from __future__ import annotations

import json

import pytest

from winml_perf.bundle import derive
from winml_perf.bundle.epcontext import compat
from winml_perf.bundle.epcontext.provenance import PREPARED_FILE
from winml_perf.ep import plugins
from winml_perf.model.route import CompileOutcome

QNN = "QNNExecutionProvider"
QNN_PLUGIN = {"package": "onnxruntime-qnn", "version": "2.7.0", "sdk_version": "2.51", "library_sha256": "a" * 64}
KEPT = {"verdict": "verified", "source": "session", "status": "NO_INFO", "info": None, "detail": "loads"}


@pytest.fixture
def sources(tmp_path, monkeypatch):
    """What derive.py holds for a route: here each stage's options (soc_model=60) and QNN's identity."""
    monkeypatch.setattr(plugins, "plugin_identity", lambda ep: pytest.fail("the plugin identity asked again"))
    return derive._Sources(tmp_path, [], {QNN: QNN_PLUGIN}, {"decoder": {"soc_model": "60"}})


def _compiled(compatibility=None) -> CompileOutcome:
    return CompileOutcome(("decoder",), "decoder.onnx", QNN, "decoder_ctx.onnx", "compiled", "", 1.0, compatibility)


def test_a_stage_just_compiled_keeps_the_compile_childs_verdict(tmp_path, sources, monkeypatch):
    monkeypatch.setattr(compat, "check_stage_with", lambda *a, **k: pytest.fail("checked again"))
    nothing = CompileOutcome(("embed",), "embed.onnx", QNN, None, "nothing to compile", "no EPContext")
    outcomes = (_compiled(KEPT), nothing)
    assert derive._shown(outcomes, tmp_path, sources, None) == outcomes


def test_a_hit_on_a_device_shows_the_verdict_its_freshness_check_found(tmp_path, sources, monkeypatch):
    monkeypatch.setattr(compat, "check_stage_with", lambda *a, **k: pytest.fail("checked again"))
    fit = compat.Verdict("compatible", "onnxruntime", "EP_SUPPORTED_OPTIMAL", "v", "checked")
    checked = {"decoder_ctx.onnx": fit.to_dict()}
    (out,) = derive._shown((_compiled(KEPT),), tmp_path, sources, checked)
    assert out.compatibility == fit.to_dict()  # this reuse's answer, not the kept one


def test_a_stage_made_device_free_is_shown_not_checked_with_how_it_was_made(tmp_path, sources, monkeypatch):
    monkeypatch.setattr(compat, "check_stage_with", lambda *a, **k: pytest.fail("a session on the build server"))
    made = {"made": "device-free", "compatibility_info": "info", "target_options": {"soc_model": "68"}}
    made |= {"package": "onnxruntime-qnn", "version": "2.6.0", "sdk_version": "2.51"}
    (tmp_path / PREPARED_FILE).write_text(json.dumps({"stages": {"decoder_ctx.onnx": made}}), encoding="utf-8")
    (out,) = derive._shown((_compiled(),), tmp_path, sources, None)
    shown = dict(out.compatibility or {})
    assert (shown["verdict"], shown["status"], shown["info"]) == ("unknown", "NOT_CHECKED", "info")
    assert shown["prepared"]["built"]["made"] == "device-free"
    # the keyed plugin and the stage's options, as derive.py holds them for the route, running now
    assert shown["prepared"]["matched"] == "mismatch: version 2.6.0 -> 2.7.0; soc_model 68 -> 60"
