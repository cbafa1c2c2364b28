"""``bmf``: Bencher Metric Format (https://bencher.dev/docs/reference/bencher-metric-format/):
``{benchmark: {measure: {value, lower_value, upper_value}}}``, the latest ok record per series.

BMF holds numbers only, so a judged route's equivalence travels as measures too: its key figures
under their column names, and ``equivalence_verdict`` as a number (VERDICT_VALUES: 1 equivalent,
0.5 within precision tolerance, 0 not equivalent); a route not checked has none of them."""

from __future__ import annotations

import json
from typing import Any

from winml_perf.model.equivalence import EQUIVALENT, NOT_EQUIVALENT, WITHIN_PRECISION
from winml_perf.model.equivalence_view import VERDICT_COLUMN, view_of_row
from winml_perf.publish.exporters import Exporter, register
from winml_perf.publish.exporters._rows import benchmark_name, dashboard_metrics, interval, latest_per_series
from winml_perf.publish.exporters.json import nothing_in
from winml_perf.publish.formats import Format, Offer

#: ``equivalence_verdict`` as a BMF value.
VERDICT_VALUES: dict[str, float] = {EQUIVALENT: 1.0, WITHIN_PRECISION: 0.5, NOT_EQUIVALENT: 0.0}


def equivalence_measures(row: Any) -> dict[str, dict[str, float]]:
    """The row's equivalence verdict (as a number) and its numeric figures; {} when not checked."""
    view = view_of_row(row)
    if not view.checked:
        return {}
    numbers = {k: v for k, v in view.columns().items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    return {VERDICT_COLUMN: {"value": VERDICT_VALUES[view.verdict]}, **{k: {"value": v} for k, v in numbers.items()}}


def to_bmf(df: Any, **_: Any) -> str:
    from winml_perf.results.frame import frame_rows

    out: dict[str, dict[str, dict[str, Any]]] = {}
    for row in frame_rows(latest_per_series(df)):
        measures = {}
        for m in dashboard_metrics(row):
            entry = {"value": row[m]}
            ci = interval(row, m)
            if ci is not None:
                entry["lower_value"], entry["upper_value"] = ci
            measures[m] = entry
        out[benchmark_name(row)] = {**measures, **equivalence_measures(row)}
    return json.dumps(out, indent=2, allow_nan=False) + "\n"


register(
    Exporter("bmf", to_bmf, empty=nothing_in),
    Format("bmf", "Bencher Metric Format", frozenset({Offer.EXPORT}), suffix=".json", note="(Bencher)"),
)
