"""``json``: the ``csv`` rows as an array of objects."""

from __future__ import annotations

import json
from typing import Any

from winml_perf.publish.exporters import Exporter, register


def to_json(df: Any, **_: Any) -> str:
    from winml_perf.results.frame import frame_rows

    return json.dumps(frame_rows(df), indent=2, allow_nan=False) + "\n"


def nothing_in(text: str) -> bool:
    """Whether a JSON export is an empty array or object."""
    return not json.loads(text)


register(Exporter("json", to_json, empty=nothing_in))
