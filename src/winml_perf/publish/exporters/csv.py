"""``csv``: every selected record, one row each (wide: ``<metric>`` is the median,
``<metric>_ci95_low`` / ``_ci95_high`` / ``_cv_pct`` / ``_n`` beside it)."""

from __future__ import annotations

from typing import Any

from winml_perf.publish.csv_cells import neutralise_frame
from winml_perf.publish.exporters import Exporter, register


def to_csv(df: Any, **_: Any) -> str:
    text: str = neutralise_frame(df).to_csv(index=False, lineterminator="\n")  # pandas ships no types here
    return text


def _no_rows(text: str) -> bool:
    return not text.strip() or len(text.strip().splitlines()) < 2


register(Exporter("csv", to_csv, empty=_no_rows))
