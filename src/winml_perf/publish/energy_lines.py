"""The lines a run's text output adds for energy and sustained runs (docs/energy.md): each metered
cell's J/token per phase with its interval and idle power; each sustained cell's tokens/s over
time, its change points and its RSS slope. Nothing for a cell without either (its record says
why energy was not measured)."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from winml_perf.model.record import CellRecord
from winml_perf.model.record_measures import Sustained
from winml_perf.support.human_numbers import human, signed


def _interval(d: Mapping[str, Any] | None) -> str:
    if not d or d.get("low") is None or d.get("high") is None:
        return ""
    return f" [{human(d['low'])}, {human(d['high'])}]"


def _phase(name: str, p: Mapping[str, Any]) -> str:
    if p.get("status") != "measured":
        return f"{name} {p.get('status')} ({p.get('reason')})"
    return f"{name} {human(p['j_per_token'])} J/token{_interval(p.get('j_per_token_interval'))}"


def _slope(s: Mapping[str, Any] | None, scale: float, unit: str) -> str:
    if not s:
        return "-"
    return f"{signed(s['slope'] / scale)} {unit}/min [{signed(s['low'] / scale)}, {signed(s['high'] / scale)}]"


def energy_lines(cells: Sequence[CellRecord]) -> list[str]:
    lines = []
    any_sustained = False
    for c in cells:  # one walk: a long run's cells are read from disk (record/cell_spool.py)
        e = c.energy
        if e.status == "measured":
            meter = e.meter or {}
            idle = e.idle_w
            lines.append(
                f"[{c.cell_key}] energy ({meter.get('covers')}, 95% intervals): "
                + "; ".join(_phase(name, p or {}) for name, p in (("prefill", e.prefill), ("decode", e.decode)))
                + ("" if idle is None else f"; idle {human(idle)} W")
            )
        s = c.sustained
        if s is not None:
            any_sustained = True
            rates = [w["tokens_per_s"] for w in s.windows or () if w.get("tokens_per_s") is not None]
            cps = s.change_points
            found = (
                "not searched"
                if cps is None
                else ", ".join(f"{cp['shift']:+.1%} at {cp['t_s']:.0f} s" for cp in cps) or "none"
            )
            lines.append(
                f"[{c.cell_key}] sustained {s.duration_s:g} s: generated tokens/s median "
                f"{human(statistics.median(rates)) if rates else '-'} over {len(rates)} windows of "
                f"{s.window_s:g} s; change points: {found}; "
                f"RSS {_slope(s.rss_slope_bytes_per_min, 1 << 20, 'MiB')}"
            )
            lines.append(_time_line(c, s))
            if e.status != "measured":
                lines.append(f"[{c.cell_key}] energy: {e.status or 'not measured'} ({e.reason or 'no meter'})")
    if any_sustained:
        lines.append(
            "generated tokens/s: every token a window's generations produced over its wall time, prompt passes"
            " included; the table's decode tok/s: decode steps only, per generation (so it reads higher)"
        )
    return lines


def _time_line(c: CellRecord, s: Sustained) -> str:
    """Where a sustained cell's time went: the measured time against --duration (it stops at the
    first generation that ends past it), and what else the cell's wall time holds."""
    measured = c.measure_s or 0.0
    wall = c.wall_s or 0.0
    load = (c.load.model_load_ms or 0.0) / 1000 + (c.load.plugin_registration_ms or 0.0) / 1000
    warm = sum(float(i.warmup_s or 0.0) for i in c.invocations)
    rest = max(wall - measured - load - warm, 0.0)
    return (
        f"[{c.cell_key}] measured {human(measured)} s of --duration {s.duration_s:g} s (it stops after the"
        f" generation that crosses it); the cell took {human(wall)} s: load {human(load)} s, warmup"
        f" {human(warm)} s, {human(rest)} s starting its process and ending the cell"
    )
