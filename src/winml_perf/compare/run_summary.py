"""The closing summary of a multi-route `winml perf`: each route against the config route, per
metric, with the same ratio as `winml compare routes` (results/compare.py): over paired invocations
when the routes ran several, else the paired-rounds bootstrap.

The run's cells go into a throwaway SQLite store so the comparison is the stored one, whether or
not the run itself was stored."""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from winml_perf.compare.comparisons import INVOCATIONS, RoutesReport, compare_routes
from winml_perf.model.metrics import sort_key
from winml_perf.stats import significance as sig

BASELINE = "config"


def summarize_routes(doc: Mapping[str, Any], baseline_route: str = BASELINE) -> RoutesReport | None:
    """Routes of the run record ``doc`` against ``baseline_route``; None when the run has no ok
    cell of it, or no ok cell of another route."""
    ok_routes = {c["route"]["label"] for c in doc.get("cells") or () if c.get("status") == "ok"}
    if baseline_route not in ok_routes or len(ok_routes) < 2:
        return None
    from winml_perf.results.store import open_store

    with tempfile.TemporaryDirectory(prefix="winml-summary-") as tmp:
        with open_store(Path(tmp) / "summary.db") as store:
            store.write_run(dict(doc))
            report = compare_routes(store, doc["run_id"], baseline_route=baseline_route)
    rows = sorted(report.rows, key=lambda r: (sort_key(r.metric), r.prompt_tokens or 0, r.max_new_tokens or 0, r.route))
    return RoutesReport(report.run_id, report.baseline_route, tuple(rows), report.notes)


def summary_lines(report: RoutesReport) -> list[str]:
    """'summary: routes against config ...' then, per metric, one sentence per route and shape:
    with its interval and verdict where the rounds support one, else the point ratio alone and
    one closing line on how many rounds an interval needs."""
    paired = bool(report.rows) and all(r.pairing == INVOCATIONS for r in report.rows)
    how = "over paired invocations" if paired else "bootstrap over paired rounds"
    lines = [f"summary: routes against {report.baseline_route} (95% CI, {how})"]
    metric, short = None, False
    for row in report.rows:
        if row.metric != metric:
            metric = row.metric
            lines.append(f"  {metric}:")
        short = short or not row.enough
        lines.append(f"    {row.sentence() if row.enough else row.point_sentence()}")
    if short:
        lines.append(
            "  no interval or verdict below 2 paired invocations: raise --invocations"
            if paired
            else f"  no interval or verdict below {sig.MIN_PAIRED_ROUNDS} paired rounds: raise --iterations"
        )
    return lines
