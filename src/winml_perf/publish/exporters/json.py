"""``json``: the ``csv`` rows as an array of objects. A run: its run record."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from winml_perf.publish.exporters import Exporter, register

if TYPE_CHECKING:
    from winml_perf.model.record import RunRecord


def to_json(df: Any, **_: Any) -> str:
    from winml_perf.results.frame import frame_rows

    return json.dumps(frame_rows(df), indent=2, allow_nan=False) + "\n"


def run_json(run: RunRecord) -> str:
    from winml_perf.publish.render import run_text

    return run_text(run, "json")


def nothing_in(text: str) -> bool:
    """Whether a JSON export is an empty array or object."""
    return not json.loads(text)


register(Exporter("json", to_json, help="json", rank=20, run_text=run_json, empty=nothing_in))
