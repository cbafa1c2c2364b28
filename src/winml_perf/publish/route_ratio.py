"""The overview's "vs config" (issue 35): a route's ratio to the config route from one run that
measured both side by side (interleaved, paired), as `winml compare routes` computes it for that
run (compare/routes.py, with its defaults), with its 95 % interval and the run it came from. Never
a ratio of two newest values that came from different runs (another night, another machine state).

For each series that is not config, the config series of the same testbed, bundle, runtime and
shape is looked up among the overview's series; the newest run holding ok records of both
(results/series.newest_shared_run) is compared. A route never measured with config has no ratio.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from html import escape
from typing import Any

from winml_perf.compare.cells import Cell, stored_cells
from winml_perf.compare.routes import RouteComparison, compare_routes
from winml_perf.results.series import SeriesColumns, newest_shared_run, newest_shared_run_of
from winml_perf.results.store import Store
from winml_perf.stats import significance as sig
from winml_perf.support.human_numbers import fixed

CONFIG = "config"
#: Hex digits of a run id the overview shows (as `results list` does).
RUN_DIGITS = 8


@dataclass(frozen=True)
class PairedRatio:
    """A route against config in one run: compare routes' row for the metric, and the run."""

    run_id: str
    comparison: RouteComparison


def _group(s: Mapping[str, Any]) -> tuple[object, ...]:
    row = s["row"]
    return (row["testbed_id"], row["bundle"], row.get("runtime"), row["prompt_tokens"], row["max_new_tokens"])


def paired_ratios(
    store: Store, summaries: Sequence[Mapping[str, Any]], columns: Mapping[str, SeriesColumns] | None = None
) -> dict[str, PairedRatio]:
    """series_key of each non-config series -> its ratio to config from the newest run that measured
    both (absent: never measured together, or the comparison has no value). ``columns``: every
    record of each series, read already (series_key -> SeriesColumns, unfiltered): the shared run
    is found in them instead of by a query per series. The cells of a run are read once for all
    the pairs it is the shared run of (a page's routes, as a rule, share their newest run)."""
    config = {_group(s): s for s in summaries if s["row"]["route"] == CONFIG}
    pairs: list[tuple[str, str, str, str, str]] = []  # series, its config series, route, metric, run
    for s in summaries:
        row = s["row"]
        base = config.get(_group(s))
        if row["route"] == CONFIG or base is None:
            continue
        key, config_key = row["series_key"], base["row"]["series_key"]
        if columns is not None and key in columns and config_key in columns:
            run = newest_shared_run_of(columns[key], columns[config_key])
        else:
            run = newest_shared_run(store, key, config_key)
        if run is not None:
            pairs.append((key, config_key, str(row["route"]), s["metric"], run))
    wanted: dict[str, list[str]] = {}
    for key, config_key, _, _, run in pairs:
        wanted.setdefault(run, []).extend((key, config_key))
    cells = {run: run_cells(store, run, series) for run, series in wanted.items()}
    out: dict[str, PairedRatio] = {}
    for key, config_key, route, metric, run in pairs:
        ratio = run_ratio(cells[run], run, (key, config_key), route, metric)
        if ratio is not None:
            out[key] = PairedRatio(run, ratio)
    return out


def run_cells(store: Store, run_id: str, series: Sequence[str]) -> list[tuple[str, Cell]]:
    """(series_key, cell) of the run's ok records of ``series``, oldest first, with their measured
    samples and invocation counts: one read of each for all of them."""
    rows = store.records(run_id=run_id, series=list(dict.fromkeys(series)), status="ok")
    return list(zip((str(r["series_key"]) for r in rows), stored_cells(store, rows, invocations=True)))


def run_ratio(
    cells: Sequence[tuple[str, Cell]], run_id: str, series: Sequence[str], route: str, metric: str
) -> RouteComparison | None:
    """compare routes' comparison of ``route`` against config in run ``run_id`` for ``metric``,
    over the run's ok cells (``run_cells``) of ``series`` (the route's and config's), with compare
    routes' defaults."""
    report = compare_routes(
        [cell for key, cell in cells if key in series],
        run_id,
        baseline_route=CONFIG,
        routes=[route],
        metrics=[metric],
        equivalence_pct=sig.EQUIVALENCE * 100,
        resamples=sig.BOOTSTRAP_RESAMPLES,
        seed=sig.BOOTSTRAP_SEED,
    )
    found = [c for c in report.rows if c.route == route and c.metric == metric and math.isfinite(c.speedup)]
    return found[0] if found else None


def ratio_cell(s: Mapping[str, Any], ratios: Mapping[str, PairedRatio]) -> str:
    """'×0.58 [0.55, 0.61] run 1a2b3c4d', coloured by compare routes' verdict; '–' for config and for
    a route never measured with config (hover: the comparison's sentence)."""
    paired = ratios.get(s["row"]["series_key"])
    if s["row"]["route"] == CONFIG or paired is None:
        return '<td class="num sub">–</td>'
    c = paired.comparison
    kind = "improvement" if c.verdict == sig.FASTER else "regression" if c.verdict == sig.SLOWER else "level"
    interval = (
        f" [{fixed(c.ci_low, 2)}, {fixed(c.ci_high, 2)}]"
        if math.isfinite(c.ci_low) and math.isfinite(c.ci_high)
        else ""
    )
    title = f"run {paired.run_id}: {c.speed_sentence(marked=False)}"
    return (
        f'<td class="num {kind}" title="{escape(title)}" data-run="{escape(paired.run_id)}"'
        f' data-ratio="{c.speedup!r}">×{fixed(c.speedup, 2)}{interval}'
        f' <span class="sub">run {escape(paired.run_id[:RUN_DIGITS])}</span></td>'
    )
