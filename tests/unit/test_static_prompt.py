"""A bundle with a static prompt length S (tiny-qwen2-npu: stage `context`, 16 tokens): the request is
settled at S before any flag is checked (measure/request.py PerfRequest.at_static_prompt, called first
by measure/orchestrate.py), reading the bundle's genai config through the run's ConfigBook."""

from __future__ import annotations

import pytest

from tests.conftest import BUNDLES, TINY_FLAT
from winml_perf.bundle.config import ConfigBook
from winml_perf.measure.orchestrate import run_benchmark
from winml_perf.measure.request import PerfRequest
from winml_perf.support.errors import UsageError

NPU = BUNDLES / "tiny-qwen2-npu"


def test_no_prompt_tokens_is_measured_at_the_static_length_with_a_note(capsys):
    book = ConfigBook()
    settled = PerfRequest(path=NPU).at_static_prompt(book)
    assert settled.prompt_tokens == (16,)
    assert "stage `context`" in capsys.readouterr().err
    assert PerfRequest(path=NPU, prompt_tokens=(16,)).at_static_prompt(book).prompt_tokens == (16,)
    # a text prompt is fitted to the static length too: its own token count would be refused by the stage
    assert PerfRequest(path=NPU, prompt="hi").at_static_prompt(book).prompt_tokens == (16,)
    assert "(the --prompt text tiled or cut to it)" in capsys.readouterr().err


def test_another_prompt_length_is_exit_2_naming_the_wrong_ones():
    with pytest.raises(UsageError, match=r"--prompt-tokens 32: stage `context` .* static prompt length of 16") as e:
        PerfRequest(path=NPU, prompt_tokens=(16, 32)).at_static_prompt(ConfigBook())
    assert e.value.exit_code == 2


def test_a_dynamic_bundle_or_a_plain_model_is_taken_as_it_is(tmp_path):
    book = ConfigBook()
    req = PerfRequest(path=TINY_FLAT, prompt_tokens=(8,))
    assert req.at_static_prompt(book) is req
    plain = PerfRequest(path=tmp_path / "model.onnx", runtime="winml")  # no genai config to read
    assert plain.at_static_prompt(book) is plain


def test_the_static_length_is_settled_before_any_flag_is_checked():
    """A run that asks a length the bundle cannot take and a bad --seed hears of the length first."""
    req = PerfRequest(path=NPU, prompt_tokens=(12,), seed=-1, no_store=True, quiet=True)
    with pytest.raises(UsageError, match="static prompt length of 16"):
        run_benchmark(req)
    with pytest.raises(UsageError, match="--seed"):
        run_benchmark(PerfRequest(path=NPU, seed=-1, no_store=True, quiet=True))


def test_one_rule_for_perf_serve_and_tune():
    """GenaiConfig.static_prompt: the stage and its length when nothing or only S is asked; exit 2 naming
    the lengths it cannot take (as the flag was given, when the caller says how), the stage and the fix;
    nothing for a bundle without a static stage, whatever is asked."""
    from winml_perf.bundle.config import load_config

    config = load_config(NPU)
    assert config.static_prompt(None) == ("context", 16) == config.static_prompt((16, 16))
    with pytest.raises(UsageError, match=r"--prompt-tokens 32: stage `context` of .*tiny-qwen2-npu has a static") as e:
        config.static_prompt((16, 32))
    assert e.value.exit_code == 2 and "pass --prompt-tokens 16, or leave it out" in str(e.value.remedy)
    with pytest.raises(UsageError, match=r"--prompt-tokens 8-24: stage `context`"):
        config.static_prompt((8, 24), "8-24")
    assert load_config(TINY_FLAT).static_prompt((8, 300)) is None


def test_tune_follows_the_same_rule(capsys):
    from winml_perf import cli

    with pytest.raises(SystemExit) as ended:
        cli.main(["tune", str(NPU), "--no-store", "--eps", "cpu", "--prompt-tokens", "12"])
    err = capsys.readouterr().err
    assert ended.value.code == 2 and "--prompt-tokens 12: stage `context` of" in err and "length of 16" in err
