"""The chart of a sustained run (`winml perf --duration`): tokens/s over the run with the change
points found in it, the session's RSS with its Theil-Sen slope, and the power of the generations
where a meter read it. One self-contained HTML page per cell, in the dashboard's style."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from html import escape
from typing import Any

import numpy as np

from winml_perf.publish.dashboard_page import render_page
from winml_perf.publish.dashboard_svg import DATA_UNITS, MAX_X_TICKS, Columns, Frame, draw
from winml_perf.support.human_numbers import signed

MIB = float(1 << 20)


def _frame(start_utc: str, t_s: Sequence[float], duration_s: float) -> Frame:
    """An x axis in seconds into the run (the times themselves: a change point's hover date)."""
    try:
        start = datetime.fromisoformat(start_utc.replace("Z", "+00:00")).timestamp()
    except ValueError:
        start = 0.0
    t = np.asarray(t_s, dtype=float)
    frac = t / duration_s if duration_s > 0 else np.zeros_like(t)
    frac = np.clip(frac, 0.0, 1.0)
    ticks = [(float(f), f"{f * duration_s:.0f} s", "") for f in np.linspace(0.0, 1.0, min(MAX_X_TICKS, 6))]
    x_text = list(map(str, np.rint(frac * DATA_UNITS).astype(np.int64).tolist()))
    return Frame(start + t, [""] * len(t), frac, x_text, ticks)


def _slope_text(slope: Mapping[str, Any] | None, scale: float, unit: str) -> str:
    if not slope:
        return "slope: too few windows"
    return (
        f"slope {signed(slope['slope'] / scale)} {unit}/min "
        f"(95 % interval {signed(slope['low'] / scale)} to {signed(slope['high'] / scale)}, Theil-Sen over {slope['points']} windows)"
    )


def _series(windows: Sequence[Mapping[str, Any]], key: str, scale: float = 1.0) -> tuple[list[float], np.ndarray]:
    rows = [(w["t_s"], w[key]) for w in windows if w.get(key) is not None]
    return [t for t, _ in rows], np.array([v / scale for _, v in rows], dtype=float)


def cell_charts(cell: Mapping[str, Any]) -> tuple[str, int]:
    """(the HTML of one sustained cell's charts and findings, how many charts)."""
    s = cell.get("sustained") or {}
    windows, duration = s.get("windows") or [], float(s.get("duration_s") or 0.0)
    start = str(cell.get("started_utc") or "")
    parts = [f"<h2>{escape(str(cell.get('cell_key')))}</h2>"]
    charts = 0
    t, v = _series(windows, "tokens_per_s")
    if len(v):
        index = {round(x, 9): i for i, x in enumerate(t)}
        cps = [
            {**cp, "index": index[round(cp["t_s"], 9)]}
            for cp in (s.get("change_points") or [])
            if round(cp["t_s"], 9) in index
        ]
        nan = np.full(len(v), np.nan)
        svg = draw(
            _frame(start, t, duration), Columns(v, nan, nan), title="tokens/s", unit="tokens/s", change_points=cps
        )
        found = (
            "; ".join(f"at {cp['t_s']:.0f} s: {cp['shift']:+.1%} ({cp['direction']})" for cp in cps)
            or "no change point"
        )
        if s.get("change_points") is None:
            found = escape(str(s.get("change_points_note") or "change points not searched"))
        parts.append(
            f"<div class='card'><h3>generated tokens/s, {s.get('window_s', 0):g} s windows</h3>{svg}"
            f"<p>change points: {found}. Drift: {_slope_text(s.get('tokens_per_s_slope_per_min'), 1.0, 'tokens/s')}</p></div>"
        )
        charts += 1
    t, v = _series(windows, "rss_bytes", MIB)
    if len(v):
        nan = np.full(len(v), np.nan)
        svg = draw(_frame(start, t, duration), Columns(v, nan, nan), title="RSS", unit="MiB")
        parts.append(
            f"<div class='card'><h3>RSS of the session's process</h3>{svg}"
            f"<p>{_slope_text(s.get('rss_slope_bytes_per_min'), MIB, 'MiB')}</p></div>"
        )
        charts += 1
    t, v = _series(windows, "power_w")
    if len(v):
        nan = np.full(len(v), np.nan)
        svg = draw(_frame(start, t, duration), Columns(v, nan, nan), title="power", unit="W")
        covers = escape(str(((cell.get("energy") or {}).get("meter") or {}).get("covers", "")))
        parts.append(
            f"<div class='card'><h3>power during generation ({covers})</h3>{svg}"
            f"<p>{_slope_text(s.get('power_slope_w_per_min'), 1.0, 'W')}</p></div>"
        )
        charts += 1
    else:
        why = (cell.get("energy") or {}).get("reason")
        if why:
            parts.append(f"<p>energy: not measured ({escape(str(why))})</p>")
    return "".join(parts), charts


def sustained_page(run: Mapping[str, Any], title: str = "sustained run") -> tuple[str, int]:
    """(the page of every sustained cell of a run record, how many charts); 0 charts: none had a series."""
    cells = [c for c in run.get("cells") or [] if c.get("sustained")]
    body, charts = [], 0
    for c in cells:
        html, n = cell_charts(c)
        body.append(html)
        charts += n
    status = {"charts": charts, "records": len(cells), "state": "ok" if cells else "empty"}
    return render_page(title, title, "".join(body), status), charts
