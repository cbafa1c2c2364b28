"""``csv``: every selected record, one row each (wide: ``<metric>`` is the median,
``<metric>_ci95_low`` / ``_ci95_high`` / ``_cv_pct`` / ``_n`` beside it). A run: its result table."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from winml_perf.publish.csv_cells import neutralise_frame
from winml_perf.publish.exporters import Exporter, register

if TYPE_CHECKING:
    from winml_perf.model.record import RunRecord


def to_csv(df: Any, **_: Any) -> str:
    text: str = neutralise_frame(df).to_csv(index=False, lineterminator="\n")  # pandas ships no types here
    return text


def run_csv(run: RunRecord) -> str:
    from winml_perf.publish.render import run_text

    return run_text(run, "csv")


def _no_rows(text: str) -> bool:
    return not text.strip() or len(text.strip().splitlines()) < 2


register(Exporter("csv", to_csv, help="csv", rank=10, run_text=run_csv, empty=_no_rows))
