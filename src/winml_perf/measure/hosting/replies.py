"""What a host answers the runner: one frozen dataclass per request, read by attribute.

The same classes come back from a SessionHost in this process (hosts.LocalHost) and from one in
an isolated child (isolate.ChildHost), where they cross the child's Pipe: plain picklable data,
no session objects.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from winml_perf.model.sample import IterationSample


@dataclass(frozen=True)
class LoadReply:
    """The session's load: plugin EP registration and the model load, in ms."""

    plugin_registration_ms: float | None = None
    model_load_ms: float | None = None


@dataclass(frozen=True)
class BeginReply:
    """A cell's start on a loaded session: its prompt and its warmup."""

    prompt_info: dict[str, Any]
    prompt_ids: tuple[int, ...]  # for an explain profile of the same prompt
    warmup_samples: tuple[IterationSample, ...]
    warmup_s: float
    first_generation_ms: float | None  # the session's very first call, whichever cell made it
    session_reused: bool  # an earlier cell already ran in this session
    load: LoadReply
    idle_marks: tuple[tuple[float, float], ...] = ()  # (time s, energy J) polls of a quiet window before the warmup


@dataclass(frozen=True)
class BatchReply:
    """One batch of measured iterations and the wall time they took together."""

    samples: tuple[IterationSample, ...]
    wall_s: float
    #: per sample: (time s, energy J) at its phase boundaries
    energy_marks: tuple[tuple[tuple[float, float], ...], ...] = ()


@dataclass(frozen=True)
class EndReply:
    """A cell's end: its memory figures and what the session says actually ran (empty when it cannot say)."""

    memory: dict[str, Any] = field(default_factory=dict)
    route_actual: dict[str, Any] = field(default_factory=dict)
    output_text: str | None = None  # a text prompt's generated text (the last iteration's), decoded


@dataclass(frozen=True)
class ErrorReply:
    """A Python exception in a child, sent instead of a reply; the child lives on."""

    error_type: str
    message: str
    remedy: str | None = None
    traceback: str | None = None
