"""Joules per token of a phase (prefill, decode) from counter readings at its boundaries.

Each generation is read three times: before the prompt, after the first token (prefill ends), and
after the last token (decode ends). An occurrence of a phase is one generation's prefill or decode.

The rule for a counter that moves every ``update_period_s`` (T):
- an occurrence shorter than MIN_PHASE_PERIODS x T on average is "too short": the counter read at
  its ends reflects the previous update, so most of such a window's energy belongs to the phase
  before it; no number is given;
- otherwise the phase is aggregated over the invocation's occurrences: energy summed over the
  occurrences / tokens summed; an invocation whose occurrences together last less than
  MIN_TOTAL_PERIODS x T is "too short" too;
- ``counter_bound_pct`` = 100 x T / (mean occurrence): the largest share of one occurrence's
  reading the update lag can move in from a neighbouring phase.
Idle power comes from a quiet window before the cell; "above idle" subtracts idle x phase time.
The interval: over invocations (one aggregated value each) from two on; one invocation: the
within-process interval over its occurrences (its coverage says so).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from winml_perf.stats.hierarchical import median_interval

MIN_PHASE_PERIODS = 2.0
MIN_TOTAL_PERIODS = 10.0
PREFILL, DECODE = "prefill", "decode"
PHASES = (PREFILL, DECODE)
NOT_MEASURED = "not measured"
TOO_SHORT = "too short"
MEASURED = "measured"


@dataclass(frozen=True)
class PhaseReading:
    """One occurrence of a phase: its energy (J), its wall time (s), its tokens and invocation."""

    phase: str
    joules: float
    seconds: float
    tokens: int
    invocation: int = 0


def readings_of(
    marks: Sequence[Sequence[float]], prompt_tokens: int, new_tokens: int, invocation: int
) -> list[PhaseReading]:
    """A generation's three (time s, counter J) marks -> its prefill and decode occurrences.
    Decode tokens: the steps after the first token (the first comes with the prefill)."""
    (t0, e0), (t1, e1), (t2, e2) = marks
    out = [PhaseReading(PREFILL, e1 - e0, t1 - t0, prompt_tokens, invocation)]
    if new_tokens > 1:
        out.append(PhaseReading(DECODE, e2 - e1, t2 - t1, new_tokens - 1, invocation))
    return out


def idle_power(marks: Sequence[Sequence[float]]) -> dict[str, Any]:
    """Idle power from (time s, counter J) polls of a quiet window; the counter's update period and
    step as observed there (the times between, and the sizes of, the counter's changes)."""
    (ta, ea), (tb, eb) = marks[0], marks[-1]
    changes = [(t, e) for (t, e), (_, prev) in zip(marks[1:], marks[:-1], strict=True) if e != prev]
    gaps = [b[0] - a[0] for a, b in zip(changes, changes[1:], strict=False)]
    steps = [b[1] - a[1] for a, b in zip(marks, marks[1:], strict=False) if b[1] != a[1]]
    return {
        "window_s": tb - ta,
        "idle_w": (eb - ea) / (tb - ta) if tb > ta else None,
        "polls": len(marks),
        "observed_update_period_s": _median(gaps),
        "observed_smallest_step_j": min(steps) if steps else None,
    }


def phase_energy(
    readings: Sequence[PhaseReading], phase: str, update_period_s: float, idle_w: float | None
) -> dict[str, Any]:
    """The phase's J/token (see the module doc for the rule), above idle when idle is known."""
    mine = [r for r in readings if r.phase == phase and r.tokens > 0]
    if not mine:
        return {"status": NOT_MEASURED, "reason": f"no {phase} phase was measured"}
    mean_s = math.fsum(r.seconds for r in mine) / len(mine)
    out: dict[str, Any] = {
        "occurrences": len(mine),
        "mean_occurrence_s": mean_s,
        "counter_bound_pct": 100.0 * update_period_s / mean_s if mean_s > 0 else None,
    }
    if mean_s < MIN_PHASE_PERIODS * update_period_s:
        return {
            **out,
            "status": TOO_SHORT,
            "reason": f"each {phase} lasts {mean_s * 1000:.1f} ms, under {MIN_PHASE_PERIODS:g} x the counter's "
            f"update period ({update_period_s * 1000:g} ms)",
        }
    by_inv: dict[int, list[PhaseReading]] = {}
    for r in mine:
        by_inv.setdefault(r.invocation, []).append(r)
    short = [k for k, rs in by_inv.items() if math.fsum(r.seconds for r in rs) < MIN_TOTAL_PERIODS * update_period_s]
    if short:
        return {
            **out,
            "status": TOO_SHORT,
            "reason": f"invocation {short[0]}'s {phase} phases last under {MIN_TOTAL_PERIODS:g} x the counter's "
            f"update period in all",
        }
    out.update(status=MEASURED, joules=math.fsum(r.joules for r in mine), seconds=math.fsum(r.seconds for r in mine))
    out["tokens"] = sum(r.tokens for r in mine)
    out["mean_w"] = out["joules"] / out["seconds"]
    out.update(_per_token(list(by_inv.values()), None, "j_per_token"))
    if idle_w is not None:
        out.update(_per_token(list(by_inv.values()), idle_w, "j_per_token_above_idle"))
    return out


def _per_token(invocations: list[list[PhaseReading]], idle_w: float | None, key: str) -> dict[str, Any]:
    """J/token with its interval: over invocations (aggregated each) from two on, else within the one."""

    def value(rs: Sequence[PhaseReading]) -> float:
        joules = math.fsum(r.joules - (idle_w or 0.0) * r.seconds for r in rs)
        return joules / sum(r.tokens for r in rs)

    if len(invocations) >= 2:
        groups = [[value(rs)] for rs in invocations]
    else:
        groups = [[value([r]) for r in invocations[0]]]
    interval = median_interval(groups)
    # The point reported is the interval's own estimate, so it always lies inside its interval (a
    # ratio of sums can fall outside an interval of per-occurrence values); the pooled ratio is kept.
    pooled = value([r for rs in invocations for r in rs])
    return {key: interval.estimate, f"{key}_interval": interval.to_dict(), f"{key}_pooled": pooled}


def _median(xs: Sequence[float]) -> float | None:
    if not xs:
        return None
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def impossible_joules(joules: float) -> str | None:
    """Why one energy difference cannot be energy (a counter running backwards), or None."""
    if not math.isfinite(joules) or joules < 0:
        return f"the energy counter ran backwards ({joules:.3g} J): an impossible reading"
    return None


def impossible_reading(readings: Sequence[PhaseReading], idle: Mapping[str, Any] | None, period: float) -> str | None:
    """Why these counter readings cannot be energy (no device draws no power, and no energy counter
    runs backwards), or None: a counter running backwards, or one frozen over many update periods."""
    idle_w = (idle or {}).get("idle_w")
    window = float((idle or {}).get("window_s") or 0.0)
    if isinstance(idle_w, int | float) and (not math.isfinite(idle_w) or idle_w < 0):
        return f"the energy counter ran backwards over the idle window ({idle_w:.3g} W): an impossible reading"
    back = [r for r in readings if impossible_joules(r.joules)]
    if back:
        r = back[0]
        return (
            f"the energy counter ran backwards during a {r.phase} of invocation {r.invocation} "
            f"({r.joules:.3g} J): an impossible reading"
        )
    seconds = math.fsum(r.seconds for r in readings)
    if readings and math.fsum(r.joules for r in readings) == 0 and seconds >= MIN_TOTAL_PERIODS * period:
        return (
            f"the energy counter did not move in {seconds:.3g} s of generation ({seconds / period:.0f} update "
            "periods): it is frozen, an impossible reading"
        )
    if idle_w == 0 and window >= MIN_TOTAL_PERIODS * period:
        return f"the energy counter did not move in the {window:.3g} s idle window: it is frozen, an impossible reading"
    return None


def cell_energy(
    meter: Mapping[str, Any] | None,
    readings: Sequence[PhaseReading],
    idle: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """The record's ``energy`` section. ``meter``: what it covers, resolution, update period and
    ``why_not`` (no meter: the section says "not measured" and why)."""
    if meter is None or meter.get("why_not"):
        why = (meter or {}).get("why_not") or "no energy meter covers this route's devices"
        return {"status": NOT_MEASURED, "reason": why}
    if not readings:
        return {
            "status": NOT_MEASURED,
            "reason": "no generation was read (the cell measured none)",
            "meter": dict(meter),
        }
    idle_w = (idle or {}).get("idle_w")
    period = float(meter["update_period_s"])
    why = impossible_reading(readings, idle, period)
    if why:
        return {"status": NOT_MEASURED, "reason": why, "meter": dict(meter), "idle": dict(idle or {})}
    if idle and idle.get("window_s"):  # the window's ends can each be one update stale
        idle = {**idle, "counter_bound_pct": 100.0 * period / idle["window_s"]}
    phases = {p: phase_energy(readings, p, period, idle_w) for p in PHASES}
    return {
        "status": MEASURED,
        "meter": dict(meter),
        "idle": dict(idle or {}),
        "idle_w": idle_w,
        "rule": {"min_phase_periods": MIN_PHASE_PERIODS, "min_total_periods": MIN_TOTAL_PERIODS},
        **phases,
        "prefill_j_per_token": phases[PREFILL].get("j_per_token"),
        "decode_j_per_token": phases[DECODE].get("j_per_token"),
    }
