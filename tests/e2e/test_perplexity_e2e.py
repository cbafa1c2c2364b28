"""Issue 34 end to end: `winml perf --perplexity` scores each route over the packaged text before
measuring, stores its perplexity (route.perplexity) and its ratio to the reference's
(route.equivalence.perplexity), and refuses bad input with exit 2. The tiny bundles have random
weights: their perplexity is just a number, but the interval, the chunking, a route's ratio against
an identical reference (1 exactly) and the record are checkable."""

from __future__ import annotations

import math
import shutil

import pytest

from tests.conftest import BUNDLES, TINY_FLAT, TINY_PIPELINE, run_winml
from winml_perf.equivalence.perplexity import DEFAULT_TEXT

pytestmark = pytest.mark.e2e

RUN = (
    *("--invocations", "1", "--prompt-tokens", "16", "--max-new-tokens", "4", "--warmup", "1", "--iterations", "1"),
    *("--no-store", "--format", "json", "-q"),
)
TINY_TOKENS = 12785  # the packaged text under tiny-qwen2's tokenizer
TINY_NPU = BUNDLES / "tiny-qwen2-npu"


def _routes(result) -> dict[str, dict]:
    assert result.returncode == 0, result.stderr[-3000:]
    return {c["route"]["label"]: c["route"] for c in result.json()["cells"]}


def test_a_lone_route_gets_its_perplexity_with_an_interval_over_chunks():
    result = run_winml("perf", TINY_FLAT, "--perplexity", "--perplexity-chunk", "512", *RUN)
    route = _routes(result)["config"]
    p = route["perplexity"]
    assert "equivalence" not in route  # one route: nothing to judge, the perplexity stands alone
    t = p["text"]
    assert t["name"] == "coriolanus-act1.txt" and t["chars"] == len(DEFAULT_TEXT.read_text(encoding="utf-8"))
    assert t["tokens"] == TINY_TOKENS and t["chunk"] == 512 and t["chunks"] == TINY_TOKENS // 512
    assert t["scored_per_chunk"] == 255 and len(p["chunk_nll"]) == t["chunks"]
    mean = sum(p["chunk_nll"]) / len(p["chunk_nll"])
    assert p["perplexity"] == pytest.approx(math.exp(mean)) and p["mean_nll"] == pytest.approx(mean)
    assert p["low"] < p["perplexity"] < p["high"]  # random weights: the chunks differ, so the interval has width
    assert p["how"] == "flat decoder" and p["cost_ms"] > 0
    assert "perplexity: config " in result.stderr and "outside the timed iterations" in result.stderr


@pytest.mark.parametrize("bundle", [TINY_FLAT, TINY_PIPELINE], ids=["flat", "pipeline"])
def test_a_route_against_an_identical_reference_reads_ratio_one_exactly(bundle, tmp_path):
    # ep=cpu on these CPU bundles is the config route itself (measured once); an identical copy of the
    # bundle as --reference-bundle is the same computation under another name
    ref = tmp_path / "copy"
    shutil.copytree(bundle, ref, ignore=shutil.ignore_patterns("_compiled"))
    result = run_winml(
        "perf",
        bundle,
        "--route",
        "config",
        "--perplexity",
        "--perplexity-chunk",
        "256",
        "--reference-bundle",
        ref,
        *RUN,
    )
    route = _routes(result)["config"]
    diff = route["equivalence"]["perplexity"]
    assert diff["reference"] == f"bundle:{ref}" and diff["identical"] is True
    assert diff["ratio"] == 1.0 and diff["low"] == 1.0 and diff["high"] == 1.0 and diff["mean_delta_nll"] == 0.0
    assert diff["chunks"] == TINY_TOKENS // 256 and diff["perplexity"] == diff["reference_perplexity"]
    assert diff["perplexity"] == route["perplexity"]["perplexity"]
    if bundle == TINY_PIPELINE:  # the stages a prompt runs through, chained
        assert route["perplexity"]["how"] == "pipeline: embeddings → context → lm_head"
    assert "×1 exactly against bundle:" in result.stderr
    # KL and top-1 over the same scored positions: bit-equal logits read 0 and 1 exactly
    positions = diff["chunks"] * 127
    assert diff["kl_mean"] == 0.0 and diff["kl_low"] == 0.0 and diff["kl_high"] == 0.0
    assert diff["top1_agreement"] == 1.0 and diff["top1_matches"] == diff["positions"] == positions
    assert diff["chunk_kl"] == [0.0] * diff["chunks"] and diff["chunk_top1"] == [127] * diff["chunks"]
    assert f"KL 0 [0, 0], top-1 100.0 % over {positions:,} positions" in result.stderr


def test_a_changed_reference_reads_kl_above_zero_with_an_interval(tmp_path):
    from tests.e2e.test_equivalence_e2e import perturbed_copy

    ref = perturbed_copy(TINY_FLAT, tmp_path / "perturbed")
    result = run_winml(
        "perf", TINY_FLAT, "--route", "config", "--perplexity", "--perplexity-chunk", "256",
        "--reference-bundle", ref, *RUN,
    )  # fmt: skip
    diff = _routes(result)["config"]["equivalence"]["perplexity"]
    assert not diff["identical"] and diff["positions"] == diff["chunks"] * 127
    assert 0 <= diff["kl_low"] < diff["kl_mean"] < diff["kl_high"] and all(k > 0 for k in diff["chunk_kl"])
    assert diff["kl_mean"] == pytest.approx(sum(diff["chunk_kl"]) / diff["chunks"])
    assert 0 <= diff["top1_agreement"] < 1 and diff["top1_matches"] == sum(diff["chunk_top1"])
    assert f"top-1 {diff['top1_agreement'] * 100:.1f} % over {diff['positions']:,} positions" in result.stderr


def test_perplexity_text_and_chunk_are_taken(tmp_path):
    text = tmp_path / "short.txt"
    text.write_text(DEFAULT_TEXT.read_text(encoding="utf-8")[:3000], encoding="utf-8")
    result = run_winml("perf", TINY_FLAT, "--perplexity-text", text, "--perplexity-chunk", "64", *RUN)
    p = _routes(result)["config"]["perplexity"]
    assert p["text"]["name"] == "short.txt" and p["text"]["chunk"] == 64 and p["text"]["scored_per_chunk"] == 31
    assert p["text"]["chunks"] == p["text"]["tokens"] // 64 > 1


@pytest.mark.parametrize(
    "args, says",
    [
        (("--perplexity-chunk", "256"), "--perplexity-chunk needs --perplexity"),
        (("--perplexity-text", "/nonexistent/text.txt"), "--perplexity-text /nonexistent/text.txt: cannot read"),
        (("--perplexity", "--perplexity-chunk", "2048"), "longer than the model's context_length 1024"),
        (("--perplexity", "--perplexity-chunk", "3"), "--perplexity-chunk"),
    ],
    ids=["chunk-alone", "missing-file", "beyond-context", "too-small"],
)
def test_bad_perplexity_input_exits_2_naming_the_flag(args, says, tmp_path):
    result = run_winml("perf", TINY_FLAT, *args, *RUN)
    assert result.returncode == 2, result.stderr[-2000:]
    assert says in result.stderr
    assert result.stdout.strip() == ""  # nothing measured, nothing half-written


def test_a_text_shorter_than_one_chunk_exits_2(tmp_path):
    text = tmp_path / "tiny.txt"
    text.write_text("First Citizen: Before we proceed any further, hear me speak.", encoding="utf-8")
    result = run_winml("perf", TINY_FLAT, "--perplexity-text", text, *RUN)
    assert result.returncode == 2 and "fewer than one chunk of 512" in result.stderr


def test_a_stage_with_static_shapes_leaves_the_route_not_measured_and_says_why():
    # the NPU-style bundle's context stage takes exactly 16 tokens: a chunk of 64 cannot go through
    result = run_winml("perf", TINY_NPU, "--perplexity", "--perplexity-chunk", "64", *RUN)
    route = _routes(result)["config"]
    assert "perplexity" not in route
    assert "cannot take a chunk of 64 tokens" in route["perplexity_not_measured"]
    assert "context (transformer_context.onnx" in route["perplexity_not_measured"]
    assert "perplexity: config not measured: context" in result.stderr
