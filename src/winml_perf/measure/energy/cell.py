"""The cell driver's energy bookkeeping: phase readings from a batch's marks, the timeline point of
a sustained run's batch, the power state at the cell's start and the record's energy section."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from winml_perf.model.sample import IterationSample
from winml_perf.model.spec import CellSpec
from winml_perf.power import accounting, state


def readings_of_batch(
    samples: Sequence[IterationSample], marks: Sequence[Sequence[Sequence[float]]], invocation: int
) -> list[accounting.PhaseReading]:
    """Each generation's prefill and decode occurrences (no marks: energy not measured, none)."""
    out: list[accounting.PhaseReading] = []
    if not marks:
        return out
    for sample, m in zip(samples, marks, strict=True):
        if len(m) == 3:
            out += accounting.readings_of(m, sample.prompt_tokens or 0, sample.new_tokens or 0, invocation)
    return out


def rss_bytes(pid: int | None) -> int | None:
    """Resident set of the process running the session (this one when it runs here)."""
    import psutil

    try:
        return int(psutil.Process(pid or os.getpid()).memory_info().rss)
    except (psutil.Error, OSError):
        return None


def timeline_point(elapsed_s: float, reply: Any, pid: int | None) -> dict[str, Any]:
    """One batch of a sustained run: when it started (s into the measured time), its wall time,
    tokens generated, energy over its generations (when metered) and the session's RSS after it."""
    tokens = sum((s.new_tokens or 0) for s in reply.samples)
    marks = [m for m in reply.energy_marks if len(m) == 3]
    point: dict[str, Any] = {
        "t_s": elapsed_s,
        "wall_s": reply.wall_s,
        "iterations": len(reply.samples),
        "tokens": tokens,
        "rss_bytes": rss_bytes(pid),
    }
    if marks:
        joules = sum(m[2][1] - m[0][1] for m in marks)
        why = accounting.impossible_joules(joules)  # the one plausibility rule of power/accounting.py
        point.update({"energy_j": None, "energy_not_measured": why} if why else {"energy_j": joules})
    return point


def power_state_of(cell: CellSpec, note: Mapping[str, Any] | None) -> dict[str, Any]:
    """The power state at the cell's start; the GPU's when its meter covers a GPU."""
    options = [o for stage in cell.recorded_route.stages for o in stage.provider_options_after]
    gpu = "gpu" in (note or {}).get("devices", ())
    return state.power_state(options, gpu=gpu)


def cell_section(context: Any, label: str, progress: Any) -> dict[str, Any]:
    """The record's ``energy`` section: J/token per phase (or "not measured" and why), idle power,
    the power state, and where it differs from another route's in this sweep."""
    note = context.meter_notes.get(label)
    idle = accounting.idle_power(progress.idle_marks) if len(progress.idle_marks) >= 2 else None
    section = accounting.cell_energy(note, progress.energy_readings, idle)
    own = progress.power_state
    section["power_state"] = own
    if own:
        context.power_states.setdefault(label, own)
        differs = {
            other: {k: list(v) for k, v in state.differences(own, theirs).items()}
            for other, theirs in context.power_states.items()
            if other != label
        }
        differs = {k: v for k, v in differs.items() if v}
        if differs:
            section["power_state_differs"] = differs
    return section
