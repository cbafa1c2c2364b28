"""The store-wide dashboard's serving page: ``serving.html`` draws, for each testbed and bundle, the
newest run of serving cells in the store (`winml serve`, or a round of `winml tune --objective
goodput`) with publish/serving_chart.py, and the overview links to each card.

Serving cells are found by their record: no per-iteration samples and a ``serving`` section. Their
series (one per route and load point) are not single-stream series: the overview's table and the
per-bundle history pages leave them out (they have no decode tok/s to draw), so a store holding only
serving runs still gets an overview, with its serving section.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from html import escape
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from winml_perf.results import migrations as mig
from winml_perf.results.filters import apply_filters
from winml_perf.results.store import Store

SERVING_PAGE = "serving.html"
#: What a serving record's JSON holds and a single-stream one's never does (the store writes compact JSON).
SERVING_MARK = '"serving":{'


@dataclass(frozen=True)
class ServingGroup:
    """The newest serving run of one testbed and bundle: its cells' store ids and what they cover."""

    testbed: str
    bundle: str  # as the page and the overview name it: the folder's name, its path where two share a name
    run_id: str
    created_utc: str
    record_ids: tuple[int, ...]
    routes: tuple[str, ...]


def _serving_rows(store: Store, filters: Mapping[str, Any]) -> list[dict[str, Any]]:
    """id, run, time, testbed, bundle, route and series of every serving record the filters select."""
    r = mig.records.c
    no_samples = r.n_samples == 0
    if store.location.dialect == "sqlite":
        # SQLite's statistics give the records per sample count on average, not that few have none:
        # told the term is rare, it reads the index (migration 0012), not the whole table
        no_samples = sa.func.unlikely(no_samples)
    stmt = apply_filters(
        sa.select(r.id, r.run_id, r.created_utc, r.testbed_id, r.bundle, r.bundle_path, r.route, r.series_key),
        dict(filters),
    ).where(no_samples, r.record_json.contains(SERVING_MARK, autoescape=True))
    return [dict(x._mapping) for x in store.read(lambda c: c.execute(stmt).all())]


def find_serving(store: Store, filters: Mapping[str, Any]) -> tuple[set[str], list[ServingGroup]]:
    """(the series of serving cells, left out of the single-stream overview and history pages;
    per testbed and bundle, the newest run holding serving cells, ordered by testbed and bundle)."""
    found = _serving_rows(store, filters)
    runs: dict[tuple[str, str], dict[str, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    names: dict[str, set[str]] = defaultdict(set)  # folder name -> the paths seen under it
    for row in found:
        path = str(row["bundle_path"] or row["bundle"])
        names[str(row["bundle"])].add(path)
        runs[(str(row["testbed_id"]), path)][str(row["run_id"])].append(row)
    groups = []
    for (testbed, path), by_run in sorted(runs.items()):
        run_id, rows = max(by_run.items(), key=lambda kv: max(x["created_utc"] for x in kv[1]))
        name = str(rows[0]["bundle"])
        bundle = name if len(names[name]) == 1 else path
        groups.append(
            ServingGroup(
                testbed,
                bundle,
                run_id,
                max(x["created_utc"] for x in rows),
                tuple(sorted(x["id"] for x in rows)),
                tuple(sorted({str(x["route"]) for x in rows})),
            )
        )
    return {str(row["series_key"]) for row in found if row["series_key"]}, groups


def _caption(group: ServingGroup, cells: Sequence[Mapping[str, Any]]) -> str:
    loads = sorted({str(((c.get("serving") or {}).get("load") or {}).get("key")) for c in cells})
    invocations = max((len((c.get("serving") or {}).get("invocations") or []) for c in cells), default=0)
    return (
        f"newest serving run in the store: {group.run_id[:8]} ({group.created_utc[:16].replace('T', ' ')} UTC),"
        f" {len(cells)} cells, loads {', '.join(loads)}, {invocations} invocation(s) each"
    )


def write_serving_page(store: Store, out_dir: Path, title: str, groups: Sequence[ServingGroup]) -> int:
    """Write ``out_dir/serving.html`` for ``groups``; returns how many charts it drew."""
    from winml_perf.publish.dashboard_page import render_page, write_file
    from winml_perf.publish.serving_chart import serving_page

    cells: list[dict[str, Any]] = []
    captions: dict[tuple[str, str], str] = {}
    for group in groups:
        # named as the overview names it (the record holds the path); serving_page groups by it and the testbed
        mine = [{**store.get(i)["record"], "bundle": group.bundle} for i in group.record_ids]
        captions[(group.bundle, group.testbed)] = _caption(group, mine)
        cells += mine
    nav = '<p class="nav"><a href="index.html">← all series</a></p>'
    page, charts = serving_page({"cells": cells}, f"{title}: serving under load", captions, nav)
    if not charts:  # only sequential baselines: nothing to draw a curve through
        page = render_page(title, title, nav + '<p class="empty">no closed- or open-loop serving cell</p>', {})
    write_file(out_dir / SERVING_PAGE, page, root=out_dir)
    return charts


def overview_section(groups: Sequence[ServingGroup]) -> str:
    """The overview's serving section: a row per testbed and bundle linking to its card."""
    from winml_perf.publish.serving_chart import section_id

    if not groups:
        return ""
    rows = "".join(
        f'<tr data-testbed="{escape(g.testbed)}"><td>{escape(g.testbed)}</td>'
        f'<td><a href="{SERVING_PAGE}#{section_id(g.bundle, g.testbed)}">{escape(g.bundle)}</a></td>'
        f"<td>{escape(', '.join(g.routes))}</td><td>{escape(g.run_id[:8])}</td>"
        f'<td class="num">{len(g.record_ids)}</td><td>{escape(g.created_utc[:10])}</td></tr>'
        for g in groups
    )
    return (
        f'<h2 id="serving">Serving under load</h2><p class="sub">Throughput against latency per route and load'
        f' (<code>winml serve</code>, <code>winml tune --objective goodput</code>): <a href="{SERVING_PAGE}">'
        f"{SERVING_PAGE}</a>, the newest serving run of each testbed and bundle.</p>"
        '<table class="serving-index"><thead><tr><th>testbed</th><th>bundle</th><th>routes</th><th>run</th>'
        f"<th>cells</th><th>date</th></tr></thead><tbody>{rows}</tbody></table>"
    )
