"""stats/perplexity.py against hand-computed cases (issue 34)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from winml_perf.stats.perplexity import (
    chunk_nll,
    chunk_spans,
    first_scored,
    perplexity,
    perplexity_ratio,
    scored_per_chunk,
    token_nll,
)


def test_token_nll_of_uniform_logits_is_log_vocab():
    nll = token_nll(np.zeros((3, 4)), np.array([0, 1, 3]))
    assert np.allclose(nll, math.log(4))


def test_token_nll_by_hand_and_stable_for_large_logits():
    # softmax of (ln 1, ln 3) = (1/4, 3/4): NLL of token 1 is ln(4/3), of token 0 ln 4
    logits = np.log(np.array([[1.0, 3.0], [1.0, 3.0]]))
    assert np.allclose(token_nll(logits, np.array([1, 0])), [math.log(4 / 3), math.log(4)])
    shifted = logits + 1e4  # the same distribution: no overflow, the same NLL
    assert np.allclose(token_nll(shifted, np.array([1, 0])), [math.log(4 / 3), math.log(4)])


def test_token_nll_refuses_mismatched_shapes():
    with pytest.raises(ValueError, match="P x V"):
        token_nll(np.zeros((3, 4)), np.array([0, 1]))


def test_llama_perplexity_chunking():
    assert chunk_spans(10, 4) == [(0, 4), (4, 8)]  # the tail of 2 tokens is dropped
    assert chunk_spans(3, 4) == []
    assert first_scored(512) == 256 and scored_per_chunk(512) == 255  # llama-perplexity's n_ctx - 1 - n_ctx/2
    assert first_scored(5) == 2 and scored_per_chunk(5) == 2
    with pytest.raises(ValueError, match="at least 4"):
        chunk_spans(100, 3)


def test_chunk_nll_scores_only_the_second_half():
    # 4 tokens: positions 2 predicts token 3 only (position 3 has no next token; 0 and 1 are context)
    tokens = [0, 1, 1, 0]
    logits = np.zeros((4, 2))
    logits[0] = logits[1] = [100.0, -100.0]  # confidently wrong on the unscored half: must not count
    logits[2] = np.log([1.0, 3.0])  # p(token 0) = 1/4
    logits[3] = [-100.0, 100.0]
    assert chunk_nll(logits, tokens) == pytest.approx(math.log(4))
    with pytest.raises(ValueError, match="positions"):
        chunk_nll(logits[:3], tokens)


def test_perplexity_and_its_t_interval_by_hand():
    # chunk NLLs 1, 2, 3: mean 2, sd 1, t(0.975, 2) = 4.302653, half-width 4.302653 / sqrt(3)
    est = perplexity([1.0, 2.0, 3.0])
    half = 4.302652729911275 / math.sqrt(3)
    assert est.perplexity == pytest.approx(math.exp(2.0))
    assert est.low == pytest.approx(math.exp(2.0 - half)) and est.high == pytest.approx(math.exp(2.0 + half))
    assert est.sd_nll == pytest.approx(1.0) and est.chunks == 3 and est.mean_nll == pytest.approx(2.0)


def test_one_chunk_has_no_interval_and_equal_chunks_a_point():
    one = perplexity([math.log(10)])
    assert one.perplexity == pytest.approx(10) and math.isnan(one.low) and math.isnan(one.high)
    flat = perplexity([math.log(10)] * 4)
    assert flat.low == pytest.approx(10) and flat.high == pytest.approx(10)


def test_perplexity_refuses_no_chunk_and_non_finite():
    with pytest.raises(ValueError, match="no chunk"):
        perplexity([])
    with pytest.raises(ValueError, match="not finite"):
        perplexity([1.0, math.inf])


def test_ratio_of_identical_routes_is_exactly_one():
    nll = [2.31, 2.02, 2.77, 1.98]
    r = perplexity_ratio(nll, list(nll))
    assert r.ratio == 1.0 and r.low == 1.0 and r.high == 1.0 and r.identical and r.mean_delta_nll == 0.0


def test_paired_ratio_by_hand():
    # ΔNLL = 0.1, 0.2, 0.3: mean 0.2, sd 0.1, half-width t(0.975, 2) * 0.1 / sqrt(3)
    r = perplexity_ratio([1.1, 2.2, 3.3], [1.0, 2.0, 3.0])
    half = 4.302652729911275 * 0.1 / math.sqrt(3)
    assert r.ratio == pytest.approx(math.exp(0.2)) and not r.identical
    assert r.low == pytest.approx(math.exp(0.2 - half)) and r.high == pytest.approx(math.exp(0.2 + half))
    # the pairing removes the chunk-to-chunk spread: the ratio's interval is far narrower than either perplexity's
    a, b = perplexity([1.1, 2.2, 3.3]), perplexity([1.0, 2.0, 3.0])
    assert r.high / r.low < (a.high / a.low) / 10 and r.ratio == pytest.approx(a.perplexity / b.perplexity)


def test_a_constant_shift_has_a_point_interval():
    r = perplexity_ratio([1.5, 2.5], [1.0, 2.0])
    assert r.ratio == pytest.approx(math.exp(0.5)) and r.low == pytest.approx(r.high)


def test_ratio_refuses_unpaired_chunks():
    with pytest.raises(ValueError, match="paired"):
        perplexity_ratio([1.0, 2.0], [1.0])
