"""What the runner measured: raw samples, load phases, failures and the cell result (picklable).

Token sessions fill the token fields; a plain inference session (runtime 'winml') fills only
``latency_ms`` per iteration, so one CellResult shape serves both.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from winml_perf.bench.spec import CellSpec, finite_or_none


@dataclass(frozen=True)
class IterationSample:
    """One measured (or warmup) iteration. ``latency_ms`` is the iteration's wall time as the
    session measured it (e2e for generation). ``round_index`` pairs iterations of interleaved routes."""

    latency_ms: float
    prompt_tokens: int | None = None
    new_tokens: int | None = None
    prompt_ms: float | None = None
    ttft_ms: float | None = None
    decode_step_ms: tuple[float, ...] = ()
    e2e_ms: float | None = None
    round_index: int = 0
    token_ids: tuple[int, ...] = field(default=(), repr=False)

    def to_dict(self, keep_token_ids: bool = False) -> dict:
        d = {
            "round_index": self.round_index,
            "latency_ms": finite_or_none(self.latency_ms),
            "prompt_tokens": self.prompt_tokens,
            "new_tokens": self.new_tokens,
            "prompt_ms": finite_or_none(self.prompt_ms),
            "ttft_ms": finite_or_none(self.ttft_ms),
            "decode_step_ms": [float(x) for x in self.decode_step_ms],
            "e2e_ms": finite_or_none(self.e2e_ms),
        }
        if keep_token_ids:
            d["token_ids"] = list(self.token_ids)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "IterationSample":
        return cls(
            latency_ms=d["latency_ms"], prompt_tokens=d.get("prompt_tokens"), new_tokens=d.get("new_tokens"),
            prompt_ms=d.get("prompt_ms"), ttft_ms=d.get("ttft_ms"), decode_step_ms=tuple(d.get("decode_step_ms") or ()),
            e2e_ms=d.get("e2e_ms"), round_index=int(d.get("round_index", 0)), token_ids=tuple(d.get("token_ids") or ()),
        )


@dataclass(frozen=True)
class LoadPhases:
    """Time spent before measuring, each phase apart (ms; None when not applicable)."""

    plugin_registration_ms: float | None = None
    prepare_ms: float | None = None
    compile_ms: float | None = None
    model_load_ms: float | None = None
    first_generation_ms: float | None = None
    session_reused: bool = False

    def to_dict(self) -> dict:
        return {k: (finite_or_none(v) if isinstance(v, float) else v) for k, v in asdict(self).items()}


@dataclass(frozen=True)
class CellFailure:
    """Why a cell failed. kind: 'error' (an exception, the child lives on), 'crash' (the child
    died: exit code or signal), 'timeout' (no answer within the cell timeout; the child was killed)."""

    kind: str
    message: str
    remedy: str | None = None
    error_type: str | None = None
    exit_code: int | None = None
    signal: int | None = None
    signal_name: str | None = None
    traceback: str | None = None
    phase: str | None = None

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def reason(self) -> str:
        text = self.message
        if self.remedy:
            text += f"; {self.remedy}"
        return text


@dataclass(frozen=True)
class CellResult:
    """Everything measured for one cell; ``status`` is 'ok' or 'failed' (then ``failure`` says why)."""

    cell: CellSpec
    status: str
    samples: tuple[IterationSample, ...] = ()
    warmup_samples: tuple[IterationSample, ...] = ()
    load: LoadPhases = LoadPhases()
    prompt_info: dict[str, Any] = field(default_factory=dict)
    stop_reason: str | None = None
    failure: CellFailure | None = None
    memory: dict[str, Any] = field(default_factory=dict)
    route_actual: dict[str, Any] = field(default_factory=dict)
    started_utc: str = ""
    finished_utc: str = ""
    wall_s: float = 0.0
    measure_s: float = 0.0
    index: int = 0

    @property
    def ok(self) -> bool:
        return self.status == "ok"
