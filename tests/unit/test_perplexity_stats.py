"""stats/perplexity.py against hand-computed cases (issue 34)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from winml_perf.stats.perplexity import (
    ChunkAgreement,
    chunk_agreement,
    chunk_nll,
    chunk_spans,
    first_scored,
    log_softmax,
    perplexity,
    perplexity_ratio,
    scored_per_chunk,
    text_agreement,
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


# KL(reference ‖ route) and top-1 agreement over the text (issue 34, item 3)


def _kl_by_hand(p: np.ndarray, q: np.ndarray) -> float:
    p, q = p / p.sum(), q / q.sum()
    return float((p * np.log(p / q)).sum())


def test_chunk_agreement_by_hand_on_the_scored_half_only():
    # 4 tokens: only position 2 is scored. p = (3/4, 1/4), q = (1/4, 3/4): KL = 3/4 ln 3 + 1/4 ln(1/3) = ln(3)/2
    ref, route = np.zeros((4, 2)), np.zeros((4, 2))
    ref[0], route[0] = [100.0, -100.0], [-100.0, 100.0]  # wildly apart on the unscored half: must not count
    ref[3], route[3] = [100.0, -100.0], [-100.0, 100.0]  # the last position predicts nothing
    ref[2], route[2] = np.log([3.0, 1.0]), np.log([1.0, 3.0])
    a = chunk_agreement(ref, route)
    assert a.kl == pytest.approx(math.log(3) / 2) and (a.matches, a.positions) == (0, 1)
    route[2] = np.log([2.0, 1.0])  # the same argmax, another distribution
    a = chunk_agreement(ref, route)
    assert a.kl == pytest.approx(_kl_by_hand(np.array([3.0, 1.0]), np.array([2.0, 1.0]))) and a.matches == 1


def test_chunk_agreement_is_the_mean_over_positions_whatever_the_block():
    rng = np.random.default_rng(0)
    ref = rng.normal(0, 3, (9, 50)).astype(np.float32)
    route = (ref + rng.normal(0, 1, ref.shape)).astype(np.float32)
    first = first_scored(9)  # positions 4..7 scored
    p, q = log_softmax(ref[first:8]), log_softmax(route[first:8])
    expected = float((np.exp(p) * (p - q)).sum(axis=1).mean())
    agree = int((ref[first:8].argmax(1) == route[first:8].argmax(1)).sum())
    for block in (1, 3, 64):
        a = chunk_agreement(ref, route, block=block)
        assert a.kl == pytest.approx(expected, rel=1e-12) and a.matches == agree and a.positions == 4
    assert a.kl > 0


def test_bit_equal_logits_read_kl_zero_and_top1_one_exactly():
    rng = np.random.default_rng(1)
    logits = (rng.normal(0, 30, (64, 4096)) + 1e4).astype(np.float32)  # large and sharp: still exactly 0
    a = chunk_agreement(logits, logits.copy())
    assert a.kl == 0.0 and a.matches == a.positions == scored_per_chunk(64)
    folded = text_agreement([a, a, a])
    assert folded.kl_mean == 0.0 and folded.kl_low == 0.0 and folded.kl_high == 0.0 and folded.top1 == 1.0


def test_log_softmax_is_stable_and_chunk_agreement_refuses_other_shapes():
    assert np.allclose(np.exp(log_softmax(np.array([[1e4, 1e4]]))), 0.5)
    with pytest.raises(ValueError, match="same S x V"):
        chunk_agreement(np.zeros((4, 3)), np.zeros((4, 5)))


def test_text_agreement_folds_chunks_with_a_t_interval_over_chunk_means():
    # chunk KLs 1.0, 1.1, 1.2: mean 1.1, sd 0.1, half-width t(0.975, 2) * 0.1 / sqrt(3)
    chunks = [ChunkAgreement(1.0, 9, 10), ChunkAgreement(1.1, 8, 10), ChunkAgreement(1.2, 7, 10)]
    t = text_agreement(chunks)
    half = 4.302652729911275 * 0.1 / math.sqrt(3)
    assert t.kl_mean == pytest.approx(1.1) and t.kl_low == pytest.approx(1.1 - half)
    assert t.kl_high == pytest.approx(1.1 + half) and t.confidence == 0.95
    assert (t.matches, t.positions, t.top1) == (24, 30, pytest.approx(0.8))
    assert t.chunk_kl == (1.0, 1.1, 1.2) and t.chunk_matches == (9, 8, 7)


def test_text_agreement_low_bound_stops_at_zero_and_one_chunk_has_none():
    wide = text_agreement([ChunkAgreement(1.0, 1, 2), ChunkAgreement(2.0, 1, 2), ChunkAgreement(3.0, 1, 2)])
    assert wide.kl_low == 0.0 and wide.kl_high > 3.0  # KL is never negative: the t bound is clipped
    one = text_agreement([ChunkAgreement(0.5, 3, 4)])
    assert one.kl_mean == 0.5 and math.isnan(one.kl_low) and math.isnan(one.kl_high) and one.top1 == 0.75
    with pytest.raises(ValueError, match="no chunk"):
        text_agreement([])
