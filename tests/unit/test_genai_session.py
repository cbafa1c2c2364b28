"""GenaiSession against the real onnxruntime-genai on the committed tiny bundles."""

import pytest

from tests.conftest import TINY_FLAT, TINY_PIPELINE, needs_openvino_absent
from winml_perf.session.genai_session import GenaiSession
from winml_perf.support.errors import BundleError, EPUnavailableError


@pytest.mark.parametrize("bundle", [TINY_FLAT, TINY_PIPELINE], ids=["flat", "pipeline"])
def test_generate_timed_produces_exact_counts_and_consistent_phases(bundle):
    with GenaiSession(bundle) as s:
        ids = s.synthetic_prompt(20, seed=1)
        t = s.generate_timed(ids, 8)
    assert t.prompt_tokens == 20 and t.new_tokens == 8
    assert len(t.token_ids) == 8 and len(t.decode_step_ms) == 7
    assert 0 < t.prompt_ms <= t.ttft_ms <= t.e2e_ms
    assert t.e2e_ms == pytest.approx(t.ttft_ms + t.decode_ms, rel=1e-6)
    assert not s.loaded


def test_greedy_is_deterministic_and_varied():
    with GenaiSession(TINY_FLAT) as s:
        ids = s.encode("quick benchmarks")
        a = s.generate_timed(ids, 16).token_ids
        b = s.generate_timed(ids, 16).token_ids
    assert a == b
    assert len(set(a)) > 4  # the synth init gives varied greedy tokens, not one repeated


def test_flat_and_pipeline_agree_on_first_tokens():
    # Same weights (seed 0); the pipeline's lm_head is fp32 where the flat one is int4, so only
    # the first tokens are expected to agree.
    outs = []
    for bundle in (TINY_FLAT, TINY_PIPELINE):
        with GenaiSession(bundle) as s:
            outs.append(s.generate_timed(s.synthetic_prompt(12, seed=3), 4).token_ids)
    assert outs[0][:2] == outs[1][:2]


def test_synthetic_prompt_is_deterministic_and_avoids_special_tokens():
    s = GenaiSession(TINY_FLAT)
    a, b = s.synthetic_prompt(200, seed=7), s.synthetic_prompt(200, seed=7)
    assert a == b and len(a) == 200
    assert not set(a) & s.eos_token_ids
    assert all(0 <= t < s.vocab_size for t in a)
    assert s.synthetic_prompt(200, seed=8) != a


def test_chat_template_wraps_prompt():
    with GenaiSession(TINY_FLAT) as s:
        assert s.has_chat_template()
        text = s.apply_chat_template("hello there")
    assert "hello there" in text and text != "hello there"


def test_generate_requires_load():
    with pytest.raises(RuntimeError, match="not loaded"):
        GenaiSession(TINY_FLAT).generate_timed([1, 2], 2)


@needs_openvino_absent
def test_a_bundle_folder_removed_before_the_session_opens_says_so_and_to_run_again(tmp_path):
    # an invocation of `winml perf` after its derived bundle was deleted by hand: not "check the file and its
    # permissions" of a genai_config.json
    with pytest.raises(BundleError) as info:
        GenaiSession(tmp_path / "_compiled" / "qnn-185003caef87")
    assert "qnn-185003caef87: the bundle folder no longer exists" in str(info.value)
    assert "run again" in info.value.remedy and "permissions" not in str(info.value)


def test_missing_ep_maps_to_clear_error(bundle_copy):
    import json

    b = bundle_copy(TINY_FLAT)
    cfg = json.loads((b / "genai_config.json").read_text())
    # an EP no test registers (onnxruntime-qnn may be installed and registered by an earlier test)
    cfg["model"]["decoder"]["session_options"]["provider_options"] = [{"OpenVINO": {}}]
    (b / "genai_config.json").write_text(json.dumps(cfg))
    with pytest.raises(EPUnavailableError, match="OpenVINO is not available here.*try --ep cpu"):
        GenaiSession(b).load()


def test_qnn_without_backend_type_says_to_add_it(bundle_copy):
    import json

    pytest.importorskip("onnxruntime_qnn")
    from winml_perf.ep.plugins import registered_plugins

    registered_plugins()
    b = bundle_copy(TINY_FLAT)
    cfg = json.loads((b / "genai_config.json").read_text())
    cfg["model"]["decoder"]["session_options"]["provider_options"] = [{"QNN": {}}]
    (b / "genai_config.json").write_text(json.dumps(cfg))
    with pytest.raises(BundleError, match="backend_type.*--ep-option backend_type=htp"):
        GenaiSession(b).load()


def test_cpu_with_options_maps_to_bundle_error(bundle_copy):
    import json

    b = bundle_copy(TINY_FLAT)
    cfg = json.loads((b / "genai_config.json").read_text())
    cfg["model"]["decoder"]["session_options"]["provider_options"] = [{"cpu": {"x": "1"}}]
    (b / "genai_config.json").write_text(json.dumps(cfg))
    with pytest.raises(BundleError, match="provider options"):
        GenaiSession(b).load()


def test_generation_errors_become_clear_failures():
    from winml_perf.support.errors import BenchmarkFailure

    with GenaiSession(TINY_FLAT) as s:
        with pytest.raises(BenchmarkFailure, match="failed while generating"):
            s.generate_timed([s.vocab_size + 1000] * 4, 2)  # token id outside the vocabulary
