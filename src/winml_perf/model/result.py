"""What the runner measured: load phases, failures and the cell result with its raw samples
(model/sample.py IterationSample); all picklable. One CellResult shape serves token sessions and
plain inference sessions alike.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from winml_perf.model.cell_status import CellStatus
from winml_perf.model.sample import IterationSample
from winml_perf.model.spec import CellSpec, finite_or_none


@dataclass(frozen=True)
class LoadPhases:
    """Time spent before measuring, each phase apart (ms; None when not applicable)."""

    plugin_registration_ms: float | None = None
    prepare_ms: float | None = None
    compile_ms: float | None = None
    model_load_ms: float | None = None
    first_generation_ms: float | None = None
    session_reused: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {k: (finite_or_none(v) if isinstance(v, float) else v) for k, v in asdict(self).items()}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> LoadPhases:
        values = {f.name: d.get(f.name) for f in fields(cls) if f.name != "session_reused"}
        return cls(**values, session_reused=bool(d.get("session_reused", False)))


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

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> CellFailure:
        return cls(
            kind=d["kind"],
            message=d["message"],
            remedy=d.get("remedy"),
            error_type=d.get("error_type"),
            exit_code=d.get("exit_code"),
            signal=d.get("signal"),
            signal_name=d.get("signal_name"),
            traceback=d.get("traceback"),
            phase=d.get("phase"),
        )

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
    status: CellStatus
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
    explain: dict[str, Any] = field(default_factory=dict)  # measure/explain_cell.py, with --explain
    invocations: tuple[dict[str, Any], ...] = ()  # per invocation: index, round, pid, load, iterations, medians
    invocation_kind: str = "process"  # what one invocation is: a fresh "process", or a fresh "session" in process
    energy: dict[str, Any] = field(default_factory=dict)  # J/token per phase or why not, idle, power state
    timeline: tuple[dict[str, Any], ...] = ()  # a sustained run (--duration): one point per batch
    output_text: str | None = None  # a text prompt's generated text, decoded by the bundle's tokenizer

    @property
    def ok(self) -> bool:
        return self.status == CellStatus.OK
