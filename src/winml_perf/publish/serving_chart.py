"""The serving curve of a `winml serve` run record: for each bundle and testbed one chart of
throughput (output tokens/s) against latency (TTFT p50 and TPOT p50, one chart each), a line per
route through its closed-loop points in order of concurrency, each point labelled with its load
(``c4``) and the open-loop points marked apart (``r200/s``, a saturated one drawn hollow); then each
cell's batch occupancy and waiting requests over time (its first invocation's engine steps). Inline
SVG on the dashboard's page shell; `winml dashboard --serving RUN.json -o DIR` writes DIR/serving.html."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from winml_perf.publish.dashboard_page import render_page
from winml_perf.publish.dashboard_svg import nice_ticks, tick_label

WIDTH, HEIGHT, LEFT, TOP, BOTTOM, RIGHT = 520, 280, 56, 16, 40, 110
#: Line colours, one per route in the order routes appear (cycled).
COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b")
LATENCIES = (("ttft_ms_p50", "TTFT p50 (ms)"), ("tpot_ms_p50", "TPOT p50 (ms)"))


def _figure(cell: Mapping[str, Any], name: str) -> float | None:
    value = ((cell.get("serving") or {}).get("figures") or {}).get(name, {}).get("estimate")
    return None if value is None else float(value)


def _points(cells: Sequence[Mapping[str, Any]], latency: str) -> dict[str, list[dict[str, Any]]]:
    """Route -> its points (x: output tokens/s, y: the latency, load key, mode, saturated), closed
    loop by concurrency, then open loop by rate; the sequential baseline is left out."""
    by_route: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for c in cells:
        sec = c.get("serving") or {}
        load = sec.get("load") or {}
        x, y = _figure(c, "output_tokens_per_s"), _figure(c, latency)
        if load.get("mode") not in ("closed", "open") or x is None or y is None:
            continue
        by_route[str((c.get("route") or {}).get("label"))].append(
            {
                "x": x,
                "y": y,
                "key": str(load.get("key")),
                "mode": load.get("mode"),
                "order": (load.get("mode") != "closed", load.get("concurrency") or load.get("rate_per_s") or 0),
                "saturated": bool((sec.get("saturation") or {}).get("saturated")),
            }
        )
    return {r: sorted(p, key=lambda q: q["order"]) for r, p in by_route.items()}


def xy_chart(points: Mapping[str, Sequence[Mapping[str, Any]]], y_title: str, title: str) -> str:
    """One SVG: x output tokens/s, y the latency; a polyline and labelled markers per route."""
    xs = [p["x"] for ps in points.values() for p in ps]
    ys = [p["y"] for ps in points.values() for p in ps]
    if not xs:
        return ""
    x_ticks, y_ticks = nice_ticks(0.0, max(xs)), nice_ticks(0.0, max(ys))
    x_hi, y_hi = max(x_ticks[-1], max(xs)) or 1.0, max(y_ticks[-1], max(ys)) or 1.0
    pw, ph = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def px(x: float) -> float:
        return LEFT + pw * x / x_hi

    def py(y: float) -> float:
        return TOP + ph * (1.0 - y / y_hi)

    out = [
        f'<svg class="serving" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        f'aria-label="{escape(title)}">',
        f'<text x="{LEFT}" y="11" font-size="11">{escape(title)}</text>',
    ]
    for t in x_ticks:
        out.append(
            f'<line x1="{px(t):.1f}" y1="{TOP}" x2="{px(t):.1f}" y2="{TOP + ph}" stroke="#eee"/>'
            f'<text x="{px(t):.1f}" y="{TOP + ph + 14}" font-size="10" text-anchor="middle">{tick_label(t)}</text>'
        )
    for t in y_ticks:
        out.append(
            f'<line x1="{LEFT}" y1="{py(t):.1f}" x2="{LEFT + pw}" y2="{py(t):.1f}" stroke="#eee"/>'
            f'<text x="{LEFT - 4}" y="{py(t) + 3:.1f}" font-size="10" text-anchor="end">{tick_label(t)}</text>'
        )
    out.append(
        f'<text x="{LEFT + pw / 2:.1f}" y="{HEIGHT - 6}" font-size="10" text-anchor="middle">output tokens/s</text>'
        f'<text x="12" y="{TOP + ph / 2:.1f}" font-size="10" text-anchor="middle" '
        f'transform="rotate(-90 12 {TOP + ph / 2:.1f})">{escape(y_title)}</text>'
    )
    for i, (route, ps) in enumerate(points.items()):
        colour = COLOURS[i % len(COLOURS)]
        closed = [p for p in ps if p["mode"] == "closed"]
        if len(closed) > 1:
            path = " ".join(f"{px(p['x']):.1f},{py(p['y']):.1f}" for p in closed)
            out.append(f'<polyline class="route" points="{path}" fill="none" stroke="{colour}" stroke-width="1.5"/>')
        for p in ps:
            fill = "white" if p["saturated"] else colour
            tip = f"{route} {p['key']}: {tick_label(p['x'])} tok/s, {tick_label(p['y'])} ms" + (
                " (saturated)" if p["saturated"] else ""
            )
            shape = (
                f'<circle cx="{px(p["x"]):.1f}" cy="{py(p["y"]):.1f}" r="3.5"'
                if p["mode"] == "closed"
                else f'<rect x="{px(p["x"]) - 3.5:.1f}" y="{py(p["y"]) - 3.5:.1f}" width="7" height="7"'
            )
            out.append(
                f'{shape} class="point" fill="{fill}" stroke="{colour}"><title>{escape(tip)}</title>'
                f"{'</circle>' if p['mode'] == 'closed' else '</rect>'}"
                f'<text x="{px(p["x"]) + 5:.1f}" y="{py(p["y"]) - 5:.1f}" font-size="9">{escape(p["key"])}</text>'
            )
        out.append(
            f'<text x="{LEFT + pw + 8}" y="{TOP + 12 + 14 * i}" font-size="10" fill="{colour}">{escape(route)}</text>'
        )
    out.append("</svg>")
    return "".join(out)


def occupancy_chart(cell: Mapping[str, Any]) -> str:
    """The batch occupancy over time of a cell's first invocation: requests that got a token in each
    engine step (bars) and requests waiting for a slot after it (line), against seconds from the
    load point's start."""
    sec = cell.get("serving") or {}
    invocations = sec.get("invocations") or []
    steps = invocations[0].get("steps") if invocations else None
    if not steps:
        return ""
    end = max(float(s[1]) for s in steps) or 1.0
    top = max(max(int(s[2]) for s in steps), max(int(s[3]) for s in steps), 1)
    w, h, left, bottom = 260, 110, 30, 22
    pw, ph = w - left - 6, h - bottom - 14

    def px(t: float) -> float:
        return left + pw * t / end

    def py(v: float) -> float:
        return 14 + ph * (1.0 - v / top)

    bars = "".join(
        f'<rect x="{px(float(a)):.1f}" y="{py(int(b)):.1f}" width="{max(px(float(e)) - px(float(a)), 0.5):.1f}" '
        f'height="{py(0) - py(int(b)):.1f}" fill="#9ecae1"/>'
        for a, e, b, _ in steps
    )
    wait = " ".join(f"{px(float(e)):.1f},{py(int(q)):.1f}" for _, e, _, q in steps)
    load = sec.get("load") or {}
    title = f"{(cell.get('route') or {}).get('label')} {load.get('key')}: batch (bars), waiting (line), invocation 1"
    return (
        f'<svg class="occupancy" width="{w}" height="{h}" viewBox="0 0 {w} {h}" role="img" aria-label="{escape(title)}">'
        f'<text x="{left}" y="10" font-size="9">{escape(title)}</text>{bars}'
        f'<polyline points="{wait}" fill="none" stroke="#d62728" stroke-width="1"/>'
        f'<text x="{left - 3}" y="{py(top) + 3:.1f}" font-size="9" text-anchor="end">{top}</text>'
        f'<text x="{left - 3}" y="{py(0) + 3:.1f}" font-size="9" text-anchor="end">0</text>'
        f'<text x="{left + pw:.1f}" y="{h - 8}" font-size="9" text-anchor="end">{tick_label(end)} s</text></svg>'
    )


def section_id(bundle: str, testbed: str) -> str:
    """The anchor of a bundle and testbed's card on the serving page (the overview links to it)."""
    from winml_perf.publish.dashboard_page import slug

    return f"serving-{slug(testbed)}-{slug(bundle)}"


def serving_page(
    run: Mapping[str, Any],
    title: str = "serving",
    captions: Mapping[tuple[str, str], str] | None = None,
    nav: str = "",
) -> tuple[str, int]:
    """(the page of a serving run record's curves, how many charts); 0 charts: no serving cell.
    ``captions``: a line under each (bundle, testbed) card's heading (which run it draws);
    ``nav``: HTML above the cards (the store-wide dashboard's link back to its overview)."""
    cells = [c for c in run.get("cells") or [] if c.get("serving")]
    groups: dict[tuple[str, str], list[Mapping[str, Any]]] = defaultdict(list)
    for c in cells:
        testbed = str((c.get("environment") or {}).get("testbed_id") or "?")
        groups[(str(c.get("bundle")), testbed)].append(c)
    body, charts = [nav], 0
    for (bundle, testbed), group in sorted(groups.items()):
        svgs = [xy_chart(_points(group, name), label, f"{bundle} on {testbed}") for name, label in LATENCIES]
        svgs = [s for s in svgs if s]
        charts += len(svgs)
        occupancy = "".join(o for o in (occupancy_chart(c) for c in group) if o)
        caption = (captions or {}).get((bundle, testbed))
        body.append(
            f'<section class="card" id="{section_id(bundle, testbed)}"><h2>{escape(bundle)} · testbed {escape(testbed)}</h2>'
            + (f'<p class="sub">{escape(caption)}</p>' if caption else "")
            + f"{''.join(svgs)}<h3>batch occupancy over time</h3>{occupancy}</section>"
        )
    status = {"charts": charts, "records": len(cells), "state": "ok" if charts else "empty"}
    return render_page(title, title, "".join(body), status), charts
