"""bundle/prepare.py's one verdict step for a derived bundle's compiled stages (``_verdicts``): a hit on a
device shows the verdict its freshness check found (derive.py hands it on; it is not checked again), a
stage just compiled or made device-free is not checked, the derived config is read only for a stage whose
options are needed, and each EP's plugin identity is the one the derived bundle was keyed under (asked
once a route, in derive.py)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from winml_perf.bundle import prepare
from winml_perf.bundle.derive import DeriveResult
from winml_perf.bundle.epcontext import compat
from winml_perf.bundle.epcontext.provenance import PREPARED_FILE
from winml_perf.ep import plugins
from winml_perf.model.route import CompileOutcome

QNN = "QNNExecutionProvider"
QNN_PLUGIN = {"package": "onnxruntime-qnn", "version": "2.7.0", "sdk_version": "2.51", "library_sha256": "a" * 64}
KEPT = {"verdict": "verified", "source": "session", "status": "NO_INFO", "info": None, "detail": "loads"}


class _Book:
    """A ConfigBook that counts its reads (every stage's options are {} here)."""

    def __init__(self) -> None:
        self.reads = 0

    def of(self, bundle):
        self.reads += 1
        return "config"


@pytest.fixture
def options(monkeypatch):
    monkeypatch.setattr(compat, "stage_options", lambda config, stage: {"soc_model": "60"})
    monkeypatch.setattr(plugins, "plugin_identity", lambda ep: pytest.fail("the plugin identity asked again"))


def _derived(folder, cache="hit") -> DeriveResult:
    return DeriveResult(folder, "k" * 64, cache, "", 0.0, 0.0, 0, plugins={QNN: QNN_PLUGIN})


def _compiled(compatibility=None) -> CompileOutcome:
    return CompileOutcome(("decoder",), "decoder.onnx", QNN, "decoder_ctx.onnx", "compiled", "", 1.0, compatibility)


def test_a_stage_just_compiled_keeps_the_compile_childs_verdict_and_reads_no_config(tmp_path, options, monkeypatch):
    monkeypatch.setattr(compat, "check_stage_with", lambda *a, **k: pytest.fail("checked again"))
    book = _Book()
    nothing = CompileOutcome(("embed",), "embed.onnx", QNN, None, "nothing to compile", "no EPContext")
    outcomes = (_compiled(KEPT), nothing)
    assert prepare._verdicts(_derived(tmp_path, "miss"), outcomes, book, check=False) == outcomes  # type: ignore[arg-type]
    assert book.reads == 0


def test_a_hit_on_a_device_shows_the_verdict_its_freshness_check_found(tmp_path, options, monkeypatch):
    monkeypatch.setattr(compat, "check_stage_with", lambda *a, **k: pytest.fail("checked again"))
    fit = compat.Verdict("compatible", "onnxruntime", "EP_SUPPORTED_OPTIMAL", "v", "checked")
    book = _Book()
    hit = replace(_derived(tmp_path), verdicts={"decoder_ctx.onnx": fit.to_dict()})
    (out,) = prepare._verdicts(hit, (_compiled(KEPT),), book, check=True)  # type: ignore[arg-type]
    assert out.compatibility == fit.to_dict()  # this reuse's answer, not the kept one
    assert book.reads == 0  # its options served the check, in derive.py


def test_a_stage_made_device_free_is_shown_not_checked_with_how_it_was_made(tmp_path, options, monkeypatch):
    monkeypatch.setattr(compat, "check_stage_with", lambda *a, **k: pytest.fail("a session on the build server"))
    made = {"made": "device-free", "compatibility_info": "info", "target_options": {"soc_model": "60"}}
    made |= {"package": "onnxruntime-qnn", "version": "2.6.0", "sdk_version": "2.51"}
    (tmp_path / PREPARED_FILE).write_text(json.dumps({"stages": {"decoder_ctx.onnx": made}}), encoding="utf-8")
    (out,) = prepare._verdicts(_derived(tmp_path, "miss"), (_compiled(),), _Book(), check=False)  # type: ignore[arg-type]
    shown = dict(out.compatibility or {})
    assert (shown["verdict"], shown["status"], shown["info"]) == ("unknown", "NOT_CHECKED", "info")
    assert shown["prepared"]["built"]["made"] == "device-free"
    assert shown["prepared"]["matched"] == "mismatch: version 2.6.0 -> 2.7.0"  # the keyed plugin, running now
