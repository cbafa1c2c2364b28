"""One cell's state while it is measured: its invocations (each with its samples and figures), the
time charged to it against its --cell-timeout, the first begin_cell reply and the last end_cell
reply, why it stopped or how it failed. measure/driver.py keeps it for both schedules.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from winml_perf.measure.hosting.replies import BeginReply, EndReply
from winml_perf.model.metrics import metric_values
from winml_perf.model.result import CellFailure
from winml_perf.model.sample import IterationSample
from winml_perf.model.spec import CellSpec
from winml_perf.stats import sample_stats as stats


def utc_now() -> str:
    """Now in UTC, ISO 8601 to the millisecond with a Z: the cells' started/finished stamps."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


#: The least time budget handed to a host call, so that a spent budget still times out at once.
MIN_REMAINING_S = 0.001


@dataclass
class Invocation:
    """One invocation of a cell: a loaded session, the cell's warmup in it, its measured iterations."""

    index: int
    round: int
    pid: int | None
    model_load_ms: float | None
    samples: list[IterationSample] = field(default_factory=list)
    warmed: bool = False  # its warmup finished
    warmup_iterations: int = 0
    warmup_s: float | None = None
    measure_s: float = 0.0  # wall time of its measured batches
    next: str | None = None  # why it ended (an adaptive policy's decision), when a decision ended it
    cost_s: float = 0.0  # what starting it cost the cell: its share of the load, and its warmup

    def figure(self, metric: str) -> dict[str, Any]:
        """The record's figures of this invocation (warmup and measure only once it warmed up)."""
        out: dict[str, Any] = {
            "index": self.index,
            "round": self.round,
            "pid": self.pid,
            "model_load_ms": self.model_load_ms,
        }
        if self.warmed:
            out.update(
                warmup_iterations=self.warmup_iterations,
                warmup_s=self.warmup_s,
                measure_s=self.measure_s,
                next=self.next,
            )
        out["iterations"] = len(self.samples)
        out["medians"] = {metric: stats.median(metric_values(self.samples, metric))}
        return out


@dataclass
class CellProgress:
    cell: CellSpec
    index: int
    invocations: list[Invocation] = field(default_factory=list)
    warmups: list[IterationSample] = field(default_factory=list)
    begin: BeginReply | None = None  # the first begin_cell reply: prompt info and ids, load
    end: EndReply | None = None  # the last end_cell reply: memory, the EPs that ran
    peak_rss: int | None = None  # the largest peak RSS any end_cell reply gave
    peak_model_rss: int | None = None  # the largest peak RSS above the harness's own (memory.py)
    batches: int = 0
    measure_s: float = 0.0  # time of the measured iterations
    spent_s: float = 0.0  # all time charged to the cell (loads, warmups, iterations), against --cell-timeout
    stop: str | None = None
    failure: CellFailure | None = None
    started_utc: str = ""
    t0: float = 0.0
    energy_readings: list[Any] = field(default_factory=list)  # power.accounting.PhaseReading per phase occurrence
    idle_marks: tuple[tuple[float, float], ...] = ()  # the first invocation's quiet window
    power_state: dict[str, Any] = field(default_factory=dict)  # at the cell's first begin
    timeline: list[dict[str, Any]] = field(default_factory=list)  # a sustained run: one point per batch

    @property
    def finished(self) -> bool:
        return self.stop is not None or self.failure is not None

    def remaining_s(self) -> float | None:
        """What is left of the cell's time budget (None: no --cell-timeout)."""
        if self.cell.cell_timeout_s is None:
            return None
        return max(MIN_REMAINING_S, self.cell.cell_timeout_s - self.spent_s)

    @property
    def samples(self) -> list[IterationSample]:
        """Every measured iteration so far, invocation after invocation."""
        return [s for inv in self.invocations for s in inv.samples]

    def values(self) -> list[float]:
        """The primary metric of every measured iteration so far."""
        return metric_values(self.samples, self.cell.primary_metric)

    def per_invocation(self) -> list[list[float]]:
        """The primary metric of the measured iterations, invocation by invocation."""
        return [metric_values(inv.samples, self.cell.primary_metric) for inv in self.invocations]
