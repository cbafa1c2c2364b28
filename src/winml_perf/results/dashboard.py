"""The static dashboard: one self-contained HTML file (inline CSS, inline JS drawing SVG, data as
inline JSON; no CDN, no network) written to ``<out>/index.html``.

- History: per bundle x route x testbed x shape, each metric's median over time with its 95 % CI
  as a whisker; every record is one point (a failed cell is a cross on the axis). A point is
  flagged as a regression (or an improvement) when it differs from a *rolling baseline* — the
  pooled samples of the previous ``window`` ok records of its series — by the same test as
  ``winml compare runs``: Mann-Whitney p < 0.05 and a change beyond ``threshold_pct``.
- Routes: for the latest interleaved run of each bundle x testbed, bars of every route's speedup
  over the config route with bootstrap CI whiskers (``winml compare routes``).

The page reports what it drew in ``#winml-status`` (data-points, data-records, data-errors) so a
headless browser test can check it without a screenshot.
"""

from __future__ import annotations

import json
from collections import defaultdict
from datetime import datetime, timezone
from importlib import resources
from pathlib import Path
from typing import Any, Mapping, Sequence

from winml_perf.errors import UsageError
from winml_perf.results import significance as sig
from winml_perf.model.metrics import METRICS, bigger_is_better
from winml_perf.results.compare import compare_routes, shape_label
from winml_perf.results.store import Store

#: Previous ok records pooled into the rolling baseline of a point.
DEFAULT_WINDOW = 5
#: A significant change beyond this (percent) is flagged.
DEFAULT_THRESHOLD_PCT = 5.0
#: Metrics offered in the page's selector, in table order.
HISTORY_METRICS = tuple(m.name for m in METRICS if m.drawn)
#: Those flagged against a rolling baseline: the ones with per-iteration samples in the store.
FLAGGED_METRICS = tuple(m.name for m in METRICS if m.drawn and m.stored)
SERIES_FIELDS = ("bundle", "route", "testbed_id", "prompt_tokens", "max_new_tokens")


def _series_label(key: Sequence[Any]) -> str:
    bundle, route, testbed, p, n = key
    return f"{bundle} · {route} · {shape_label(p, n)} · {testbed}"


def rolling_flags(points: Sequence[Mapping[str, Any]], samples: Mapping[int, Sequence[Mapping[str, Any]]], metric: str,
                  window: int = DEFAULT_WINDOW, threshold_pct: float = DEFAULT_THRESHOLD_PCT) -> dict[int, dict]:
    """record id -> {flag: 'regression'|'improvement', delta_pct, p_value, baseline_n} for the ok
    points of one series (oldest first) that differ from their rolling baseline."""
    import numpy as np

    out: dict[int, dict] = {}
    history: list[list[float]] = []
    up = bigger_is_better(metric)
    for point in points:
        if point["status"] != "ok":
            continue
        values = [s[metric] for s in samples.get(point["id"], ()) if s.get(metric) is not None]
        if not values:
            continue
        base = [v for h in history[-window:] for v in h]
        if base:
            d = sig.delta_pct(float(np.median(base)), float(np.median(values)))
            p = sig.mann_whitney_u(values, base).p_value
            flag = None
            if sig.is_regression(d, p, up, threshold_pct):
                flag = "regression"
            elif sig.is_regression(-d, p, up, threshold_pct):
                flag = "improvement"
            if flag:
                out[point["id"]] = {"flag": flag, "delta_pct": round(d, 3), "p_value": p, "baseline_n": len(base)}
        history.append(values)
    return out


def _value(m: Mapping[str, Any] | None) -> list | None:
    if not m or m.get("median") is None:
        return None
    return [m["median"], m.get("ci95_low"), m.get("ci95_high")]


def history_series(records: Sequence[dict], metrics: Sequence[dict], samples: Mapping[int, list],
                   window: int, threshold_pct: float) -> list[dict]:
    """One entry per series: its points (oldest first) with every metric's [median, low, high] and flags."""
    by_record: dict[int, dict[str, dict]] = defaultdict(dict)
    for m in metrics:
        by_record[m["record_id"]][m["name"]] = m
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in records:
        groups[tuple(r[f] for f in SERIES_FIELDS)].append(r)
    series = []
    for key in sorted(groups, key=lambda k: tuple("" if v is None else str(v).zfill(12) for v in k)):
        rows = groups[key]
        flags = {m: rolling_flags(rows, samples, m, window, threshold_pct) for m in FLAGGED_METRICS}
        points = []
        for r in rows:
            ms = by_record.get(r["id"], {})
            values = {name: _value(ms.get(name)) for name in HISTORY_METRICS if _value(ms.get(name))}
            point_flags = {m: f[r["id"]] for m, f in flags.items() if r["id"] in f}
            points.append({"id": r["id"], "t": r["created_utc"], "run": r["run_id"], "commit": r["git_commit"],
                           "version": r["winml_perf_version"], "status": r["status"], "v": values, "flags": point_flags})
        series.append({"key": dict(zip(SERIES_FIELDS, key)), "label": _series_label(key), "runtime": rows[0]["runtime"],
                       "points": points})
    return series


def route_panels(store: Store, records: Sequence[dict], filters: Mapping[str, Any]) -> list[dict]:
    """Bars of route speedups over config for the latest multi-route run of each bundle x testbed."""
    latest: dict[tuple, str] = {}
    routes_by_run: dict[str, set] = defaultdict(set)
    for r in records:
        if r["status"] == "ok" and r["run_id"]:
            routes_by_run[r["run_id"]].add(r["route"])
    for r in sorted(records, key=lambda r: r["created_utc"]):
        routes = routes_by_run.get(r["run_id"], set())
        if "config" in routes and len(routes) > 1:
            latest[(r["bundle"], r["testbed_id"])] = r["run_id"]
    panels = []
    for (bundle, testbed), run_id in sorted(latest.items(), key=lambda kv: tuple(map(str, kv[0]))):
        narrowed = {k: v for k, v in filters.items() if k in ("route", "prompt_tokens", "max_new_tokens")}
        report = compare_routes(store, run_id, bundle=bundle, testbed=testbed, **narrowed)
        groups: dict[tuple, list] = defaultdict(list)
        for c in report.rows:
            groups[(c.prompt_tokens, c.max_new_tokens, c.metric)].append(c)
        for (p, n, metric), rows in sorted(groups.items(), key=lambda kv: (str(kv[0][0]).zfill(9), str(kv[0][1]).zfill(9), kv[0][2])):
            bars = [{"route": "config", "speedup": 1.0, "lo": None, "hi": None, "verdict": "baseline"}]
            bars += [{"route": c.route, "speedup": c.speedup, "lo": c.ci_low, "hi": c.ci_high, "verdict": c.verdict,
                      "sentence": c.sentence()} for c in rows]
            panels.append({"run": run_id, "bundle": bundle, "testbed": testbed, "shape": shape_label(p, n), "metric": metric,
                           "bars": bars})
    return panels


def dashboard_data(store: Store, *, window: int = DEFAULT_WINDOW, threshold_pct: float = DEFAULT_THRESHOLD_PCT,
                   title: str = "winml-perf results", **filters: Any) -> dict:
    """Everything the page draws, as JSON-able data."""
    if window < 1:
        raise UsageError(f"--window must be >= 1, got {window}")
    records = store.records(**filters)
    ids = [r["id"] for r in records]
    samples: dict[int, list] = defaultdict(list)
    for s in store.samples(ids):
        samples[s["record_id"]].append(s)
    metrics = store.metrics(ids)
    series = history_series(records, metrics, samples, window, threshold_pct)
    present = {name for s in series for p in s["points"] for name in p["v"]}
    return {
        "title": title,
        "generated_utc": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "store": store.display,
        "records": len(records),
        "window": window,
        "threshold_pct": threshold_pct,
        "metrics": [{"name": m.name, "unit": m.unit, "label": m.label, "bigger_is_better": m.bigger_is_better}
                    for m in METRICS if m.drawn and m.name in present],
        "series": series,
        "routes": route_panels(store, records, filters),
    }


def _asset(name: str) -> str:
    return resources.files("winml_perf.results").joinpath("assets", name).read_text(encoding="utf-8")


def _json_for_script(data: Mapping[str, Any]) -> str:
    """JSON safe inside <script>: no '</' (ends the element) and no '<!--'."""
    text = json.dumps(data, allow_nan=False, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def render_html(data: Mapping[str, Any]) -> str:
    from html import escape

    return _asset("dashboard.html").format(
        title=escape(str(data["title"])),
        css=_asset("dashboard.css"),
        data=_json_for_script(data),
        js=_asset("dashboard.js"),
    )


def write_dashboard(store: Store, out_dir: Path, **options: Any) -> Path:
    """Write ``out_dir/index.html``; returns its path."""
    data = dashboard_data(store, **options)
    out_dir = Path(out_dir)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        path = out_dir / "index.html"
        tmp = out_dir / ".index.html.tmp"
        tmp.write_text(render_html(data), encoding="utf-8")
        tmp.replace(path)
    except OSError as exc:
        raise UsageError(f"-o {out_dir}: cannot write the dashboard ({exc})", "pass -o with a writable folder") from None
    return path
