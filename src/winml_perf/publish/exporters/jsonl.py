"""``jsonl``: the ``json`` rows, one object per line."""

from __future__ import annotations

import json
from typing import Any

from winml_perf.publish.exporters import Exporter, register


def to_jsonl(df: Any, **_: Any) -> str:
    from winml_perf.results.frame import frame_rows

    return "".join(json.dumps(r, allow_nan=False, separators=(",", ":")) + "\n" for r in frame_rows(df))


register(Exporter("jsonl", to_jsonl))
