"""``markdown``: a compact table of the headline numbers (the rows `winml results list` prints),
with each route's equivalence verdict beside them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from winml_perf.model.equivalence_view import view_of_row
from winml_perf.model.metrics import DECODE_THROUGHPUT, E2E, LATENCY, PROMPT_THROUGHPUT, TTFT
from winml_perf.publish.exporters import Exporter, register
from winml_perf.publish.exporters._rows import shape_text
from winml_perf.publish.formats import human
from winml_perf.support.document_text import markdown_table

MARKDOWN_HEADERS = (
    "id",
    "when (UTC)",
    "run",
    "bundle",
    "route",
    "shape",
    "testbed",
    "status",
    f"{DECODE_THROUGHPUT.label} [95% CI]",
    PROMPT_THROUGHPUT.label,
    TTFT.label,
    E2E.label,
    "equivalence",
    "commit",
)


def _num(value: Any) -> str:
    """A headline number as every human output writes it (publish/formats.human)."""
    from winml_perf.results.frame import clean

    return human(clean(value))


def _with_ci(row: Mapping[str, Any], metric: str) -> str:
    from winml_perf.results.frame import clean

    med, lo, hi = (clean(row.get(k)) for k in (metric, f"{metric}_ci95_low", f"{metric}_ci95_high"))
    if med is None:
        return ""
    if lo is None or hi is None:
        return human(med)
    return f"{human(med)} [{human(lo)}, {human(hi)}]"


def summary_rows(df: Any) -> list[list[str]]:
    """The compact rows shared by `results list` and the markdown export."""
    from winml_perf.compare.text import bundle_labels
    from winml_perf.results.frame import frame_rows
    from winml_perf.results.rows import series_where

    rows = frame_rows(df)
    names = bundle_labels((r["bundle"], series_where(r)) for r in rows)  # a path tail only where names clash
    out = []
    for row in rows:
        latency = E2E.name if row.get(E2E.name) is not None else LATENCY.name
        out.append(
            [
                str(row["id"]),
                (row["created_utc"] or "")[:16].replace("T", " "),
                (row["run_id"] or "")[:8],
                names[(row["bundle"], series_where(row))] or "",
                row["route"] or "",
                shape_text(row),
                row["testbed_id"] or "",
                row["status"],
                _with_ci(row, DECODE_THROUGHPUT.name),
                _num(row.get(PROMPT_THROUGHPUT.name)),
                _num(row.get(TTFT.name)),
                _num(row.get(latency)),
                view_of_row(row).label(),  # the route's equivalence verdict; 'not checked' without one
                (row["git_commit"] or "")[:10],
            ]
        )
    return out


def to_markdown(df: Any, **_: Any) -> str:
    return markdown_table(MARKDOWN_HEADERS, summary_rows(df)) + "\n"


register(Exporter("markdown", to_markdown))
