"""The store side of `winml compare`: the queries that pick the cells to compare (a run, two
selections) and the histories the regression gate reads. The comparisons themselves
(compare/routes.py, compare/runs.py, compare/gate.py) take what these return and never open a store.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from winml_perf.compare.cells import stored_cells
from winml_perf.compare.gate import Histories, HistoryQuery, gated, history_queries
from winml_perf.compare.routes import RoutesReport, compare_routes
from winml_perf.compare.runs import RunsReport, Side, compare_runs
from winml_perf.results.invocation_history import invocation_histories
from winml_perf.results.selectors import check_filters_match, resolve_run_id, select
from winml_perf.results.store import Store
from winml_perf.stats import significance as sig
from winml_perf.support.errors import StoreError


def _resolve_run(store: Store, run: str | None, baseline_route: str, filters: Mapping[str, Any]) -> str:
    if run:
        return resolve_run_id(store, run, "--run", **filters)
    for r in store.run_ids(**filters):  # newest first: the latest run with the baseline route and another route
        routes = {x["route"] for x in store.records(run_id=r, status="ok", **filters)}
        if baseline_route in routes and len(routes) > 1:
            return r
    check_filters_match(store, filters)
    raise StoreError(
        f"no run in {store.display} measured route {baseline_route!r} together with another route",
        f"measure two in one run, `winml perf BUNDLE --route {baseline_route} --route ep=EP` with an EP from"
        f" `winml devices` that {baseline_route} does not run on (a route that runs as {baseline_route} does is"
        " measured once, as it), or pass --run / --baseline-route",
    )


def stored_serving_cells(
    store: Store, run: str | None, baseline_route: str, filters: Mapping[str, Any]
) -> tuple[str, list[Any]] | None:
    """The run ``compare routes`` would pick, with its cells, when it is a `winml serve` run
    (its cells carry a serving section); None for any other run."""
    from winml_perf.model.record import CellRecord

    run_id = _resolve_run(store, run, baseline_route, filters)
    rows = store.records(run_id=run_id, **filters)
    if not rows or not store.get(int(rows[0]["id"]))["record"].get("serving"):  # a serve run has only serving cells
        return None
    docs = [store.get(int(row["id"]))["record"] for row in rows]
    return run_id, [CellRecord.from_dict(d) for d in docs if d.get("serving")]


def compare_stored_routes(
    store: Store,
    run: str | None = None,
    *,
    baseline_route: str = "config",
    routes: Sequence[str] | None = None,
    metrics: Sequence[str] | None = None,
    equivalence_pct: float = sig.EQUIVALENCE * 100,
    resamples: int = sig.BOOTSTRAP_RESAMPLES,
    seed: int = sig.BOOTSTRAP_SEED,
    **filters: Any,
) -> RoutesReport:
    """compare/routes.py over the stored run ``run`` (an id or prefix; default the latest run with
    ``baseline_route`` and another route), within ``filters``."""
    run_id = _resolve_run(store, run, baseline_route, filters)
    cells = stored_cells(store, store.records(run_id=run_id, **filters), invocations=True)
    return compare_routes(
        cells,
        run_id,
        baseline_route=baseline_route,
        routes=routes,
        metrics=metrics,
        equivalence_pct=equivalence_pct,
        resamples=resamples,
        seed=seed,
    )


def _side(store: Store, selector: str, flag: str, filters: Mapping[str, Any]) -> Side:
    picked = select(store, selector, flag, **filters)
    return Side(picked.selector, picked.meaning, tuple(stored_cells(store, picked.records)))


def gate_histories(
    store: Store, queries: Mapping[tuple[Any, ...], HistoryQuery | None]
) -> dict[HistoryQuery, Histories]:
    """What each of the gate's history queries reads from the store."""
    return {
        q: invocation_histories(store, q.series_key, list(q.metrics), until=q.until, newest=q.newest)
        for q in {q for q in queries.values() if q is not None and q.metrics}
    }


def compare_stored_runs(
    store: Store,
    baseline: str,
    candidate: str,
    *,
    metrics: Sequence[str] | None = None,
    equivalence_pct: float = sig.EQUIVALENCE * 100,
    fail_threshold_pct: float | None = None,
    force: bool = False,
    named: tuple[str, str] = ("--baseline", "--candidate"),
    **filters: Any,
) -> RunsReport:
    """compare/runs.py over the records two selectors pick, within ``filters``; with
    ``fail_threshold_pct``, judged by the gate over each candidate series' stored history. ``named``:
    how the two were given (BASELINE or --baseline, ...), which a selector matching nothing names."""
    base = _side(store, baseline, named[0], filters)
    cand = _side(store, candidate, named[1], filters)
    report = compare_runs(
        base,
        cand,
        metrics=metrics,
        equivalence_pct=equivalence_pct,
        fail_threshold_pct=fail_threshold_pct,
        force=force,
    )
    if fail_threshold_pct is None:
        return report
    queries = history_queries(report, cand.cells)
    return gated(report, queries, gate_histories(store, queries))
