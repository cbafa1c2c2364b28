"""Inline SVG for the dashboard, drawn here (no charting library, no network): a history chart with
the 95 % interval as a band, the medians as a line with one marker per record (its hover title
names the date, commit, version and testbed), change points as marked verticals, and a sparkline.

Axes: "nice" ticks (1, 2, 2.5 or 5 x 10^k; Heckbert, "Nice numbers for graph labels", Graphics Gems,
1990) that never go below zero (every metric here is a time, a rate or a size). The x axis is the
records in run order, evenly spaced (a run is a commit tested, not a moment: nights with no run
leave no gap, and a tick is a record's own commit and UTC date, never a date the run did not have).
Margins are sized from the longest tick label so no label is clipped. Numbers are written by
publish/formats.human, as every human output of winml-perf; the markers' hover titles, numbers and
all, by the page's script (assets/human.js, the same rule) from what the markers' group carries.

Cost: a page of a year of nightlies draws ~25,000 points, so the data of a chart is written as
integers in a scaled group (``DATA_UNITS``, strokes that do not scale) from numpy columns, and a
series' time axis (``Frame``) is computed once for all its charts.
"""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from html import escape
from typing import Any

import numpy as np

from winml_perf.publish.formats import human
from winml_perf.stats.series.changepoint import shift_text

#: Width of one character of the 11 px axis font, for sizing margins (a generous estimate).
CHAR_PX = 7.0
WIDTH, HEIGHT, TOP, BOTTOM, RIGHT = 460, 210, 14, 40, 14
#: Most labelled records on a chart's x axis.
MAX_X_TICKS = 5


def nice_step(span: float, count: int) -> float:
    raw = span / max(count, 1)
    mag: float = 10 ** math.floor(math.log10(raw))  # int ** int: a float for a negative power
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
    return human(v)


def unix_seconds(texts: Sequence[str]) -> np.ndarray:
    """Stored UTC times ('YYYY-MM-DDTHH:MM:SS...') as Unix seconds (float), parsed in bulk."""
    return np.array([t[:19] for t in texts], dtype="datetime64[s]").astype(np.int64).astype(float)


def _fmt(v: float) -> str:
    return f"{v:.1f}"


#: The data of a chart (band and line) is drawn in a group whose units are 1/DATA_UNITS of the
#: plot's width and height, as integers: cheap to write, finer than a pixel.
DATA_UNITS = 10_000


@dataclass
class Frame:
    """The x axis of every chart of one series: the records in run order, evenly spaced, with
    their times and commits, the labelled records, and each record's position in data units as
    text (shared by all the series' charts)."""

    times: np.ndarray  # Unix seconds per record
    commits: list[str]
    frac: np.ndarray  # where each record falls across the plot (0..1)
    x_text: list[str]
    ticks: list[tuple[float, str, str]]  # (fraction, short commit or '#n', UTC date MM-DD)

    @classmethod
    def of(cls, times: Sequence[float] | np.ndarray, commits: Sequence[Any] | None = None) -> Frame:
        ts = np.asarray(times, dtype=float)
        n = len(ts)
        names = [str(c or "") for c in commits] if commits is not None else [""] * n
        frac = np.linspace(0.0, 1.0, n) if n > 1 else np.full(n, 0.5)
        shown = np.unique(np.rint(np.linspace(0, n - 1, min(n, MAX_X_TICKS)))).astype(int).tolist() if n else []
        ticks = [
            (float(frac[i]), names[i][:7] or f"#{i + 1}", datetime.fromtimestamp(ts[i], UTC).strftime("%m-%d"))
            for i in shown
        ]
        x_text = list(map(str, np.rint(frac * DATA_UNITS).astype(np.int64).tolist()))
        return cls(ts, names, frac, x_text, ticks)

    def subset(self, idx: Sequence[int] | np.ndarray) -> Frame:
        """The frame of some of the records (those that have a metric)."""
        return Frame.of(self.times[idx], [self.commits[i] for i in idx])


def _pairs(x_text: Sequence[str], y: np.ndarray) -> str:
    """'x y x y ...' from x as text and y as data units."""
    out = [""] * (2 * len(x_text))
    out[0::2] = x_text
    out[1::2] = map(str, np.rint(y).astype(np.int64).tolist())
    return " ".join(out)


def chart(
    points: Sequence[Mapping[str, Any]],
    *,
    title: str,
    unit: str,
    change_points: Sequence[Mapping[str, Any]] = (),
    markers: bool = True,
    width: int = WIDTH,
    height: int = HEIGHT,
) -> str:
    """One history chart. ``points``: oldest first, each {t (UTC text), v, lo, hi, commit, version,
    testbed, run, status}; a failed record (v None) is a cross on the x axis. ``change_points``:
    {index (into points), shift, shift_low, shift_high, direction, shift_coverage (optional)}. ``markers``: a marker with a
    hover title per point (else the line and band only)."""
    frame = Frame.of(unix_seconds([p["t"] for p in points]), [p.get("commit") for p in points])
    col = {k: np.array([np.nan if p.get(k) is None else p[k] for p in points], dtype=float) for k in ("v", "lo", "hi")}
    labels = (
        Labels.of(
            [p["t"] for p in points],
            [p.get("commit") for p in points],
            [p.get("version") for p in points],
            points[0].get("testbed") if points else None,
            [p.get("run") for p in points],
        )
        if markers
        else None
    )
    return draw(
        frame,
        Columns(col["v"], col["lo"], col["hi"]),
        title=title,
        unit=unit,
        change_points=change_points,
        labels=labels,
        width=width,
        height=height,
    )


@dataclass(frozen=True)
class Labels:
    """What each record's hover title names, as the title shows it: its UTC minute, commit, version
    and run (the first 12 characters), one a record, and the series' testbed ('?' for none). The
    title is "TIME UTC · commit C · winml-perf V · TESTBED · run R"; the page's script writes it
    (assets/human.js, ``winmlTitle``) from the marker group's data-t, data-commit, data-version,
    data-run (JSON lists) and data-testbed when the pointer first reaches the group."""

    times: list[str]
    commits: list[str]
    versions: list[str]
    runs: list[str]
    testbed: str

    @classmethod
    def of(
        cls, times: Sequence[str], commits: Sequence[Any], versions: Sequence[Any], testbed: Any, runs: Sequence[Any]
    ) -> Labels:
        return cls(
            [t[:16].replace("T", " ") for t in times],
            [str(c or "?") for c in commits],
            [str(v or "?") for v in versions],
            [str(r or "?")[:12] for r in runs],
            str(testbed or "?"),
        )

    def subset(self, idx: Sequence[int] | np.ndarray) -> Labels:
        """The labels of some of the records (those a chart draws)."""
        pick = [int(i) for i in idx]
        return Labels(
            [self.times[i] for i in pick],
            [self.commits[i] for i in pick],
            [self.versions[i] for i in pick],
            [self.runs[i] for i in pick],
            self.testbed,
        )

    def attributes(self) -> str:
        """The marker group's data attributes that carry these labels, escaped; the JSON lists in single
        quotes, so that their own double quotes are written as they are (a list is ~half quotes)."""
        lists = {"t": self.times, "commit": self.commits, "version": self.versions, "run": self.runs}
        text = " ".join(
            f"data-{k}='{_in_single_quotes(json.dumps(v, ensure_ascii=False, separators=(',', ':')))}'"
            for k, v in lists.items()
        )
        return f'{text} data-testbed="{escape(self.testbed)}"'


def _in_single_quotes(text: str) -> str:
    """``text`` escaped for an attribute value in single quotes (its double quotes kept)."""
    return escape(text, quote=False).replace("'", "&#x27;")


@dataclass(frozen=True, eq=False)
class Columns:
    """A chart's values, one a record: the value and its interval's low and high (NaN: none)."""

    v: np.ndarray
    lo: np.ndarray
    hi: np.ndarray


def draw(
    frame: Frame,
    columns: Columns,
    *,
    title: str,
    unit: str,
    change_points: Sequence[Mapping[str, Any]] = (),
    labels: Labels | None = None,
    width: int = WIDTH,
    height: int = HEIGHT,
    model_changes: Sequence[Mapping[str, Any]] = (),
) -> str:
    """One history chart over ``frame`` from value, low and high ``columns`` (NaN: none; a record
    without a value is drawn only as a failed marker). ``labels``: a marker per record, its hover
    title naming these (None: the line and band only). ``change_points`` as for ``chart``;
    ``model_changes``: where the bundle's content changed (index of the first record of the new
    content, 'from', 'to'), drawn as a dashed line marked 'model'."""
    v, lo, hi = columns.v, columns.lo, columns.hi
    ok = ~np.isnan(v)
    banded = ok & ~np.isnan(lo) & ~np.isnan(hi)
    vals = np.concatenate([v[ok], lo[banded], hi[banded]])
    ticks = nice_ticks(float(vals.min()) if len(vals) else 0.0, float(vals.max()) if len(vals) else 1.0)
    y0, y1 = ticks[0], ticks[-1]
    left = 10 + CHAR_PX * max(len(tick_label(t)) for t in ticks)
    plot_w, plot_h = width - left - RIGHT, height - TOP - BOTTOM

    def y(val: float) -> float:
        return TOP + plot_h - (val - y0) / (y1 - y0) * plot_h

    def y_units(vals: np.ndarray) -> np.ndarray:
        return (y1 - vals) / (y1 - y0) * DATA_UNITS

    out = [
        f'<svg class="chart" viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" '
        f'aria-label="{escape(title)}">'
    ]
    for t in ticks:
        out.append(
            f'<line class="grid" x1="{_fmt(left)}" x2="{_fmt(width - RIGHT)}" y1="{_fmt(y(t))}" y2="{_fmt(y(t))}"/>'
            f'<text class="ylab" x="{_fmt(left - 5)}" y="{_fmt(y(t) + 4)}">{tick_label(t)}</text>'
        )
    for f, commit, day in frame.ticks:
        px = left + f * plot_w
        anchor = "start" if px - left < 35 else "end" if width - RIGHT - px < 35 else "middle"
        out.append(
            f'<line class="tick" x1="{_fmt(px)}" x2="{_fmt(px)}" y1="{_fmt(TOP + plot_h)}" y2="{_fmt(TOP + plot_h + 4)}"/>'
            f'<text class="xlab" text-anchor="{anchor}" x="{_fmt(px)}" y="{_fmt(TOP + plot_h + 15)}">{escape(commit)}</text>'
            f'<text class="xdate" text-anchor="{anchor}" x="{_fmt(px)}" y="{_fmt(TOP + plot_h + 27)}">{day}</text>'
        )
    out.append(f'<text class="unit" x="{_fmt(left)}" y="{TOP - 3}">{escape(unit)}</text>')
    out.append(
        f'<g class="data" transform="translate({_fmt(left)},{TOP}) scale({plot_w / DATA_UNITS:.6g},{plot_h / DATA_UNITS:.6g})">'
    )
    xs = frame.x_text
    if banded.sum() > 1:
        idx = np.flatnonzero(banded)
        upper = _pairs([xs[i] for i in idx], y_units(hi[idx]))
        lower = _pairs([xs[i] for i in idx[::-1]], y_units(lo[idx[::-1]]))
        out.append(f'<polygon class="band" points="{upper} {lower}"/>')
    if ok.sum() > 1:
        idx = np.flatnonzero(ok)
        line_x = xs if len(idx) == len(xs) else [xs[i] for i in idx]
        out.append(f'<polyline class="line" points="{_pairs(line_x, y_units(v[idx]))}"/>')
    out.append("</g>")
    px_all = left + frame.frac * plot_w
    if ok.sum() == 1:  # no line through one record: its value, and its interval as a whisker
        out.append(_solo(float(px_all[ok][0]), v[ok][0], lo[ok][0], hi[ok][0], y, dot=labels is None))
    label_rows: list[float] = []  # per row of labels, the right end of its last label
    for cp in sorted(change_points, key=lambda c: float(px_all[c["index"]])):
        cx = float(px_all[cp["index"]])
        day = datetime.fromtimestamp(frame.times[cp["index"]], UTC).strftime("%Y-%m-%d")
        label = f"{cp['shift']:+.1%}"
        anchor = "end" if width - RIGHT - cx < 60 else "start"
        dx = -3 if anchor == "end" else 3
        row = _label_row(label_rows, cx + dx, len(label) * CHAR_PX, anchor)
        out.append(
            f'<g class="cp {escape(cp["direction"].replace(" ", "-"))}"><title>change point {day} (commit '
            f"{escape(str(cp.get('commit') or '?'))}): {escape(shift_text(cp))}"
            f' {escape(cp["direction"])}</title><line x1="{_fmt(cx)}" x2="{_fmt(cx)}" y1="{TOP}" y2="{_fmt(TOP + plot_h)}"/>'
            f'<text text-anchor="{anchor}" x="{_fmt(cx + dx)}" y="{TOP + 10 + row * LABEL_ROW_UNITS}">{label}</text></g>'
        )
    for mc in model_changes:  # between the record before and the first of the new content
        i = int(mc["index"])
        cx = float(px_all[i] + px_all[i - 1]) / 2 if i > 0 else float(px_all[i])
        out.append(
            f'<g class="model-change"><title>model changed {escape(str(mc["from"]))} → {escape(str(mc["to"]))}'
            f" (first record {escape(str(mc.get('t') or '')[:16])}, commit {escape(str(mc.get('commit') or '?'))})</title>"
            f'<line x1="{_fmt(cx)}" x2="{_fmt(cx)}" y1="{TOP}" y2="{_fmt(TOP + plot_h)}"/>'
            f'<text text-anchor="middle" x="{_fmt(cx)}" y="{_fmt(TOP + plot_h - 3)}">model</text></g>'
        )
    if labels is not None:
        out.append(_markers(px_all, v, lo, hi, labels, y, TOP + plot_h, escape(unit)))
    out.append("</svg>")
    return "".join(out)


def _solo(x: float, val: float, low: float, high: float, y: Any, dot: bool) -> str:
    """The one record of a chart: a whisker over its interval (if any) and, unmarked, a dot."""
    out = ""
    if low == low and high == high:
        out += f'<line class="whisker" x1="{x:.1f}" x2="{x:.1f}" y1="{y(low):.1f}" y2="{y(high):.1f}"/>'
    if dot:
        out += f'<circle class="dot" cx="{x:.1f}" cy="{y(val):.1f}" r="3"/>'
    return out


def _markers(
    px: np.ndarray, v: np.ndarray, lo: np.ndarray, hi: np.ndarray, labels: Labels, y: Any, base: float, unit: str
) -> str:
    """A marker per record; a record without a value is a cross on the x axis. The markers' hover
    titles are not written: the group carries what they say, the records' labels (``Labels``) and
    their exact value, low and high (``data-v``, ``data-lo``, ``data-hi``: ``packed``), and
    assets/dashboard.js writes each title, its numbers as publish/formats.human writes them, when
    the pointer first reaches the chart's markers (a title and 3 numbers a record, a million titles
    at 10^6 records)."""
    out = [
        f'<g class="pts" data-unit="{unit}" data-v="{packed(v)}" data-lo="{packed(lo)}" data-hi="{packed(hi)}" '
        f"{labels.attributes()}>"
    ]
    cy = y(np.nan_to_num(v)).tolist()
    for x, yy, val in zip(px.tolist(), cy, v.tolist()):
        if val != val:  # NaN: the record failed
            out.append(f'<path class="pt failed" d="M{x - 3:.1f},{base - 3:.1f}l6,6m0,-6l-6,6"/>')
        else:
            out.append(f'<circle class="pt" cx="{x:.1f}" cy="{yy:.1f}" r="2.2"/>')
    out.append("</g>")
    return "".join(out)


def packed(column: np.ndarray) -> str:
    """A column's values exactly, as base64 of their little-endian float64 bytes (NaN: none): 1/50 of
    the time of writing their shortest reprs, and 0.6 of the text."""
    return base64.b64encode(np.asarray(column, dtype="<f8").tobytes()).decode("ascii")


def unpacked(text: str) -> np.ndarray:
    """The column ``packed`` wrote."""
    return np.frombuffer(base64.b64decode(text), dtype="<f8")


def sparkline(values: Sequence[float], width: int = 120, height: int = 26) -> str:
    """A small line of the newest values, its y range from zero-clamped nice ticks."""
    if not values:
        return ""
    if len(values) == 1:
        return (
            f'<svg class="spark" viewBox="0 0 {width} {height}" width="{width}" height="{height}">'
            f'<circle cx="{width - 3}" cy="{height / 2}" r="2"/></svg>'
        )
    ticks = nice_ticks(min(values), max(values), 3)
    lo, hi = ticks[0], ticks[-1]
    n = len(values)
    pts = " ".join(
        f"{_fmt(2 + (width - 4) * (i / max(n - 1, 1)))},{_fmt(height - 2 - (height - 4) * (v - lo) / (hi - lo))}"
        for i, v in enumerate(values)
    )
    return f'<svg class="spark" viewBox="0 0 {width} {height}" width="{width}" height="{height}"><polyline points="{pts}"/></svg>'


LABEL_ROW_UNITS = 12  # the height of one row of labels


def _label_row(rows: list[float], x: float, label_w: float, anchor: str) -> int:
    """The first row whose last label ends before this one starts (labels of close change points
    would overprint each other); a new row when none has room. ``rows`` is updated."""
    start, end = (x - label_w, x) if anchor == "end" else (x, x + label_w)
    for i, right in enumerate(rows):
        if right + 4 <= start:
            rows[i] = end
            return i
    rows.append(end)
    return len(rows) - 1
