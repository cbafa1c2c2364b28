"""One testbed/bundle page of the dashboard (``pages/<testbed>/<bundle>.html``): read each series of
the page, find (or look up) its change points, draw a card per metric with the series as small
multiples, write the file, and hand back a summary per series for the index.

A page is a job (``PageJob`` -> ``PageResult``) so the dashboard can write pages in worker
processes (``render_job``, one store connection per process); change points computed here come
back in the result and the parent keeps them in the store (results/change_point_cache.py).
"""

from __future__ import annotations

import atexit
import gc
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from html import escape
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from winml_perf.compare.text import shape_label
from winml_perf.model.equivalence_view import view_of_row
from winml_perf.model.metrics import METRICS, bigger_is_better, get, primary_metric
from winml_perf.publish import dashboard_svg as svg
from winml_perf.publish.route_ratio import PairedRatio, paired_ratios
from winml_perf.results import change_point_cache as cpc
from winml_perf.results.series import SeriesColumns, page_columns
from winml_perf.results.store import Store, open_store
from winml_perf.stats.series.changepoint import DEFAULT_MIN_SIZE, MODE_SHARE, shift_text
from winml_perf.support.safe_write import write_text

#: Newest ok records of a series searched for change points (four months of nightlies; the
#: detector's cost grows with the square of the records it searches).
CHANGE_WINDOW = 120
#: Newest values drawn in an index sparkline.
SPARK_POINTS = 60
#: A change point among a series' newest this many records gives it that status on the overview.
RECENT_RECORDS = 10
#: Width in px of a card's row of charts on a 1400 px screen (page and card margins taken off), and
#: the most charts side by side: a card's charts share the row, so a page with one or two series
#: fills the screen too; on a narrower screen the charts scale down (CSS).
ROW_PX, ROW_GAP_PX, MAX_PER_ROW = 1330, 16, 3
#: Metrics drawn on a testbed/bundle page, in table order.
HISTORY_METRICS = tuple(m.name for m in METRICS if m.drawn)


def slug(text: Any) -> str:
    """A file-name-safe form of a testbed or bundle name."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", str(text if text is not None else "none")).strip("._") or "none"


def page_path(testbed: Any, bundle: Any) -> str:
    return f"pages/{slug(testbed)}/{slug(bundle)}.html"


def series_primary(row: Mapping[str, Any]) -> str:
    return primary_metric(row.get("runtime") == "winml-genai", row.get("max_new_tokens"))


def cp_text(cp: Mapping[str, Any]) -> str:
    text = f"{cp['t'][:10]}: {shift_text(cp)} {cp['direction']}"
    if cp.get("kind") == MODE_SHARE:  # the runs' lower mode got more (or less) frequent
        text += f" (lower mode in {cp['share_before']:.0%} → {cp['share_after']:.0%} of invocations)"
    return text


def equivalence_badge(row: Mapping[str, Any]) -> str:
    """The series' newest equivalence verdict beside its label ('NOT equivalent' marked, 'not checked')."""
    view = view_of_row(row)
    against = f" against {view.reference}" if view.reference else ""
    run = row.get("equivalence_run_id")
    where = f" run {str(run)[:8]}" if view.checked and run else ""  # the run it was judged in, not the series'
    figures = f" ({view.figures_text()})" if view.checked and view.figures_text() else ""
    accuracy = view.perplexity_text() if view.checked else None  # accuracy beside speed (issue 34)
    shown = f", {accuracy}" if accuracy else ""
    return (
        f'<span class="equivalence {view.verdict.replace(" ", "-")}" title="equivalence{escape(against + figures)}">'
        f"{escape(view.label())}{escape(where)}{escape(shown)}</span>"
    )


#: Hex digits of a bundle content digest the dashboard shows.
DIGEST_DIGITS = 6


def model_changes(cols: SeriesColumns) -> list[dict[str, Any]]:
    """Where the series' bundle content (``bundle_id``) changes from one record to the next with a
    known digest (issue 35: a model change is an event on its series, as asv marks commits): each
    with 'index' into the records, 't', 'commit', 'from' and 'to' (short digests)."""
    out: list[dict[str, Any]] = []
    last = None
    for i, digest in enumerate(cols.bundle_ids):
        if not digest:
            continue
        if last is not None and digest != last:
            out.append(
                {
                    "index": i,
                    "t": cols.created_utc[i],
                    "commit": cols.git_commits[i],
                    "from": str(last)[:DIGEST_DIGITS],
                    "to": str(digest)[:DIGEST_DIGITS],
                }
            )
        last = digest
    return out


def model_change_text(mc: Mapping[str, Any]) -> str:
    return f"{mc['t'][:10]}: model changed {mc['from']} → {mc['to']}"


def series_label(row: Mapping[str, Any]) -> str:
    return f"{row['route']} · {shape_label(row['prompt_tokens'], row['max_new_tokens'])}"


@dataclass(frozen=True)
class PageJob:
    """What a page needs: where the store is (``store_ref``, for a worker process), where to write,
    the page's testbed, bundle and series rows (results/series.series_list), the filters."""

    store_ref: str
    out_dir: str
    title: str
    testbed: Any
    bundle: Any
    rows: tuple[dict[str, Any], ...]
    filters: Mapping[str, Any] = field(default_factory=dict)


@dataclass
class PageResult:
    summaries: list[dict[str, Any]]  # one per series, for the index row
    records: int
    charts: int
    computed: list[tuple[cpc.Search, list[dict[str, Any]]]]  # change points found now (to keep in the store)
    ratios: dict[str, PairedRatio] = field(default_factory=dict)  # the overview's "vs config" of this page's series


@dataclass
class _Series:
    """One series of a page: its columns, time axis, hover texts and primary change points."""

    row: dict[str, Any]
    cols: SeriesColumns
    frame: svg.Frame
    labels: svg.Labels  # what each record's hover title names
    change_points: list[dict[str, Any]]  # of the primary metric, each with 'index' into the records
    model_changes: list[dict[str, Any]] = field(default_factory=list)  # model_changes(cols)


def change_points(
    series_key: str, cols: SeriesColumns, metric: str, kept: Mapping[tuple[str, str], tuple[str, str]]
) -> tuple[list[dict[str, Any]], cpc.Search | None, list[dict[str, Any]] | None]:
    """Change points of ``metric`` over the newest CHANGE_WINDOW ok records, indexed into the
    records; from ``kept`` (change_point_cache.kept) when its row is current, else found now.
    Returns (change points, the search and its raw result when found now, else None twice)."""
    search, where = cpc.search_of(
        series_key, metric, cols, CHANGE_WINDOW, {"higher_is_better": bigger_is_better(metric)}
    )
    if len(where) < 2 * DEFAULT_MIN_SIZE:
        return [], None, None
    fresh = None
    raw = cpc.current(search, kept.get((series_key, metric)))
    if raw is None:
        raw = fresh = search.detect()
    cps = [
        {
            **cp,
            "index": where[cp["index"]],
            "t": cols.created_utc[where[cp["index"]]],
            "commit": cols.git_commits[where[cp["index"]]],
        }
        for cp in raw
    ]
    return cps, (search if fresh is not None else None), fresh


def _read_page(store: Store, rows: Sequence[Mapping[str, Any]], filters: Mapping[str, Any]) -> dict[str, SeriesColumns]:
    """The columns of a page's series, read together: series_key -> SeriesColumns."""
    by_primary: dict[str, list[str]] = {}
    for row in rows:
        by_primary.setdefault(series_primary(row), []).append(row["series_key"])
    out: dict[str, SeriesColumns] = {}
    for metric, keys in by_primary.items():  # one read per primary metric (a page holds one, as a rule)
        out.update(
            page_columns(store, keys, HISTORY_METRICS, invocations_of=(metric,), window=CHANGE_WINDOW, **filters)
        )
    return out


def _read_series(
    row: dict[str, Any], cols: SeriesColumns, kept: Mapping[tuple[str, str], tuple[str, str]]
) -> tuple[_Series, tuple[cpc.Search, list[dict[str, Any]]] | None]:
    cps, search, fresh = change_points(row["series_key"], cols, series_primary(row), kept)
    frame = svg.Frame.of(svg.unix_seconds(cols.created_utc), cols.git_commits)
    labels = svg.Labels.of(cols.created_utc, cols.git_commits, cols.versions, row["testbed_id"], cols.run_ids)
    return _Series(row, cols, frame, labels, cps, model_changes(cols)), (
        (search, fresh) if search is not None and fresh is not None else None  # change_points gives both or neither
    )


def _summary(s: _Series) -> dict[str, Any]:
    metric = series_primary(s.row)
    med, low, high = s.cols.values[metric]
    ok = np.flatnonzero(s.cols.ok & ~np.isnan(med))
    latest = None
    if len(ok):
        i = int(ok[-1])
        latest = {
            "created_utc": s.cols.created_utc[i],
            "value": tuple(None if x != x else x for x in (float(med[i]), float(low[i]), float(high[i]))),
        }
    return {
        "row": s.row,
        "metric": metric,
        "spark": med[ok[-SPARK_POINTS:]].tolist(),
        "latest": latest,
        "cp": s.change_points[-1] if s.change_points else None,
        "records": len(s.cols),
        "status": _status(s),
    }


def _status(s: _Series) -> str:
    """'failed' when the newest record failed; a change point's direction when one starts among the
    newest RECENT_RECORDS records; else 'ok'."""
    if len(s.cols) and not bool(s.cols.ok[-1]):
        return "failed"
    cp = s.change_points[-1] if s.change_points else None
    if cp is not None and cp["index"] >= len(s.cols) - RECENT_RECORDS:
        return str(cp["direction"])
    return "ok"


def _has(s: _Series, metric: str) -> bool:
    """Whether an ok record of the series has a value of ``metric``."""
    return bool((~np.isnan(s.cols.values[metric][0]) & s.cols.ok).any())


def chart_width(charts: int) -> int:
    """The width of each chart of a card with ``charts`` charts, so that a row of them fills ROW_PX."""
    per_row = max(1, min(charts, MAX_PER_ROW))
    return (ROW_PX - ROW_GAP_PX * (per_row - 1)) // per_row


def _chart(s: _Series, metric: str, unit: str, title: str, marked: bool, width: int) -> str | None:
    """The chart of ``metric`` of one series: ok records with a value, and failed records (crosses)."""
    v, lo, hi = s.cols.values[metric]
    drawn = ~s.cols.ok | ~np.isnan(v)
    if not _has(s, metric):
        return None
    cps = s.change_points if marked else []
    models = s.model_changes
    if drawn.all():
        frame, labels = s.frame, s.labels
    else:  # records without this metric are left out, as if they were not there
        idx = np.flatnonzero(drawn)
        position = {int(i): k for k, i in enumerate(idx)}
        frame, labels = s.frame.subset(idx), s.labels.subset(idx)
        v, lo, hi = v[idx], lo[idx], hi[idx]
        cps = [{**cp, "index": position[cp["index"]]} for cp in cps]
        after = np.searchsorted(idx, [m["index"] for m in models])  # a change lands on the next drawn record
        models = [{**m, "index": int(k)} for m, k in zip(models, after) if k < len(idx)]
    return svg.draw(
        frame,
        svg.Columns(v, lo, hi),
        title=title,
        unit=unit,
        change_points=cps,
        labels=labels if marked else None,
        width=width,
        model_changes=models,
    )


def _card(metric: str, series: Sequence[_Series], primary: bool) -> tuple[str, int]:
    """One metric's card: a small multiple per series; (html, charts drawn)."""
    m = get(metric)
    assert m is not None  # cards are drawn for known metrics
    parts, listed, changed, charts = [], [], [], 0
    width = chart_width(sum(_has(s, metric) for s in series))
    for s in series:
        marked = primary and metric == series_primary(s.row)
        label = series_label(s.row)
        drawn = _chart(s, metric, m.unit, f"{m.label} {label}", marked, width)
        if drawn is None:
            continue
        route = escape(str(s.row["route"]))
        verdict = equivalence_badge(s.row)
        parts.append(
            f'<div class="mult" data-route="{route}" id="s-{s.row["series_key"]}"><h4>{escape(label)} {verdict}</h4>{drawn}</div>'
        )
        listed += [
            f'<li class="{cp["direction"].replace(" ", "-")}" data-route="{route}">{escape(label)} · '
            f"{escape(cp_text(cp))} (commit {escape(str(cp['commit'] or '?'))})</li>"
            for cp in (s.change_points if marked else [])
        ]
        changed += [
            f'<tr data-route="{route}"><td>{escape(label)}</td><td>{escape(mc["t"][:16].replace("T", " "))}</td>'
            f"<td>{escape(str(mc['commit'] or '?'))}</td><td>{escape(mc['from'])} → {escape(mc['to'])}</td></tr>"
            for mc in (s.model_changes if primary else [])
        ]
        charts += 1
    if not charts:
        return "", 0
    cp_list = ""
    if primary:
        cp_list = "<h4>change points</h4>" + (
            f'<ul class="cps">{"".join(listed)}</ul>' if listed else '<p class="empty">none</p>'
        )
        cp_list += "<h4>model changes</h4>" + (
            '<table class="model-changes"><thead><tr><th>series</th><th>first record (UTC)</th><th>commit</th>'
            f"<th>bundle content</th></tr></thead><tbody>{''.join(changed)}</tbody></table>"
            if changed
            else '<p class="empty">none: one bundle content throughout</p>'
        )
    return (
        f'<section class="card"{" data-primary" if primary else ""} data-metric="{metric}"><h3>{escape(m.label)}'
        f' <span class="sub">({escape(m.unit)}, {"higher" if m.bigger_is_better else "lower"} is better; median per record,'
        f' band: 95% CI)</span></h3><div class="mults">{"".join(parts)}</div>{cp_list}</section>'
    ), charts


def _filter(name: str, values: Sequence[str]) -> str:
    opts = "".join(f'<option value="{escape(v)}">{escape(v)}</option>' for v in values)
    return f'<label class="filter">{name} <select data-filter="{name}"><option value="">all</option>{opts}</select></label>'


def render(store: Store, job: PageJob) -> PageResult:
    """Read, draw and write one page."""
    rows = sorted(
        job.rows, key=lambda r: (str(r["route"]), r["prompt_tokens"] or 0, r["max_new_tokens"] or 0, r["series_key"])
    )
    probes = [(r["series_key"], series_primary(r)) for r in rows]
    kept = cpc.kept(store, probes)
    columns = _read_page(store, rows, job.filters)
    series, computed = [], []
    for row in rows:
        s, found = _read_series(row, columns[row["series_key"]], kept)
        series.append(s)
        if found is not None:
            computed.append(found)
    primaries = {series_primary(r) for r in rows}
    cards, charts = [], 0
    for metric in HISTORY_METRICS:
        html, n = _card(metric, series, metric in primaries)
        cards.append(html)
        charts += n
    routes = sorted({str(r["route"]) for r in rows})
    body = (
        f'<p class="nav"><a href="../../index.html">← all series</a></p><h2>{escape(str(job.bundle))} on {escape(str(job.testbed))}</h2>'
        + _filter("route", routes)
        + "".join(c for c in cards if c)
    )
    summaries = [_summary(s) for s in series]
    whole = not any(v is not None for v in job.filters.values())  # the columns hold every record
    ratios = paired_ratios(store, summaries, columns if whole else None)  # config is on the routes' page
    records = sum(x["records"] for x in summaries)
    write_file(
        Path(job.out_dir) / page_path(job.testbed, job.bundle),
        root=Path(job.out_dir),
        text=render_page(
            f"{job.title}: {job.bundle} on {job.testbed}",
            job.title,
            body,
            {"page": "detail", "records": records, "charts": charts},
        ),
    )
    return PageResult(summaries, records, charts, computed, ratios)


@cache
def _asset(name: str) -> str:
    return resources.files("winml_perf.publish").joinpath("assets", name).read_text(encoding="utf-8")


def render_page(title: str, heading: str, body: str, status: Mapping[str, Any]) -> str:
    """A whole page: the shell of assets/dashboard.html with its CSS and script inlined."""
    attrs = " ".join(f'data-{k}="{escape(str(v))}"' for k, v in status.items())
    return _asset("dashboard.html").format(
        title=escape(title),
        heading=escape(heading),
        css=_asset("dashboard.css"),
        body=body,
        status=attrs,
        js=_asset("human.js") + _asset("dashboard.js"),  # the hover numbers' formatter, then the page's script
    )


def write_file(path: Path, text: str, root: Path | None = None) -> None:
    """Write through the safe-write layer (support/safe_write.py): a temporary name unique to this
    process, then a rename (a reader never sees half a page, concurrent builds each finish whole);
    with ``root`` (the -o folder), no link below it is followed: exit 2 naming the link."""
    write_text(path, text, root=root, flag="-o")


_STORES: dict[str, Store] = {}


def ready() -> None:
    """A worker's start (child.started_pool runs it first thing): importing this module (numpy,
    SQLAlchemy, the pages' code) for this function is most of the work. At the worker's exit every
    live object is frozen first, so the interpreter's final collection skips them: it took ~0.4 s
    of each worker's exit, which the dashboard waits for after its last page."""
    atexit.register(gc.freeze)


def render_job(job: PageJob) -> PageResult:
    """``render`` in a worker process: the store opened once per process, by ``job.store_ref``."""
    store = _STORES.get(job.store_ref)
    if store is None:
        store = _STORES[job.store_ref] = open_store(job.store_ref, create=False)
    return render(store, job)
