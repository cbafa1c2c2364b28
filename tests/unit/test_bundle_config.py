"""GenaiConfig: stage model for flat and pipeline bundles, validation at the edge, unknown keys kept."""

from __future__ import annotations

import json

import pytest

from tests.unit.bundle_fakes import FLAT_QNN, make_bundle, pipeline_config
from winml_perf.bundle.config import load_config, load_config_dict
from winml_perf.support.errors import BundleError


def test_flat_decoder_is_one_stage_named_decoder(tmp_path):
    cfg = load_config(make_bundle(tmp_path, FLAT_QNN))
    assert cfg.kind == "flat" and cfg.stage_names == ("decoder",)
    stage = cfg.stage("decoder")
    assert stage.files == ("model.onnx",) and stage.provider_keys == ("qnn",)
    assert stage.run_on_prompt and stage.run_on_token_gen and not stage.is_lm_head


@pytest.mark.parametrize("form", ["list", "object"])
def test_pipeline_stages_flags_and_inheritance(tmp_path, form):
    cfg = load_config(make_bundle(tmp_path, pipeline_config(form)))
    assert cfg.kind == "pipeline" and cfg.pipeline_form == form
    assert cfg.stage_names == ("embeddings", "context", "iterator", "lm_head")
    assert cfg.stage("context").run_on_token_gen is False and cfg.stage("iterator").run_on_prompt is False
    assert cfg.stage("lm_head").is_lm_head and cfg.stage("lm_head").inherits_session_options
    assert cfg.stage("lm_head").provider_options == ()  # the decoder's []
    assert cfg.stage("context").provider_keys == ("QNN",)


def test_inherited_stage_gets_decoder_options(tmp_path):
    raw = pipeline_config()
    raw["model"]["decoder"]["session_options"]["provider_options"] = [{"QNN": {"a": "1"}}]
    cfg = load_config(make_bundle(tmp_path, raw))
    assert cfg.stage("lm_head").provider_options == ({"QNN": {"a": "1"}},)


def test_rewrite_keeps_unknown_keys_and_gives_inheriting_stage_its_own_copy(tmp_path):
    cfg = load_config(make_bundle(tmp_path, pipeline_config()))
    new = cfg.with_provider_options({"lm_head": [{"QNN": {}}]})
    raw = json.loads(new.dumps())
    stage = raw["model"]["decoder"]["pipeline"][0]["lm_head"]
    assert stage["session_options"] == {"log_id": "og", "provider_options": [{"QNN": {}}]}
    assert raw["model"]["decoder"]["future_decoder_key"] is True
    assert raw["model"]["decoder"]["pipeline"][0]["context"]["future_stage_key"] == "kept"
    assert "session_options" not in cfg.raw["model"]["decoder"]["pipeline"][0]["lm_head"]  # source untouched


def test_load_config_dict_still_validates(tmp_path):
    with pytest.raises(BundleError, match="does not exist"):
        load_config_dict(tmp_path / "nope")
    (tmp_path / "genai_config.json").write_text("{bad")
    with pytest.raises(BundleError, match="malformed JSON"):
        load_config_dict(tmp_path)


@pytest.mark.parametrize(
    "filename, match",
    [
        ("../outside.onnx", r"reaches outside the bundle with '\.\.'"),
        ("sub/../../x.onnx", r"'\.\.'"),
        ("/etc/passwd", "absolute path"),
        ("C:\\models\\m.onnx", "absolute path"),
    ],
)
def test_bad_filenames_are_refused(tmp_path, filename, match):
    raw = pipeline_config()
    raw["model"]["decoder"]["pipeline"][0]["context"]["filename"] = filename
    bundle = make_bundle(tmp_path, pipeline_config())
    (bundle / "genai_config.json").write_text(json.dumps(raw))
    with pytest.raises(BundleError, match=match) as info:
        load_config(bundle)
    assert info.value.exit_code == 2 and "context" in str(info.value)


def test_missing_stage_file_names_stage_and_file(tmp_path):
    bundle = make_bundle(tmp_path, pipeline_config())
    (bundle / "lm_head.onnx").unlink()
    with pytest.raises(BundleError, match=r"stage `lm_head` names 'lm_head.onnx'"):
        load_config(bundle)


@pytest.mark.parametrize(
    "mutate, match",
    [
        (lambda r: r["model"].__setitem__("type", "qwen2"), "model.type"),
        (lambda r: r["model"]["decoder"].__setitem__("pipeline", []), "pipeline"),
        (
            lambda r: r["model"]["decoder"]["pipeline"][0]["context"].__setitem__("run_on_prompt", "yes"),
            "run_on_prompt",
        ),
        (
            lambda r: r["model"]["decoder"]["pipeline"][0]["context"]["session_options"].__setitem__(
                "provider_options", {"QNN": {}}
            ),
            "provider_options",
        ),
        (
            lambda r: r["model"]["decoder"]["pipeline"][0]["context"]["session_options"].__setitem__(
                "provider_options", [{"QNN": {}, "cpu": {}}]
            ),
            "one-key",
        ),
    ],
)
def test_malformed_pipeline_is_a_bundle_error_naming_the_key(tmp_path, mutate, match):
    bundle = make_bundle(tmp_path, pipeline_config())
    raw = pipeline_config()
    mutate(raw)
    (bundle / "genai_config.json").write_text(json.dumps(raw))
    with pytest.raises(BundleError, match=match):
        load_config(bundle)
