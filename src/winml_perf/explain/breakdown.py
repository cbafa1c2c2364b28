"""Per-phase breakdown: wall time = stage session times + host time; session = operators + overhead.

A *phase* is one prompt pass (``prompt``: the prompt's runs and the first token's sampling), one
decode step (``decode_step``: one ``generate_next_token`` after the first), or one inference of a
plain ONNX model (``run``). Several instances of a phase are averaged, so every figure is a mean
per instance and the sums hold exactly:

    wall_ms = sum(stage.session_ms) + host_ms            (host: the runtime's own work between sessions)
    stage.session_ms = sum(op.ms) + stage.overhead_ms    (overhead: executor, input/output copies)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from winml_perf.explain.profile import COPY_OPS, RunProfile

PHASES = ("prompt", "decode_step", "run")


@dataclass(frozen=True)
class OpCost:
    """One operator type on one EP in one stage, per phase instance."""

    op: str
    ep: str
    count: float
    ms: float
    bytes: float  # summed output size

    @property
    def is_copy(self) -> bool:
        return self.op in COPY_OPS

    def to_dict(self) -> dict[str, Any]:
        return {"op": self.op, "ep": self.ep, "count": _num(self.count), "ms": _num(self.ms), "bytes": _num(self.bytes)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> OpCost:
        return cls(str(d["op"]), str(d["ep"]), float(d["count"]), float(d["ms"]), float(d.get("bytes") or 0))


@dataclass(frozen=True)
class StageCost:
    stage: str
    runs: float  # session runs per phase instance
    session_ms: float
    ops: tuple[OpCost, ...]

    @property
    def ops_ms(self) -> float:
        return sum(o.ms for o in self.ops)

    @property
    def overhead_ms(self) -> float:
        return self.session_ms - self.ops_ms

    def to_dict(self) -> dict[str, Any]:
        return {
            "stage": self.stage,
            "runs": _num(self.runs),
            "session_ms": _num(self.session_ms),
            "ops_ms": _num(self.ops_ms),
            "overhead_ms": _num(self.overhead_ms),
            "ops": [o.to_dict() for o in self.ops],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> StageCost:
        return cls(
            str(d["stage"]),
            float(d["runs"]),
            float(d["session_ms"]),
            tuple(OpCost.from_dict(o) for o in d.get("ops") or ()),
        )


@dataclass(frozen=True)
class PhaseBreakdown:
    phase: str
    instances: int  # how many prompt passes / decode steps / runs were averaged
    wall_ms: float
    stages: tuple[StageCost, ...]

    @property
    def sessions_ms(self) -> float:
        return sum(s.session_ms for s in self.stages)

    @property
    def host_ms(self) -> float:
        return self.wall_ms - self.sessions_ms

    def copies(self) -> dict[str, float]:
        """Copies between devices (MemcpyToHost/MemcpyFromHost nodes) over all stages."""
        ops = [o for s in self.stages for o in s.ops if o.is_copy]
        return {
            "count": _num(sum(o.count for o in ops)),
            "ms": _num(sum(o.ms for o in ops)),
            "bytes": _num(sum(o.bytes for o in ops)),
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "phase": self.phase,
            "instances": self.instances,
            "wall_ms": _num(self.wall_ms),
            "sessions_ms": _num(self.sessions_ms),
            "host_ms": _num(self.host_ms),
            "copies": self.copies(),
            "stages": [s.to_dict() for s in self.stages],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PhaseBreakdown:
        return cls(
            str(d["phase"]),
            int(d["instances"]),
            float(d["wall_ms"]),
            tuple(StageCost.from_dict(s) for s in d.get("stages") or ()),
        )


def _num(x: float) -> float:
    """Figures rounded to nanoseconds / whole bytes for the record (µs inputs: nothing real is lost)."""
    return round(float(x), 6)


def stage_cost(stage: str, runs: Sequence[RunProfile], instances: int) -> StageCost:
    """Mean per phase instance of ``runs`` (all runs of this stage during ``instances`` instances)."""
    totals: dict[tuple[str, str], list[float]] = {}
    for run in runs:
        for n in run.nodes:
            t = totals.setdefault((n.op, n.ep), [0.0, 0.0, 0.0])
            t[0] += 1
            t[1] += n.dur_us
            t[2] += n.output_bytes
    ops = [
        OpCost(op, ep, c / instances, us / 1000.0 / instances, b / instances) for (op, ep), (c, us, b) in totals.items()
    ]
    ops.sort(key=lambda o: (-o.ms, o.op, o.ep))
    session_ms = sum(r.dur_us for r in runs) / 1000.0 / instances
    return StageCost(stage, len(runs) / instances, session_ms, tuple(ops))


def phase_breakdown(
    phase: str, walls_ms: Sequence[float], stage_runs: Mapping[str, Sequence[RunProfile]]
) -> PhaseBreakdown:
    """The breakdown of ``len(walls_ms)`` instances of ``phase``; ``stage_runs``: every session run of
    each stage during those instances (in the order the stages ran). Stages with no run are left out."""
    if phase not in PHASES:
        raise ValueError(f"unknown phase {phase!r}")
    n = len(walls_ms)
    if n == 0:
        raise ValueError("a phase breakdown needs at least one instance")
    stages = tuple(stage_cost(name, runs, n) for name, runs in stage_runs.items() if runs)
    return PhaseBreakdown(phase, n, sum(walls_ms) / n, stages)


def phases_from_dict(d: Mapping[str, Any]) -> dict[str, PhaseBreakdown]:
    """The phases of a record's ``explain`` section."""
    return {name: PhaseBreakdown.from_dict(p) for name, p in (d.get("phases") or {}).items()}
