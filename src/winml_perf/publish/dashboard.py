"""The static dashboard: self-contained HTML pages (inline CSS, inline SVG drawn by
publish/dashboard_svg.py, a few lines of inline JS for the filters; no network) written to ``<out>/``.

- ``index.html``: one row per series (testbed x bundle x route x shape x options, ``series_key``) with
  a sparkline of its primary metric, the newest value and its 95 % interval, its ratio to config
  from the newest run that measured both (publish/route_ratio.py: compare routes' paired ratio,
  its interval and the run) with the equivalence verdict of the newest record and its run beside it, and its newest change point (size of the shift
  and its interval); a testbed and a route filter.
- ``serving.html`` (publish/serving_pages.py), where the store holds serving cells (`winml serve`,
  `winml tune --objective goodput`): the newest serving run of each testbed and bundle drawn as
  throughput against latency, linked from the overview's "Serving under load" section; serving
  series are not single-stream histories and stay off the table and the pages below.
- ``pages/<testbed>/<bundle>.html`` (publish/dashboard_page.py): the full history of each series of
  that testbed and bundle: a card per metric with the series of the sweep (routes x shapes) as small
  multiples, the interval as a band, the change points of the primary metric marked and listed; a
  route filter. The primary metric's card has a marker per record (hover: date, commit, version,
  testbed, and the value with its interval, which the page's script writes from the chart's exact
  values: assets/human.js); the other cards draw the line and band only, which keeps a page of a
  year of nightlies to a few MB.

Change points: E-Divisive means (stats/series/changepoint.py) over the primary metric of each series
(decode tok/s for generation, e2e for one-token runs, latency for plain ONNX), over its newest
``CHANGE_WINDOW`` ok records: each record's per-invocation medians (``metrics.invocations``, the
mode-aware input the regression gate judges too), or its median where no record has invocations. They are kept in the store
(results/change_point_cache.py), so a rebuild runs the detector only on series whose searched
records changed.

Pages are written in ``jobs`` worker processes when the store is large enough to pay for starting
them (child.started_pool: started before the series are listed, so their imports overlap that);
each page is one job, so memory stays bounded by a page per process.

Each page reports what it drew in ``#winml-status`` (data-points: markers of the primary card,
data-records, data-charts, data-errors, data-state) so a headless browser test can check it.
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from html import escape
from pathlib import Path
from typing import Any

from winml_perf.compare.text import bundle_labels, shape_label
from winml_perf.model.equivalence_view import view_of_row
from winml_perf.model.metrics import get
from winml_perf.publish import dashboard_svg as svg
from winml_perf.publish.dashboard_page import (
    CHANGE_WINDOW,
    PageJob,
    PageResult,
    cp_text,
    page_path,
    ready,
    render,
    render_job,
    render_page,
    write_file,
)
from winml_perf.publish.formats import human
from winml_perf.publish.route_ratio import PairedRatio, ratio_cell
from winml_perf.publish.serving_pages import find_serving, overview_section, write_serving_page
from winml_perf.results import change_point_cache as cpc
from winml_perf.results.rows import series_where
from winml_perf.results.selectors import check_filters_match
from winml_perf.results.series import series_list, series_records
from winml_perf.results.store import Store
from winml_perf.support.errors import UsageError

#: Records per worker process below which a worker does not pay for its start (~1 s to import).
RECORDS_PER_JOB = 25_000
#: Most worker processes the dashboard starts by default.
MAX_JOBS = 8
#: Freshly found change points kept in the store per write (bounded memory and transactions).
KEEP_BATCH = 200


def default_jobs(records: int) -> int:
    """Workers worth starting for ``records`` records: one per RECORDS_PER_JOB, at most the CPUs
    (and MAX_JOBS); 1 means the pages are written in this process."""
    return max(1, min(os.cpu_count() or 1, MAX_JOBS, records // RECORDS_PER_JOB))


def equivalence_cell(row: Mapping[str, Any]) -> str:
    """The newest record's equivalence verdict beside the ratio ('NOT equivalent' marked, 'not checked'),
    with the run it was made in: a verdict belongs to its route and run, not to the whole series."""
    view = view_of_row(row)
    kind = view.verdict.replace(" ", "-")
    run = row.get("equivalence_run_id")
    figures = view.figures_text() if view.checked else ""
    title = " ".join(
        ([f"run {run}"] if view.checked and run else [])
        + ([f"against {view.reference}"] if view.reference else [])
        + ([f"({figures})"] if figures else [])
    )
    attr = f' title="{escape(title)}"' if title else ""
    where = f' <span class="sub">run {escape(str(run)[:8])}</span>' if view.checked and run else ""
    accuracy = view.perplexity_text() if view.checked else None  # accuracy beside speed (issue 34)
    shown = f' <span class="sub perplexity">{escape(accuracy)}</span>' if accuracy else ""
    return f'<td class="equivalence {kind}"{attr}>{escape(view.label())}{where}{shown}</td>'


def _index_row(s: Mapping[str, Any], ratios: Mapping[str, PairedRatio]) -> str:
    row, m = s["row"], get(s["metric"])
    assert m is not None  # the index lists series of known metrics
    latest = s["latest"]
    value = ""
    if latest is not None:
        med, lo, hi = latest["value"]
        ci = f" [{human(lo)}, {human(hi)}]" if lo is not None and hi is not None else ""
        value = f"{human(med)}{ci} <span class='sub'>{escape(latest['created_utc'][:10])}</span>"
    cp = s["cp"]
    cp_html = (
        f'<span class="{cp["direction"].replace(" ", "-")}">{escape(cp_text(cp))}</span>'
        if cp
        else '<span class="sub">none</span>'
    )
    status_class = escape(s["status"].replace(" ", "-"))
    link = f"{page_path(row['testbed_id'], row['bundle'])}#s-{row['series_key']}"
    return (
        f'<tr data-testbed="{escape(str(row["testbed_id"]))}" data-route="{escape(str(row["route"]))}">'
        f'<td>{escape(str(row["testbed_id"]))}</td><td><a href="{escape(link)}">{escape(str(row["bundle"]))}</a></td>'
        f"<td>{escape(str(row['route']))}</td><td>{escape(shape_label(row['prompt_tokens'], row['max_new_tokens']))}</td>"
        f'<td>{escape(m.label)}</td><td>{svg.sparkline(s["spark"])}</td><td class="num">{value}</td>'
        f'{ratio_cell(s, ratios)}{equivalence_cell(row)}<td class="status {status_class}">{escape(s["status"])}</td><td>{cp_html}</td>'
        f'<td class="num">{s["records"]}</td></tr>'
    )


def _filter(name: str, values: Sequence[str]) -> str:
    opts = "".join(f'<option value="{escape(v)}">{escape(v)}</option>' for v in values)
    return f'<label class="filter">{name} <select data-filter="{name}"><option value="">all</option>{opts}</select></label>'


def _store_ref(store: Store) -> str:
    """How a worker process opens the same store: the SQLite file, or the full URL."""
    loc = store.location
    return str(loc.path) if loc.path is not None else loc.url.render_as_string(hide_password=False)


def _results(store: Store, jobs: Sequence[PageJob], pool: Any) -> Iterator[PageResult]:
    if pool is None:
        for job in jobs:
            yield render(store, job)
        return
    yield from pool.map(render_job, jobs)


@contextmanager
def _page_workers(wanted: int) -> Iterator[Any]:
    """``wanted`` worker processes for the pages, started before the pages are known, so their start
    (~1 s of imports each) overlaps listing the series; None (pages written here) for one."""
    if wanted <= 1:
        yield None
        return
    from winml_perf.ep.child import ChildContext, started_pool

    # up to the CPUs now; the rest of a larger --jobs as pages wait for a process
    now = min(wanted, os.cpu_count() or 1)
    pool = started_pool(wanted, ChildContext.from_parent(plugin_libraries=()), ready, now=now)
    try:
        yield pool
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def write_dashboard(
    store: Store, out_dir: Path, *, title: str = "winml-perf results", jobs: int | None = None, **filters: Any
) -> Path:
    """Write ``out_dir/index.html`` and a page per testbed x bundle; returns the index's path.
    ``jobs``: worker processes for the pages (None: ``default_jobs`` of the records selected).
    Filters that select no record of a store that holds some are refused (exit 2), nothing written."""
    check_filters_match(store, filters)
    out_dir = Path(out_dir)
    wanted = default_jobs(series_records(store, **filters)) if jobs is None else max(1, int(jobs))
    with _page_workers(wanted) as pool:
        return _write(store, out_dir, title, wanted, pool, filters)


def _write(store: Store, out_dir: Path, title: str, wanted: int, pool: Any, filters: Mapping[str, Any]) -> Path:
    """``write_dashboard`` with its worker processes (``pool``, None: none) started."""
    generated = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    groups: dict[tuple[object, object], list[dict[str, Any]]] = defaultdict(list)
    # the serving cells (an index read: migration 0012) are drawn on serving.html, not as histories
    serving_keys, serving_runs = find_serving(store, filters)
    selected = [r for r in series_list(store, **filters) if r["series_key"] not in serving_keys]
    names = bundle_labels((r["bundle"], series_where(r)) for r in selected)  # bundles named alike: own pages
    selected = [{**r, "bundle": names[(r["bundle"], series_where(r))]} for r in selected]
    for row in selected:
        groups[(row["testbed_id"], row["bundle"])].append(row)
    page_jobs = [
        PageJob(_store_ref(store), str(out_dir), title, testbed, bundle, tuple(rows), dict(filters))
        for (testbed, bundle), rows in sorted(groups.items(), key=lambda kv: tuple(map(str, kv[0])))
    ]
    workers = pool if min(len(page_jobs), wanted) > 1 else None  # one page: written here
    summaries: list[dict[str, Any]] = []
    # the index's rows, a page's as its result comes (its routes' ratios to config, issue 35, come with it)
    index_rows: list[str] = []
    total = 0
    pending: list[tuple[cpc.Search, list[dict[str, Any]]]] = []
    try:
        for result in _results(store, page_jobs, workers):
            summaries += result.summaries
            index_rows += [_index_row(s, result.ratios) for s in result.summaries]
            total += result.records
            pending += result.computed
            if len(pending) >= KEEP_BATCH:
                cpc.save(store, pending)
                pending = []
        cpc.save(store, pending)
        rows_html = "".join(index_rows)
        testbeds = sorted({str(s["row"]["testbed_id"]) for s in summaries} | {g.testbed for g in serving_runs})
        routes = sorted({str(s["row"]["route"]) for s in summaries})
        table = (
            (
                '<table class="index"><thead><tr><th>testbed</th><th>bundle</th><th>route</th><th>shape</th><th>metric</th>'
                "<th>trend</th><th>latest [95% CI]</th><th>vs config</th><th>equivalence</th><th>status</th><th>newest change point</th>"
                "<th>records</th></tr></thead>"
                f"<tbody>{rows_html}</tbody></table>"
            )
            if summaries
            else f'<p class="empty">the store holds no {"single-stream " if serving_runs else ""}records</p>'
        )
        serving_charts = write_serving_page(store, out_dir, title, serving_runs) if serving_runs else 0
        body = (
            f'<p class="sub">{len(summaries)} {"single-stream " if serving_runs else ""}series, {total} records;'
            f" generated {generated}."
            f" Change points: E-Divisive means over the newest {CHANGE_WINDOW} records of each series.</p>"
            + _filter("testbed", testbeds)
            + _filter("route", routes)
            + table
            + overview_section(serving_runs)
        )
        index = out_dir / "index.html"
        write_file(
            index,
            root=out_dir,
            text=render_page(
                title,
                title,
                body,
                {"page": "index", "records": total, "series": len(summaries), "serving-charts": serving_charts},
            ),
        )
    except OSError as exc:
        raise UsageError(
            f"-o {out_dir}: cannot write the dashboard ({exc})", "pass -o with a writable folder"
        ) from None
    return index
