"""One cell's progress while it is measured, as every runner keeps it: the time charged to it
against its --cell-timeout, the first begin_cell reply, why it stopped or how it failed.

bench/runner.py (rounds in one loaded session per route) and bench/invocations.py (a fresh
process per invocation) each extend it with how they hold the samples; both provide ``samples``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from winml_perf.model.metrics import metric_values
from winml_perf.model.result import CellFailure
from winml_perf.model.spec import CellSpec


def utc_now() -> str:
    """Now in UTC, ISO 8601 to the millisecond with a Z: the cells' started/finished stamps."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


#: The least time budget handed to a host call, so that a spent budget still times out at once.
MIN_REMAINING_S = 0.001


@dataclass
class CellProgress:
    cell: CellSpec
    index: int
    begin: dict[str, Any] | None = None  # the first begin_cell reply: prompt info and ids, load, warmup samples
    end: dict[str, Any] = field(default_factory=dict)  # the last end_cell reply: memory, the EPs that ran
    measure_s: float = 0.0  # time of the measured iterations
    spent_s: float = 0.0  # all time charged to the cell (loads, warmups, iterations), against --cell-timeout
    stop: str | None = None
    failure: CellFailure | None = None
    started_utc: str = ""
    t0: float = 0.0

    @property
    def finished(self) -> bool:
        return self.stop is not None or self.failure is not None

    def remaining_s(self) -> float | None:
        """What is left of the cell's time budget (None: no --cell-timeout)."""
        if self.cell.cell_timeout_s is None:
            return None
        return max(MIN_REMAINING_S, self.cell.cell_timeout_s - self.spent_s)

    def values(self) -> list[float]:
        """The primary metric of every measured iteration so far."""
        return metric_values(self.samples, self.cell.primary_metric)  # type: ignore[attr-defined]
