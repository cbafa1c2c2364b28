"""``jsonl``: the ``json`` rows, one object per line. A run: one cell record per line."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from winml_perf.publish.exporters import Exporter, register

if TYPE_CHECKING:
    from winml_perf.model.record import RunRecord


def to_jsonl(df: Any, **_: Any) -> str:
    from winml_perf.results.frame import frame_rows

    return "".join(json.dumps(r, allow_nan=False, separators=(",", ":")) + "\n" for r in frame_rows(df))


def run_jsonl(run: RunRecord) -> str:
    from winml_perf.publish.render import run_text

    return run_text(run, "jsonl")


register(Exporter("jsonl", to_jsonl, help="jsonl", rank=30, run_text=run_jsonl))
