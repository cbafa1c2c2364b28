"""The static dashboard: self-contained HTML pages (inline CSS, inline SVG drawn by
results/dashboard_svg.py, a few lines of inline JS for the filters; no network) written to ``<out>/``.

- ``index.html``: one row per series (testbed x bundle x route x shape x options, ``series_key``) with
  a sparkline of its primary metric, the newest value and its 95 % interval, and its newest change
  point (size of the shift and its interval); a testbed and a route filter.
- ``pages/<testbed>/<bundle>.html``: the full history of each series of that testbed and bundle: a
  card per metric with the series of the sweep (routes x shapes) as small multiples, the interval as
  a band, the change points of the primary metric marked and listed; a route filter. The primary
  metric's card has a marker per record (hover: date, commit, version, testbed); the other cards
  draw the line and band only, which keeps a page of a year of nightlies to a few MB.

Change points: E-Divisive means (results/changepoint.py) over the per-record medians of the
primary metric of each series (decode tok/s for generation, e2e for one-token runs, latency for
plain ONNX), over its newest ``CHANGE_WINDOW`` ok records.

Each page reports what it drew in ``#winml-status`` (data-points: markers of the primary card,
data-records, data-charts, data-errors, data-state) so a headless browser test can check it.
Memory stays bounded by one page: the index needs one query per series and keeps only summaries.
"""

from __future__ import annotations

import re
from collections import defaultdict
from datetime import datetime, timezone
from html import escape
from importlib import resources
from pathlib import Path
from typing import Any, Mapping, Sequence

from winml_perf.errors import UsageError
from winml_perf.model.metrics import METRICS, bigger_is_better, get, primary_metric
from winml_perf.results import dashboard_svg as svg
from winml_perf.results.changepoint import DEFAULT_MIN_SIZE, detect_change_points
from winml_perf.results.compare import shape_label
from winml_perf.results.store import Store

#: Newest ok records of a series searched for change points (four months of nightlies; the
#: detector's cost grows with the square of the records it searches).
CHANGE_WINDOW = 120
#: Newest values drawn in an index sparkline.
SPARK_POINTS = 60
#: Metrics drawn on a testbed/bundle page, in table order.
HISTORY_METRICS = tuple(m.name for m in METRICS if m.drawn)


def slug(text: Any) -> str:
    """A file-name-safe form of a testbed or bundle name."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", str(text if text is not None else "none")).strip("._") or "none"


def page_path(testbed: Any, bundle: Any) -> str:
    return f"pages/{slug(testbed)}/{slug(bundle)}.html"


def series_primary(row: Mapping[str, Any]) -> str:
    return primary_metric(row.get("runtime") == "winml-genai", row.get("max_new_tokens"))


def change_points(points: Sequence[Mapping[str, Any]], metric: str) -> list[dict]:
    """Change points of ``metric`` over the newest CHANGE_WINDOW ok points, indexed into ``points``."""
    where = [i for i, p in enumerate(points) if p["status"] == "ok" and metric in p["values"]][-CHANGE_WINDOW:]
    if len(where) < 2 * DEFAULT_MIN_SIZE:
        return []
    values = [points[i]["values"][metric][0] for i in where]
    found = detect_change_points(values, [points[i]["run_id"] for i in where], higher_is_better=bigger_is_better(metric))
    return [{**cp.to_dict(), "index": where[cp.index], "t": points[where[cp.index]]["created_utc"],
             "commit": points[where[cp.index]]["git_commit"]} for cp in found]


def _chart_points(points: Sequence[Mapping[str, Any]], metric: str) -> list[dict]:
    out = []
    for p in points:
        v = p["values"].get(metric)
        if p["status"] != "ok" or v is not None:
            out.append({"t": p["created_utc"], "v": v[0] if v else None, "lo": v[1] if v else None, "hi": v[2] if v else None,
                        "commit": p["git_commit"], "version": p["version"], "testbed": p["testbed_id"], "run": p["run_id"]})
    return out


def _cp_text(cp: Mapping[str, Any]) -> str:
    return f"{cp['t'][:10]}: {cp['shift']:+.1%} [{cp['shift_low']:+.1%}, {cp['shift_high']:+.1%}] {cp['direction']}"


def _series_label(row: Mapping[str, Any]) -> str:
    return f"{row['route']} · {shape_label(row['prompt_tokens'], row['max_new_tokens'])}"


def _card(metric: str, series: Sequence[tuple[dict, list[dict], list[dict]]], primary: bool) -> tuple[str, int]:
    """One metric's card: a small multiple per series; (html, charts drawn)."""
    m = get(metric)
    parts, listed, charts = [], [], 0
    for row, points, cps in series:
        pts = _chart_points(points, metric)
        if not any(p["v"] is not None for p in pts):
            continue
        marked = cps if primary and metric == series_primary(row) else []
        mine = [{**cp, "index": next(i for i, p in enumerate(pts) if p["t"] == cp["t"])} for cp in marked]
        label = _series_label(row)
        parts.append(f'<div class="mult" data-route="{escape(str(row["route"]))}" id="s-{row["series_key"]}"><h4>{escape(label)}</h4>'
                     + svg.chart(pts, title=f"{m.label} {label}", unit=m.unit, change_points=mine, markers=primary) + "</div>")
        listed += [f'<li class="{cp["direction"].replace(" ", "-")}" data-route="{escape(str(row["route"]))}">{escape(label)} · '
                   f'{escape(_cp_text(cp))} (commit {escape(str(cp["commit"] or "?"))})</li>' for cp in mine]
        charts += 1
    if not charts:
        return "", 0
    cp_list = ""
    if primary:
        cp_list = "<h4>change points</h4>" + (f'<ul class="cps">{"".join(listed)}</ul>' if listed else '<p class="empty">none</p>')
    return (f'<section class="card"{" data-primary" if primary else ""} data-metric="{metric}"><h3>{escape(m.label)}'
            f' <span class="sub">({escape(m.unit)}, {"higher" if m.bigger_is_better else "lower"} is better; median per record,'
            f' band: 95% CI)</span></h3><div class="mults">{"".join(parts)}</div>{cp_list}</section>'), charts


def _page(store: Store, testbed: Any, bundle: Any, rows: Sequence[dict], filters: Mapping[str, Any]) -> tuple[str, list[dict], int, int]:
    """(html body, one summary per series for the index, records on the page, charts drawn)."""
    rows = sorted(rows, key=lambda r: (str(r["route"]), r["prompt_tokens"] or 0, r["max_new_tokens"] or 0, r["series_key"]))
    series, summaries = [], []
    for row in rows:
        points = store.series_points(row["series_key"], HISTORY_METRICS, **filters)
        metric = series_primary(row)
        cps = change_points(points, metric)
        series.append((row, points, cps))
        ok = [p for p in points if p["status"] == "ok" and metric in p["values"]]
        summaries.append({"row": row, "metric": metric, "spark": [p["values"][metric][0] for p in ok[-SPARK_POINTS:]],
                          "latest": ok[-1] if ok else None, "cp": cps[-1] if cps else None, "records": len(points)})
    primaries = {series_primary(r) for r in rows}
    cards, charts = [], 0
    for metric in HISTORY_METRICS:
        html, n = _card(metric, series, metric in primaries)
        cards.append(html)
        charts += n
    routes = sorted({str(r["route"]) for r in rows})
    body = (f'<p class="nav"><a href="../../index.html">← all series</a></p><h2>{escape(str(bundle))} on {escape(str(testbed))}</h2>'
            + _filter("route", routes) + "".join(c for c in cards if c))
    return body, summaries, sum(s["records"] for s in summaries), charts


def _filter(name: str, values: Sequence[str]) -> str:
    opts = "".join(f'<option value="{escape(v)}">{escape(v)}</option>' for v in values)
    return f'<label class="filter">{name} <select data-filter="{name}"><option value="">all</option>{opts}</select></label>'


def _index_row(s: Mapping[str, Any]) -> str:
    row, m = s["row"], get(s["metric"])
    latest = s["latest"]
    value = ""
    if latest is not None:
        med, lo, hi = latest["values"][s["metric"]]
        ci = f" [{lo:.4g}, {hi:.4g}]" if lo is not None and hi is not None else ""
        value = f"{med:.4g}{ci} <span class='sub'>{escape(latest['created_utc'][:10])}</span>"
    cp = s["cp"]
    cp_html = (f'<span class="{cp["direction"].replace(" ", "-")}">{escape(_cp_text(cp))}</span>' if cp else '<span class="sub">none</span>')
    link = f'{page_path(row["testbed_id"], row["bundle"])}#s-{row["series_key"]}'
    return (f'<tr data-testbed="{escape(str(row["testbed_id"]))}" data-route="{escape(str(row["route"]))}">'
            f'<td>{escape(str(row["testbed_id"]))}</td><td><a href="{escape(link)}">{escape(str(row["bundle"]))}</a></td>'
            f'<td>{escape(str(row["route"]))}</td><td>{escape(shape_label(row["prompt_tokens"], row["max_new_tokens"]))}</td>'
            f'<td>{escape(m.label)}</td><td>{svg.sparkline(s["spark"])}</td><td class="num">{value}</td><td>{cp_html}</td>'
            f'<td class="num">{s["records"]}</td></tr>')


def _asset(name: str) -> str:
    return resources.files("winml_perf.results").joinpath("assets", name).read_text(encoding="utf-8")


def render_page(title: str, heading: str, body: str, status: Mapping[str, Any]) -> str:
    attrs = " ".join(f'data-{k}="{escape(str(v))}"' for k, v in status.items())
    return _asset("dashboard.html").format(title=escape(title), heading=escape(heading), css=_asset("dashboard.css"), body=body,
                                           status=attrs, js=_asset("dashboard.js"))


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name("." + path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


def write_dashboard(store: Store, out_dir: Path, *, title: str = "winml-perf results", **filters: Any) -> Path:
    """Write ``out_dir/index.html`` and a page per testbed x bundle; returns the index's path."""
    out_dir = Path(out_dir)
    generated = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for row in store.series_list(**filters):
        groups[(row["testbed_id"], row["bundle"])].append(row)
    summaries: list[dict] = []
    total = 0
    try:
        for (testbed, bundle), rows in sorted(groups.items(), key=lambda kv: tuple(map(str, kv[0]))):
            body, sums, records, charts = _page(store, testbed, bundle, rows, filters)
            summaries += sums
            total += records
            _write(out_dir / page_path(testbed, bundle), render_page(f"{title}: {bundle} on {testbed}", title, body,
                                                                     {"page": "detail", "records": records, "charts": charts}))
        rows_html = "".join(_index_row(s) for s in summaries)
        testbeds = sorted({str(s["row"]["testbed_id"]) for s in summaries})
        routes = sorted({str(s["row"]["route"]) for s in summaries})
        table = ('<table class="index"><thead><tr><th>testbed</th><th>bundle</th><th>route</th><th>shape</th><th>metric</th>'
                 '<th>history</th><th>latest [95% CI]</th><th>newest change point</th><th>records</th></tr></thead>'
                 f'<tbody>{rows_html}</tbody></table>') if summaries else '<p class="empty">the store holds no records</p>'
        body = (f'<p class="sub">{len(summaries)} series, {total} records from {escape(store.display)}; generated {generated}.'
                f' Change points: E-Divisive means over the newest {CHANGE_WINDOW} records of each series.</p>'
                + _filter("testbed", testbeds) + _filter("route", routes) + table)
        index = out_dir / "index.html"
        _write(index, render_page(title, title, body, {"page": "index", "records": total, "series": len(summaries)}))
    except OSError as exc:
        raise UsageError(f"-o {out_dir}: cannot write the dashboard ({exc})", "pass -o with a writable folder") from None
    return index
