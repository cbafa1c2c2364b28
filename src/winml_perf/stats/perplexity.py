"""Perplexity of a model over a fixed text, the llama-perplexity way, and the paired difference
between two routes over the same chunks (issue 34: accuracy beside speed). Pure functions over numpy.

The method (llama.cpp's ``llama-perplexity``): the text's tokens are cut into non-overlapping chunks
of ``n_ctx`` tokens (a tail shorter than a chunk is dropped); each chunk is one full-sequence pass
from an empty cache, and only the second half of the chunk is scored (positions ``n_ctx // 2`` to
``n_ctx - 2`` predict the tokens after them: ``n_ctx - 1 - n_ctx // 2`` tokens per chunk), so every
scored token sees at least half a chunk of context.

The interval: Student's t over the chunk means of the negative log-likelihood (NLL, nats), mapped
through exp. It covers the chunk-to-chunk spread of *this* text: how far the perplexity could move
had the text been another draw of chunks like these. It does not cover other texts, other chunk
lengths or other tokenizers (a perplexity is only comparable on the same text, chunks and tokens).
The chunks are the unit because tokens within one chunk share context and are not independent.

The difference between two routes is paired on the same chunks: ΔNLL per chunk (route − reference),
its mean with a t interval, reported as the ratio of perplexities exp(mean ΔNLL). Two routes that
compute bit-identical logits give ΔNLL = 0 on every chunk: ratio 1 exactly, interval [1, 1].
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

CONFIDENCE = 0.95


def token_nll(logits: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """−log softmax(logits)[target] per position, nats, float64: ``logits`` P x V, ``targets`` P."""
    x = np.asarray(logits, dtype=np.float64)
    t = np.asarray(targets, dtype=np.int64)
    if x.ndim != 2 or t.shape != (x.shape[0],):
        raise ValueError(f"logits must be P x V and targets P, got {x.shape} and {t.shape}")
    top = x.max(axis=1, keepdims=True)
    log_z = top[:, 0] + np.log(np.exp(x - top).sum(axis=1))
    return np.asarray(log_z - x[np.arange(len(t)), t], dtype=np.float64)


def first_scored(n_ctx: int) -> int:
    """The first position whose prediction is scored in a chunk of ``n_ctx`` tokens (its second half)."""
    if n_ctx < 4:
        raise ValueError(f"a chunk needs at least 4 tokens, got {n_ctx}")
    return n_ctx // 2


def scored_per_chunk(n_ctx: int) -> int:
    """How many tokens one chunk scores: the predictions from position n_ctx // 2 to n_ctx - 2."""
    return n_ctx - 1 - first_scored(n_ctx)


def chunk_spans(n_tokens: int, n_ctx: int) -> list[tuple[int, int]]:
    """[start, end) of each non-overlapping chunk of ``n_ctx`` tokens; a shorter tail is dropped."""
    first_scored(n_ctx)
    return [(i * n_ctx, (i + 1) * n_ctx) for i in range(n_tokens // n_ctx)]


def chunk_nll(logits: np.ndarray, tokens: Sequence[int]) -> float:
    """Mean NLL of one chunk's scored half: ``logits`` S x V of one pass over ``tokens`` (S of them);
    position i predicts token i + 1, positions S//2 .. S-2 are scored."""
    n = len(tokens)
    if np.shape(logits)[0] != n:
        raise ValueError(f"logits for {np.shape(logits)[0]} positions, but {n} tokens")
    first = first_scored(n)
    nll = token_nll(np.asarray(logits)[first : n - 1], np.asarray(tokens[first + 1 :]))
    return float(nll.mean())


def _t_half(values: np.ndarray, confidence: float) -> float:
    """Half-width of the t interval of the mean of ``values``; nan with fewer than two."""
    n = len(values)
    if n < 2:
        return math.nan
    sd = float(np.std(values, ddof=1))
    if sd == 0.0:
        return 0.0
    from scipy.special import stdtrit  # Student's t quantile; loaded on first use

    return float(stdtrit(n - 1, 0.5 + confidence / 2)) * sd / math.sqrt(n)


@dataclass(frozen=True)
class PerplexityEstimate:
    """exp(mean NLL) over the chunks and its t interval (nan bounds with one chunk)."""

    perplexity: float
    low: float
    high: float
    mean_nll: float
    sd_nll: float  # standard deviation of the chunk means (nan with one chunk)
    chunks: int
    confidence: float


def perplexity(chunk_nlls: Sequence[float], confidence: float = CONFIDENCE) -> PerplexityEstimate:
    """Perplexity from the chunks' mean NLLs (every chunk scores the same number of tokens, so the mean
    of the chunk means is the mean over tokens), with the t interval over chunks mapped through exp."""
    v = np.asarray(chunk_nlls, dtype=np.float64)
    if len(v) == 0:
        raise ValueError("no chunk to take a perplexity over")
    if not np.all(np.isfinite(v)):
        raise ValueError("a chunk's NLL is not finite")
    mean = float(v.mean())
    half = _t_half(v, confidence)
    sd = float(np.std(v, ddof=1)) if len(v) > 1 else math.nan
    return PerplexityEstimate(
        math.exp(mean), math.exp(mean - half), math.exp(mean + half), mean, sd, len(v), confidence
    )


@dataclass(frozen=True)
class PerplexityRatio:
    """A route's perplexity over the reference's on the same chunks: exp(mean ΔNLL), its t interval."""

    ratio: float
    low: float
    high: float
    mean_delta_nll: float  # nats per token, route − reference
    chunks: int
    confidence: float
    identical: bool  # every chunk's NLL equal on both sides


def perplexity_ratio(
    route: Sequence[float], reference: Sequence[float], confidence: float = CONFIDENCE
) -> PerplexityRatio:
    """The paired difference of two routes' chunk NLLs (the same chunks, in order)."""
    a = np.asarray(route, dtype=np.float64)
    b = np.asarray(reference, dtype=np.float64)
    if a.shape != b.shape or len(a) == 0:
        raise ValueError(f"paired chunks needed on both sides, got {len(a)} and {len(b)}")
    d = a - b
    mean = float(d.mean())
    half = _t_half(d, confidence)
    return PerplexityRatio(
        math.exp(mean), math.exp(mean - half), math.exp(mean + half), mean, len(d), confidence, bool(np.all(d == 0))
    )


# Agreement with the reference over the same text: on each chunk's scored positions (the second half,
# as chunk_nll scores them), KL(reference ‖ route) of the next-token distributions and whether the
# argmax agrees. KL's interval is a t interval over the chunk means, as the perplexity's (it covers this
# text's chunk-to-chunk spread, not other texts); top-1 agreement is the share of every scored position.

#: Positions per block when taking the log-softmax in float64: bounds the scratch memory of one chunk.
BLOCK = 64


def log_softmax(logits: np.ndarray) -> np.ndarray:
    """log softmax over the last axis, float64, stable for large logits: ``logits`` P x V."""
    x = np.asarray(logits, dtype=np.float64)
    shifted = x - x.max(axis=-1, keepdims=True)
    return np.asarray(shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True)), dtype=np.float64)


@dataclass(frozen=True)
class ChunkAgreement:
    """One chunk's agreement of a route with the reference over its scored positions."""

    kl: float  # mean KL(reference ‖ route) per scored position, nats
    matches: int  # scored positions whose argmax agrees
    positions: int  # scored positions


def chunk_agreement(reference: np.ndarray, route: np.ndarray, block: int = BLOCK) -> ChunkAgreement:
    """KL(reference ‖ route) and top-1 agreement over one chunk's scored half: ``reference`` and
    ``route`` are the S x V logits of the same chunk of S tokens. Bit-equal logits give KL 0 and every
    position agreeing, exactly. The log-softmax is taken ``block`` positions at a time."""
    if np.shape(reference) != np.shape(route) or np.ndim(reference) != 2:
        raise ValueError(f"logits of the same S x V shape needed, got {np.shape(reference)} and {np.shape(route)}")
    n = int(np.shape(reference)[0])
    first, end = first_scored(n), n - 1
    if route is reference:  # the reference against itself: nothing to compute
        return ChunkAgreement(0.0, end - first, end - first)
    total, matches = 0.0, 0
    for i in range(first, end, block):
        a, b = np.asarray(reference[i : min(i + block, end)]), np.asarray(route[i : min(i + block, end)])
        p, q = log_softmax(a), log_softmax(b)
        total += float(np.maximum((np.exp(p) * (p - q)).sum(axis=1), 0.0).sum())  # ≥ 0, rounding aside
        matches += int((a.argmax(axis=1) == b.argmax(axis=1)).sum())
    return ChunkAgreement(total / (end - first), matches, end - first)


@dataclass(frozen=True)
class TextAgreement:
    """A route's agreement with the reference over the text: KL's mean over chunks with its t interval
    (nan bounds with one chunk; the lower bound no less than 0), and top-1 over every scored position."""

    kl_mean: float  # nats per scored token (every chunk scores as many: the mean over tokens too)
    kl_low: float
    kl_high: float
    top1: float  # matches / positions
    matches: int
    positions: int
    chunk_kl: tuple[float, ...]
    chunk_matches: tuple[int, ...]
    confidence: float


def text_agreement(chunks: Sequence[ChunkAgreement], confidence: float = CONFIDENCE) -> TextAgreement:
    """Fold the chunks' agreements (in order) into the text's."""
    if not chunks:
        raise ValueError("no chunk to fold")
    kl = np.asarray([c.kl for c in chunks], dtype=np.float64)
    mean = float(kl.mean())
    half = _t_half(kl, confidence)
    matches = sum(c.matches for c in chunks)
    positions = sum(c.positions for c in chunks)
    return TextAgreement(
        mean, max(mean - half, 0.0) if math.isfinite(half) else math.nan, mean + half, matches / positions,
        matches, positions, tuple(float(x) for x in kl), tuple(c.matches for c in chunks), confidence,
    )  # fmt: skip
