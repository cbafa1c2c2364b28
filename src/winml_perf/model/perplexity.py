"""A route's perplexity over a fixed text, and its ratio to the reference route's (issue 34).

``Perplexity`` is a route's own figure (the record's ``route.perplexity``: every route measured with
--perplexity, a lone route too); ``PerplexityDifference`` is the paired comparison on the same chunks
(``route.equivalence.perplexity``: routes judged against a reference). The math is in
stats/perplexity.py; an interval bound is None where it is undefined (one chunk).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


def _num(v: float) -> float | None:
    return None if v is None or not math.isfinite(v) else float(v)


def _opt(v: Any) -> float | None:
    return None if v is None else float(v)


def _int(v: Any) -> int | None:
    return None if v is None else int(v)


@dataclass(frozen=True)
class PerplexityText:
    """The text scored: where it comes from, its size, and how it was cut."""

    name: str  # the file's name (the packaged default: coriolanus-act1.txt)
    sha256: str
    chars: int
    tokens: int  # the whole text, tokenized by the bundle's tokenizer
    chunk: int  # tokens per chunk (--perplexity-chunk)
    chunks: int  # non-overlapping chunks scored (the tail shorter than a chunk is dropped)
    scored_per_chunk: int  # the second half: chunk - 1 - chunk // 2
    bos: bool  # each chunk's first token replaced by BOS (the tokenizer adds one), as llama-perplexity does

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "sha256": self.sha256,
            "chars": self.chars,
            "tokens": self.tokens,
            "chunk": self.chunk,
            "chunks": self.chunks,
            "scored_per_chunk": self.scored_per_chunk,
            "bos": self.bos,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PerplexityText:
        return cls(
            str(d["name"]),
            str(d["sha256"]),
            int(d["chars"]),
            int(d["tokens"]),
            int(d["chunk"]),
            int(d["chunks"]),
            int(d["scored_per_chunk"]),
            bool(d["bos"]),
        )


@dataclass(frozen=True)
class Perplexity:
    """exp(mean NLL) of one route over the text's chunks, with a t interval over the chunk means: it
    covers the chunk-to-chunk spread of this text, not other texts."""

    text: PerplexityText
    perplexity: float
    low: float | None
    high: float | None
    confidence: float
    mean_nll: float  # nats per scored token
    chunk_nll: tuple[float, ...]  # each chunk's mean NLL, in order (the pairing of a later comparison)
    cost_ms: float  # this route's session load, passes and scoring (outside every timed iteration)
    how: str  # "flat decoder" | "pipeline: embeddings → transformer → lm_head"

    def __post_init__(self) -> None:
        object.__setattr__(self, "chunk_nll", tuple(self.chunk_nll))
        object.__setattr__(self, "low", _num(self.low) if self.low is not None else None)
        object.__setattr__(self, "high", _num(self.high) if self.high is not None else None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "text": self.text.to_dict(),
            "perplexity": self.perplexity,
            "low": self.low,
            "high": self.high,
            "confidence": self.confidence,
            "mean_nll": self.mean_nll,
            "chunk_nll": list(self.chunk_nll),
            "cost_ms": self.cost_ms,
            "how": self.how,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Perplexity:
        return cls(
            PerplexityText.from_dict(d["text"]),
            float(d["perplexity"]),
            _opt(d.get("low")),
            _opt(d.get("high")),
            float(d["confidence"]),
            float(d["mean_nll"]),
            tuple(float(x) for x in d.get("chunk_nll") or ()),
            float(d.get("cost_ms") or 0.0),
            str(d.get("how") or ""),
        )


@dataclass(frozen=True)
class PerplexityDifference:
    """A route's perplexity against the reference's on the same chunks: the ratio exp(mean ΔNLL) with
    a paired t interval over chunks (1 exactly when both compute bit-identical logits); and over the
    same scored positions, KL(reference ‖ route) with a t interval over the chunk means and top-1
    agreement over every scored position (KL 0 and top-1 1.0 exactly for bit-identical logits). The
    agreement is None in records written before it was measured."""

    reference: str  # the reference's label (a route label, or bundle:PATH)
    perplexity: float  # the route's
    reference_perplexity: float
    ratio: float
    low: float | None
    high: float | None
    confidence: float
    mean_delta_nll: float  # nats per token, route − reference
    chunks: int
    identical: bool
    kl_mean: float | None = None  # nats per scored token, mean over chunks
    kl_low: float | None = None  # its t interval over the chunk means (None: one chunk)
    kl_high: float | None = None
    top1_agreement: float | None = None  # top1_matches / positions
    top1_matches: int | None = None
    positions: int | None = None  # scored positions over every chunk
    chunk_kl: tuple[float, ...] = ()  # each chunk's mean KL, in order
    chunk_top1: tuple[int, ...] = ()  # each chunk's agreeing positions, in order

    def __post_init__(self) -> None:
        for name in ("low", "high", "kl_low", "kl_high"):
            v = getattr(self, name)
            object.__setattr__(self, name, _num(v) if v is not None else None)
        object.__setattr__(self, "chunk_kl", tuple(self.chunk_kl))
        object.__setattr__(self, "chunk_top1", tuple(self.chunk_top1))

    def to_dict(self) -> dict[str, Any]:
        return {
            "reference": self.reference,
            "perplexity": self.perplexity,
            "reference_perplexity": self.reference_perplexity,
            "ratio": self.ratio,
            "low": self.low,
            "high": self.high,
            "confidence": self.confidence,
            "mean_delta_nll": self.mean_delta_nll,
            "chunks": self.chunks,
            "identical": self.identical,
            "kl_mean": self.kl_mean,
            "kl_low": self.kl_low,
            "kl_high": self.kl_high,
            "top1_agreement": self.top1_agreement,
            "top1_matches": self.top1_matches,
            "positions": self.positions,
            "chunk_kl": list(self.chunk_kl),
            "chunk_top1": list(self.chunk_top1),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PerplexityDifference:
        return cls(
            str(d["reference"]),
            float(d["perplexity"]),
            float(d["reference_perplexity"]),
            float(d["ratio"]),
            _opt(d.get("low")),
            _opt(d.get("high")),
            float(d["confidence"]),
            float(d["mean_delta_nll"]),
            int(d["chunks"]),
            bool(d["identical"]),
            _opt(d.get("kl_mean")),
            _opt(d.get("kl_low")),
            _opt(d.get("kl_high")),
            _opt(d.get("top1_agreement")),
            _int(d.get("top1_matches")),
            _int(d.get("positions")),
            tuple(float(x) for x in d.get("chunk_kl") or ()),
            tuple(int(x) for x in d.get("chunk_top1") or ()),
        )
