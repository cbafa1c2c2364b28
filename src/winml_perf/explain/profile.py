"""Parse one onnxruntime profile file (chrome-trace JSON) into the session runs it recorded.

onnxruntime writes a list of events. ``cat == "Session"`` events named ``model_run`` span one
``Run()`` of the session; ``cat == "Node"`` events named ``<node>_kernel_time`` span one kernel,
with ``args.op_name``, ``args.provider`` and ``args.output_size`` (bytes). Times are integer
microseconds from the profiler's start. A node belongs to the run whose span holds its start.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from winml_perf.support.errors import WinmlPerfError

KERNEL_SUFFIX = "_kernel_time"
RUN_EVENT = "model_run"
COPY_OPS = frozenset({"MemcpyToHost", "MemcpyFromHost"})


class ProfileError(WinmlPerfError):
    """An onnxruntime profile file that cannot be read as expected."""


@dataclass(frozen=True)
class NodeEvent:
    op: str
    ep: str
    dur_us: int
    output_bytes: int


@dataclass(frozen=True)
class RunProfile:
    """One ``Run()`` of a session: its span and the kernels inside it."""

    ts_us: int
    dur_us: int
    nodes: tuple[NodeEvent, ...]

    @property
    def ops_us(self) -> int:
        return sum(n.dur_us for n in self.nodes)


def _int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def parse_events(events: Sequence[dict[str, Any]], source: str = "profile") -> list[RunProfile]:
    """The runs of ``events`` in time order, each with its kernels."""
    if not isinstance(events, list):
        raise ProfileError(f"{source}: not an onnxruntime profile (expected a JSON list of events)")
    spans = sorted(
        (_int(e.get("ts")), _int(e.get("dur")))
        for e in events
        if isinstance(e, dict) and e.get("cat") == "Session" and e.get("name") == RUN_EVENT
    )
    nodes: list[list[NodeEvent]] = [[] for _ in spans]
    starts = [s for s, _ in spans]
    for e in events:
        if not (isinstance(e, dict) and e.get("cat") == "Node" and str(e.get("name", "")).endswith(KERNEL_SUFFIX)):
            continue
        ts, args = _int(e.get("ts")), e.get("args") or {}
        i = _run_index(starts, spans, ts)
        if i is None:  # a kernel outside every run (session initialisation): not part of a step
            continue
        nodes[i].append(
            NodeEvent(
                str(args.get("op_name", "?")),
                str(args.get("provider", "?")),
                _int(e.get("dur")),
                _int(args.get("output_size")),
            )
        )
    return [RunProfile(ts, dur, tuple(n)) for (ts, dur), n in zip(spans, nodes)]


def _run_index(starts: list[int], spans: list[tuple[int, int]], ts: int) -> int | None:
    import bisect

    i = bisect.bisect_right(starts, ts) - 1
    if i < 0:
        return None
    start, dur = spans[i]
    return i if ts <= start + dur else None


def read_profile(path: str | Path) -> list[RunProfile]:
    path = Path(path)
    try:
        events = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ProfileError(f"{path}: cannot read the onnxruntime profile ({exc})") from exc
    return parse_events(events, str(path))
