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
