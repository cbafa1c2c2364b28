"""Inline SVG for the dashboard, drawn here (no charting library, no network): a history chart with
the 95 % interval as a band, the medians as a line with one marker per record (its hover title
names the date, commit, version and testbed), change points as marked verticals, and a sparkline.

Axes: "nice" ticks (1, 2, 2.5 or 5 x 10^k; Heckbert, "Nice numbers for graph labels", Graphics Gems,
1990) that never go below zero (every metric here is a time, a rate or a size); x ticks by date.
Margins are sized from the longest tick label so no label is clipped.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone
from html import escape
from typing import Any, Mapping, Sequence

#: Width of one character of the 11 px axis font, for sizing margins (a generous estimate).
CHAR_PX = 7.0
WIDTH, HEIGHT, TOP, BOTTOM, RIGHT = 460, 200, 14, 34, 14


def nice_step(span: float, count: int) -> float:
    raw = span / max(count, 1)
    mag = 10 ** math.floor(math.log10(raw))
    return next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Ticks covering [low, high], never below zero."""
    low, high = max(0.0, low), max(0.0, high)
    if high <= low:
        high = low + (abs(low) * 0.1 or 1.0)
    step = nice_step(high - low, count)
    start = max(0.0, math.floor(low / step) * step)
    ticks, t = [], start
    while t < high + step * 0.999:
        ticks.append(round(t, 12))
        t += step
    return ticks


def tick_label(v: float) -> str:
    if v == 0:
        return "0"
    if abs(v) >= 1e6:
        return f"{v / 1e6:g}M"
    if abs(v) >= 1e4:
        return f"{v / 1e3:g}k"
    return f"{v:.4g}"


def parse_utc(text: str) -> datetime:
    """A stored UTC time ('YYYY-MM-DDTHH:MM:SS...') as an aware datetime (seconds resolution)."""
    return datetime.fromisoformat(text[:19]).replace(tzinfo=timezone.utc)


def date_ticks(t0: float, t1: float, count: int = 5) -> list[float]:
    """Unix times of round dates (whole days, weeks or months) between t0 and t1."""
    days = max((t1 - t0) / 86400, 1e-9)
    step_days = next((d for d in (1, 2, 7, 14, 30, 61, 91, 182, 365) if days / d <= count), 730)
    start = datetime.fromtimestamp(t0, timezone.utc).replace(hour=0, minute=0, second=0, microsecond=0)
    if step_days >= 30:
        start = start.replace(day=1)
    out, t = [], start
    while t.timestamp() <= t1:
        if t.timestamp() >= t0:
            out.append(t.timestamp())
        if step_days >= 30:
            months = step_days // 30
            t = (t.replace(day=1) + timedelta(days=32 * months)).replace(day=1)
        else:
            t += timedelta(days=step_days)
    return out or [t0]


def _fmt(v: float) -> str:
    return f"{v:.1f}"


def chart(points: Sequence[Mapping[str, Any]], *, title: str, unit: str, change_points: Sequence[Mapping[str, Any]] = (),
          markers: bool = True, width: int = WIDTH, height: int = HEIGHT) -> str:
    """One history chart. ``points``: oldest first, each {t (UTC text), v, lo, hi, commit, version,
    testbed, run, status}; a failed record (v None) is a cross on the x axis. ``change_points``:
    {index (into points), shift, shift_low, shift_high, direction}. ``markers``: a marker with a
    hover title per point (else the line and band only)."""
    ok = [p for p in points if p.get("v") is not None]
    values = [p["v"] for p in ok] + [x for p in ok for x in (p.get("lo"), p.get("hi")) if x is not None]
    ticks = nice_ticks(min(values, default=0.0), max(values, default=1.0))
    y0, y1 = ticks[0], ticks[-1]
    left = 10 + CHAR_PX * max(len(tick_label(t)) for t in ticks)
    times = [parse_utc(p["t"]).timestamp() for p in points]
    t0, t1 = (min(times), max(times)) if times else (0.0, 1.0)
    if t1 <= t0:
        t0, t1 = t0 - 43200, t1 + 43200
    plot_w, plot_h = width - left - RIGHT, height - TOP - BOTTOM

    def x(t: float) -> float:
        return left + (t - t0) / (t1 - t0) * plot_w

    def y(v: float) -> float:
        return TOP + plot_h - (v - y0) / (y1 - y0) * plot_h

    out = [f'<svg class="chart" viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" '
           f'aria-label="{escape(title)}">']
    for t in ticks:
        out.append(f'<line class="grid" x1="{_fmt(left)}" x2="{_fmt(width - RIGHT)}" y1="{_fmt(y(t))}" y2="{_fmt(y(t))}"/>'
                   f'<text class="ylab" x="{_fmt(left - 5)}" y="{_fmt(y(t) + 4)}">{tick_label(t)}</text>')
    for t in date_ticks(t0, t1):
        label = datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%d")
        anchor = "start" if x(t) - left < 35 else "end" if width - RIGHT - x(t) < 35 else "middle"
        out.append(f'<line class="tick" x1="{_fmt(x(t))}" x2="{_fmt(x(t))}" y1="{_fmt(TOP + plot_h)}" y2="{_fmt(TOP + plot_h + 4)}"/>'
                   f'<text class="xlab" text-anchor="{anchor}" x="{_fmt(x(t))}" y="{_fmt(TOP + plot_h + 16)}">{label}</text>')
    out.append(f'<text class="unit" x="{_fmt(left)}" y="{TOP - 3}">{escape(unit)}</text>')
    at = {id(p): x(t) for p, t in zip(points, times)}
    band = [(at[id(p)], p) for p in ok if p.get("lo") is not None and p.get("hi") is not None]
    if len(band) > 1:
        upper = " ".join(f"{_fmt(px)},{_fmt(y(p['hi']))}" for px, p in band)
        lower = " ".join(f"{_fmt(px)},{_fmt(y(p['lo']))}" for px, p in reversed(band))
        out.append(f'<polygon class="band" points="{upper} {lower}"/>')
    if len(ok) > 1:
        out.append('<polyline class="line" points="' + " ".join(f"{_fmt(at[id(p)])},{_fmt(y(p['v']))}" for p in ok) + '"/>')
    for cp in change_points:
        p = points[cp["index"]]
        cx = at[id(p)]
        label = f"{cp['shift']:+.1%}"
        anchor = "end" if width - RIGHT - cx < 60 else "start"
        dx = -3 if anchor == "end" else 3
        out.append(f'<g class="cp {escape(cp["direction"].replace(" ", "-"))}"><title>change point {p["t"][:10]} (commit '
                   f'{escape(str(p.get("commit") or "?"))}): {cp["shift"]:+.1%} [{cp["shift_low"]:+.1%}, {cp["shift_high"]:+.1%}]'
                   f' {escape(cp["direction"])}</title><line x1="{_fmt(cx)}" x2="{_fmt(cx)}" y1="{TOP}" y2="{_fmt(TOP + plot_h)}"/>'
                   f'<text text-anchor="{anchor}" x="{_fmt(cx + dx)}" y="{TOP + 10}">{label}</text></g>')
    for p, t in zip(points, times) if markers else ():
        tip = (f"{p['t'][:16].replace('T', ' ')} UTC · commit {p.get('commit') or '?'} · winml-perf {p.get('version') or '?'}"
               f" · {p.get('testbed') or '?'} · run {str(p.get('run') or '?')[:12]}")
        if p.get("v") is None:
            cx, cy = at[id(p)], TOP + plot_h
            out.append(f'<path class="pt failed" d="M{_fmt(cx - 3)},{_fmt(cy - 3)}l6,6m0,-6l-6,6"><title>{escape(tip)} · failed</title></path>')
            continue
        ci = f" [{p['lo']:.4g}, {p['hi']:.4g}]" if p.get("lo") is not None and p.get("hi") is not None else ""
        out.append(f'<circle class="pt" cx="{_fmt(at[id(p)])}" cy="{_fmt(y(p["v"]))}" r="2.2"><title>{escape(tip)} · '
                   f'{p["v"]:.4g}{ci} {escape(unit)}</title></circle>')
    out.append("</svg>")
    return "".join(out)


def sparkline(values: Sequence[float], width: int = 120, height: int = 26) -> str:
    """A small line of the newest values, its y range from zero-clamped nice ticks."""
    if not values:
        return ""
    if len(values) == 1:
        return (f'<svg class="spark" viewBox="0 0 {width} {height}" width="{width}" height="{height}">'
                f'<circle cx="{width - 3}" cy="{height / 2}" r="2"/></svg>')
    ticks = nice_ticks(min(values), max(values), 3)
    lo, hi = ticks[0], ticks[-1]
    n = len(values)
    pts = " ".join(f"{_fmt(2 + (width - 4) * (i / max(n - 1, 1)))},{_fmt(height - 2 - (height - 4) * (v - lo) / (hi - lo))}"
                   for i, v in enumerate(values))
    return f'<svg class="spark" viewBox="0 0 {width} {height}" width="{width}" height="{height}"><polyline points="{pts}"/></svg>'
