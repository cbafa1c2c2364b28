"""What one iteration measured: a session's ``GenerationTiming`` and the ``IterationSample`` built
once from it (raw timings, plus every per-iteration metric of model/metrics.py derived from them).

Token sessions fill the token fields; a plain inference session fills only ``latency_ms``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from winml_perf.model.metrics import iteration_values


@dataclass(frozen=True)
class GenerationTiming:
    """Timings of one fixed-length greedy generation, all in milliseconds.

    ``prompt_ms``: time of ``append_tokens`` (the whole prefill).
    ``ttft_ms``: from the start of prefill until the first new token is available
    (prefill plus the first ``generate_next_token``, which only samples).
    ``decode_step_ms``: one entry per later token (each a forward pass plus sampling).
    ``e2e_ms``: from the start of prefill to the last token.
    ``generator_ms``: creating the generator (GeneratorParams, search options, Generator) before the
    prompt: a request pays it, so request TTFT = generator_ms + ttft_ms.
    """

    prompt_tokens: int
    new_tokens: int
    prompt_ms: float
    ttft_ms: float
    decode_step_ms: tuple[float, ...]
    e2e_ms: float
    token_ids: tuple[int, ...] = field(default=(), repr=False)
    generator_ms: float | None = None

    @property
    def decode_ms(self) -> float:
        return float(sum(self.decode_step_ms))


def _finite_or_none(x: float | None) -> float | None:
    """JSON has no NaN: NaN and infinities become None."""
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else None


def _float_or_none(x: Any) -> float | None:
    return None if x is None else float(x)


@dataclass(frozen=True)
class IterationSample:
    """One measured (or warmup) iteration. ``latency_ms`` is the iteration's wall time as the
    session measured it (e2e for generation). ``round_index`` pairs iterations of interleaved routes;
    ``invocation`` is the index of the invocation (a fresh process and model load) that ran it.
    ``values``: every per-iteration metric, derived on first use and kept."""

    latency_ms: float
    prompt_tokens: int | None = None
    new_tokens: int | None = None
    prompt_ms: float | None = None
    ttft_ms: float | None = None
    decode_step_ms: tuple[float, ...] = ()
    e2e_ms: float | None = None
    round_index: int = 0
    token_ids: tuple[int, ...] = field(default=(), repr=False)
    invocation: int = 0
    generator_ms: float | None = None  # generator creation before the prompt (None: not measured)

    @cached_property
    def values(self) -> dict[str, float]:
        return iteration_values(self)

    @classmethod
    def from_timing(cls, timing: Any, round_index: int = 0, invocation: int = 0) -> IterationSample:
        """A GenerationTiming (or an object with its fields) -> its sample."""
        return cls(
            latency_ms=float(timing.e2e_ms),
            prompt_tokens=int(timing.prompt_tokens),
            new_tokens=int(timing.new_tokens),
            prompt_ms=float(timing.prompt_ms),
            ttft_ms=float(timing.ttft_ms),
            decode_step_ms=tuple(float(x) for x in timing.decode_step_ms),
            e2e_ms=float(timing.e2e_ms),
            round_index=round_index,
            token_ids=tuple(int(t) for t in getattr(timing, "token_ids", ()) or ()),
            invocation=invocation,
            generator_ms=_float_or_none(getattr(timing, "generator_ms", None)),
        )

    def to_dict(self, keep_token_ids: bool = False) -> dict[str, Any]:
        d = {
            "round_index": self.round_index,
            "invocation": self.invocation,
            "latency_ms": _finite_or_none(self.latency_ms),
            "prompt_tokens": self.prompt_tokens,
            "new_tokens": self.new_tokens,
            "prompt_ms": _finite_or_none(self.prompt_ms),
            "ttft_ms": _finite_or_none(self.ttft_ms),
            "decode_step_ms": list(map(float, self.decode_step_ms)),
            "e2e_ms": _finite_or_none(self.e2e_ms),
        }
        if self.generator_ms is not None:
            d["generator_ms"] = _finite_or_none(self.generator_ms)
        if keep_token_ids:
            d["token_ids"] = list(self.token_ids)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> IterationSample:
        return cls(
            latency_ms=d["latency_ms"],
            prompt_tokens=d.get("prompt_tokens"),
            new_tokens=d.get("new_tokens"),
            prompt_ms=d.get("prompt_ms"),
            ttft_ms=d.get("ttft_ms"),
            decode_step_ms=tuple(d.get("decode_step_ms") or ()),
            e2e_ms=d.get("e2e_ms"),
            round_index=int(d.get("round_index", 0)),
            token_ids=tuple(d.get("token_ids") or ()),
            invocation=int(d.get("invocation", 0)),
            generator_ms=d.get("generator_ms"),
        )
