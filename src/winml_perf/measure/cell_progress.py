"""One cell's state while it is measured: its invocations (each with its samples and figures), the
time charged to it against its --cell-timeout, the first begin_cell reply and the last end_cell
reply, why it stopped or how it failed. measure/driver.py keeps it for both schedules.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, overload

from winml_perf.measure.hosting.replies import BeginReply, EndReply
from winml_perf.model.metrics import metric_values
from winml_perf.model.result import CellFailure
from winml_perf.model.sample import IterationSample
from winml_perf.model.spec import CellSpec
from winml_perf.stats import sample_stats as stats
from winml_perf.stats.repetition import invocation_moments


def utc_now() -> str:
    """Now in UTC, ISO 8601 to the millisecond with a Z: the cells' started/finished stamps."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


#: The least time budget handed to a host call, so that a spent budget still times out at once.
MIN_REMAINING_S = 0.001


def sorted_median(ordered: Sequence[float]) -> float:
    """The median of already sorted values as numpy's median computes it (the middle value, or the
    mean of the two middle ones): what the stopping rule's intervals use; NaN when empty."""
    n = len(ordered)
    if not n:
        return math.nan
    mid = (n - 1) // 2
    return float(ordered[mid]) if n % 2 else float((ordered[mid] + ordered[mid + 1]) / 2)


def sorted_percentile_50(ordered: Sequence[float]) -> float:
    """stats.median of already sorted values (Hyndman & Fan 7: o[lo] + 0.5 (o[hi] - o[lo]))."""
    n = len(ordered)
    if not n:
        return math.nan
    lo = (n - 1) // 2
    hi = min(lo + 1, n - 1)
    return float(ordered[lo] + ((n - 1) * 0.5 - lo) * (ordered[hi] - ordered[lo]))


class RunningValues(Sequence[float]):
    """One invocation's primary-metric values as they arrive, with what the progress display and the
    stopping rule read after every iteration kept up to date: the finite values in order (insertion
    by bisection: O(log n) comparisons and a memmove), so the median and any order statistic cost
    O(1); and, once the invocation is over, its mean and sum of squares for the variance components.
    A Sequence of every value (NaN included), so stopping.decide reads it like a list."""

    def __init__(self) -> None:
        self.values: list[float] = []
        self.ordered: list[float] = []  # the finite values, sorted
        self._moments: tuple[float, float] | None = None

    def __len__(self) -> int:
        return len(self.values)

    @overload
    def __getitem__(self, i: int) -> float: ...
    @overload
    def __getitem__(self, i: slice) -> list[float]: ...
    def __getitem__(self, i: int | slice) -> float | list[float]:
        return self.values[i]

    def __iter__(self) -> Iterator[float]:
        return iter(self.values)

    def __eq__(self, other: object) -> bool:  # compares as the list of its values
        return self.values == (other.values if isinstance(other, RunningValues) else other)

    __hash__ = None  # type: ignore[assignment]  # mutable, as a list

    def __repr__(self) -> str:
        return f"RunningValues({self.values!r})"

    def add(self, value: float) -> None:
        self.values.append(value)
        if math.isfinite(value):
            bisect.insort(self.ordered, value)
        self._moments = None

    def median(self) -> float:
        return sorted_median(self.ordered)

    def moments(self) -> tuple[float, float]:
        """(mean, sum of squared deviations) of the finite values, as variance_components computes
        them; kept until the next value arrives (a finished invocation's never change)."""
        if self._moments is None:
            import numpy as np

            self._moments = invocation_moments(np.asarray(self.ordered_in_arrival(), dtype=float))
        return self._moments

    def ordered_in_arrival(self) -> list[float]:
        """The finite values in the order they arrived (the sums depend on the order)."""
        return [v for v in self.values if math.isfinite(v)]


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
    primary: RunningValues = field(default_factory=RunningValues)  # its samples' primary metric, kept sorted
    folded: int = 0  # how many of its samples ``primary`` holds

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
        out["medians"] = {metric: stats.median(metric_values(self.samples, metric))}  # once, at the end
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
    ordered: list[float] = field(default_factory=list)  # every primary-metric value but NaN, sorted: the running median

    @property
    def finished(self) -> bool:
        return self.stop is not None or self.failure is not None

    def release(self) -> None:
        """Drop what the cell measured once its result has been handed over (issue 36: a sweep's
        memory flat in its cells); whether it finished, and why, stay."""
        self.invocations, self.warmups, self.energy_readings, self.timeline, self.ordered = [], [], [], [], []
        self.begin, self.end, self.power_state, self.idle_marks = None, None, {}, ()

    def remaining_s(self) -> float | None:
        """What is left of the cell's time budget (None: no --cell-timeout)."""
        if self.cell.cell_timeout_s is None:
            return None
        return max(MIN_REMAINING_S, self.cell.cell_timeout_s - self.spent_s)

    def add(self, inv: Invocation, samples: Sequence[IterationSample]) -> None:
        """A batch's samples measured in ``inv``: kept, and the running statistics brought up to date."""
        inv.samples += samples
        self._fold()

    def _fold(self) -> None:
        """Fold the samples not yet counted into the running statistics: O(log n) per new value,
        never a pass over the earlier samples (samples appended to an invocation directly count too)."""
        for inv in self.invocations:
            if inv.folded == len(inv.samples):
                continue
            new = inv.samples[inv.folded :]
            inv.folded = len(inv.samples)
            for value in metric_values(new, self.cell.primary_metric):
                inv.primary.add(value)
                if not math.isnan(value):
                    bisect.insort(self.ordered, value)

    def running_median(self) -> float:
        """The median of the primary metric over every measured iteration (stats.median's value)."""
        self._fold()
        return sorted_percentile_50(self.ordered)

    @property
    def samples(self) -> list[IterationSample]:
        """Every measured iteration so far, invocation after invocation."""
        return [s for inv in self.invocations for s in inv.samples]

    def values(self) -> list[float]:
        """The primary metric of every measured iteration so far."""
        return metric_values(self.samples, self.cell.primary_metric)

    def per_invocation(self) -> list[RunningValues]:
        """The primary metric of the measured iterations, invocation by invocation (kept, not re-read)."""
        self._fold()
        return [inv.primary for inv in self.invocations]
