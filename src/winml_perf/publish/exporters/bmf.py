"""``bmf``: Bencher Metric Format (https://bencher.dev/docs/reference/bencher-metric-format/):
``{benchmark: {measure: {value, lower_value, upper_value}}}``, the latest ok record per series."""

from __future__ import annotations

import json
from typing import Any

from winml_perf.publish.exporters import Exporter, register
from winml_perf.publish.exporters._rows import benchmark_name, dashboard_metrics, interval, latest_per_series
from winml_perf.publish.exporters.json import nothing_in


def to_bmf(df: Any, **_: Any) -> str:
    from winml_perf.results.frame import frame_rows

    out: dict[str, dict] = {}
    for row in frame_rows(latest_per_series(df)):
        measures = {}
        for m in dashboard_metrics(row):
            entry = {"value": row[m]}
            ci = interval(row, m)
            if ci is not None:
                entry["lower_value"], entry["upper_value"] = ci
            measures[m] = entry
        out[benchmark_name(row)] = measures
    return json.dumps(out, indent=2, allow_nan=False) + "\n"


register(Exporter("bmf", to_bmf, help="bmf (Bencher)", rank=50, empty=nothing_in))
