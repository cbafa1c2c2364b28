"""bundle/derive.py's one verdict step for a derived bundle's compiled stages (``_shown``): a hit on a
device shows the verdict its freshness check found (it is not checked again), a stage just compiled or
made device-free is not checked, a stage's options come from the plan's config (the derived bundle's
config is not read for them), and each EP's plugin identity is the one the derived bundle was keyed
under (asked once a route, in derive.py)."""

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


PLUGINS = {QNN: QNN_PLUGIN}
PLAN_CONFIG = "the plan's config"


@pytest.fixture
def options(monkeypatch) -> list:
    """Every (config, stage) whose options are asked (each stage's options are soc_model=60 here)."""
    asked: list = []
    monkeypatch.setattr(
        compat, "stage_options", lambda config, stage: asked.append((config, stage)) or {"soc_model": "60"}
    )
    monkeypatch.setattr(plugins, "plugin_identity", lambda ep: pytest.fail("the plugin identity asked again"))
    return asked


def _compiled(compatibility=None) -> CompileOutcome:
    return CompileOutcome(("decoder",), "decoder.onnx", QNN, "decoder_ctx.onnx", "compiled", "", 1.0, compatibility)


def test_a_stage_just_compiled_keeps_the_compile_childs_verdict_and_reads_no_config(tmp_path, options, monkeypatch):
    monkeypatch.setattr(compat, "check_stage_with", lambda *a, **k: pytest.fail("checked again"))
    nothing = CompileOutcome(("embed",), "embed.onnx", QNN, None, "nothing to compile", "no EPContext")
    outcomes = (_compiled(KEPT), nothing)
    assert derive._shown(outcomes, tmp_path, PLAN_CONFIG, PLUGINS, None) == outcomes  # type: ignore[arg-type]
    assert options == []


def test_a_hit_on_a_device_shows_the_verdict_its_freshness_check_found(tmp_path, options, monkeypatch):
    monkeypatch.setattr(compat, "check_stage_with", lambda *a, **k: pytest.fail("checked again"))
    fit = compat.Verdict("compatible", "onnxruntime", "EP_SUPPORTED_OPTIMAL", "v", "checked")
    checked = {"decoder_ctx.onnx": fit.to_dict()}
    (out,) = derive._shown((_compiled(KEPT),), tmp_path, PLAN_CONFIG, PLUGINS, checked)  # type: ignore[arg-type]
    assert out.compatibility == fit.to_dict()  # this reuse's answer, not the kept one
    assert options == []  # its options served the check


def test_a_stage_made_device_free_is_shown_not_checked_with_how_it_was_made(tmp_path, options, monkeypatch):
    monkeypatch.setattr(compat, "check_stage_with", lambda *a, **k: pytest.fail("a session on the build server"))
    made = {"made": "device-free", "compatibility_info": "info", "target_options": {"soc_model": "60"}}
    made |= {"package": "onnxruntime-qnn", "version": "2.6.0", "sdk_version": "2.51"}
    (tmp_path / PREPARED_FILE).write_text(json.dumps({"stages": {"decoder_ctx.onnx": made}}), encoding="utf-8")
    (out,) = derive._shown((_compiled(),), tmp_path, PLAN_CONFIG, PLUGINS, None)  # type: ignore[arg-type]
    assert options == [(PLAN_CONFIG, "decoder")]  # the plan's config: the derived bundle's is not read
    shown = dict(out.compatibility or {})
    assert (shown["verdict"], shown["status"], shown["info"]) == ("unknown", "NOT_CHECKED", "info")
    assert shown["prepared"]["built"]["made"] == "device-free"
    assert shown["prepared"]["matched"] == "mismatch: version 2.6.0 -> 2.7.0"  # the keyed plugin, running now
