"""The measurement seam: what a runner needs from a session, and the timings it gets back."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, Sequence


@dataclass(frozen=True)
class GenerationTiming:
    """Timings of one fixed-length greedy generation, all in milliseconds.

    ``prompt_ms``: time of ``append_tokens`` (the whole prefill).
    ``ttft_ms``: from the start of prefill until the first new token is available
    (prefill plus the first ``generate_next_token``, which only samples).
    ``decode_step_ms``: one entry per later token (each a forward pass plus sampling).
    ``e2e_ms``: from the start of prefill to the last token.
    """

    prompt_tokens: int
    new_tokens: int
    prompt_ms: float
    ttft_ms: float
    decode_step_ms: tuple[float, ...]
    e2e_ms: float
    token_ids: tuple[int, ...] = field(default=(), repr=False)

    @property
    def decode_ms(self) -> float:
        return float(sum(self.decode_step_ms))

    @property
    def prompt_tokens_per_s(self) -> float:
        return self.prompt_tokens / (self.prompt_ms / 1000.0) if self.prompt_ms > 0 else float("nan")

    @property
    def decode_tokens_per_s(self) -> float:
        n = len(self.decode_step_ms)
        return n / (self.decode_ms / 1000.0) if n and self.decode_ms > 0 else float("nan")


class TimedSession(Protocol):
    """A loaded model that can run one timed, fixed-length greedy generation."""

    def generate_timed(self, prompt_ids: Sequence[int], max_new_tokens: int) -> GenerationTiming: ...
