"""Progress display: a rich progress bar on stderr (cell, iteration, running median), or nothing.

The runner calls these hooks between batches, never inside a timing loop.
"""

from __future__ import annotations

import math
import sys
from typing import TYPE_CHECKING, Any, Protocol

from winml_perf.model.metrics import get
from winml_perf.support.human_numbers import human

if TYPE_CHECKING:
    from rich.progress import TaskID


class Progress(Protocol):
    def sweep_started(self, total_cells: int) -> None: ...
    def cell_started(self, key: str, planned: int | None) -> None: ...
    def cell_advanced(self, key: str, done: int, planned: int | None, metric: str, running_median: float) -> None: ...
    def cell_finished(self, key: str, status: str, summary: str) -> None: ...
    def sweep_finished(self) -> None: ...


class NullProgress:
    """Silent (--quiet, --format json without a terminal, tests)."""

    def sweep_started(self, total_cells: int) -> None:
        pass

    def cell_started(self, key: str, planned: int | None) -> None:
        pass

    def cell_advanced(self, key: str, done: int, planned: int | None, metric: str, running_median: float) -> None:
        pass

    def cell_finished(self, key: str, status: str, summary: str) -> None:
        pass

    def sweep_finished(self) -> None:
        pass


def _fmt(metric: str, value: float) -> str:
    if value is None or math.isnan(value):
        return "-"
    m = get(metric)
    unit = m.short_unit if m else ""
    return f"{human(value)} {unit}".strip()  # as the table will show it


def _shown(text: str) -> str:
    """A name as rich may print it: secrets masked, controls escaped, rich markup inert."""
    from rich.markup import escape

    from winml_perf.support.secrets import mask
    from winml_perf.support.terminal_text import clean_line

    return escape(clean_line(mask(str(text))))


class RichProgress:
    """One bar per cell under an overall bar, on stderr; lines for finished cells stay."""

    def __init__(self, console: Any = None) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn, TimeRemainingColumn
        from rich.progress import Progress as _RichProgress

        from winml_perf.support.stdio import unguarded

        # rich writes its own escape codes, so it gets the stream under the CLI's guard; every name
        # it shows passes the one redaction and terminal sanitiser here (_shown)
        self.console = console or Console(file=unguarded(sys.stderr))
        self._bar = _RichProgress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[median]}"),
            TimeElapsedColumn(),
            TextColumn("eta"),
            TimeRemainingColumn(),
            console=self.console,
            transient=False,
        )
        self._tasks: dict[str, Any] = {}
        self._overall: TaskID | None = None

    def sweep_started(self, total_cells: int) -> None:
        self._bar.start()
        self._overall = self._bar.add_task("cells", total=total_cells, median="")

    def cell_started(self, key: str, planned: int | None) -> None:
        self._tasks[key] = self._bar.add_task(_shown(key), total=planned, median="")

    def cell_advanced(self, key: str, done: int, planned: int | None, metric: str, running_median: float) -> None:
        task = self._tasks.get(key)
        if task is not None:
            self._bar.update(task, completed=done, total=planned, median=f"median {_fmt(metric, running_median)}")

    def cell_finished(self, key: str, status: str, summary: str) -> None:
        task = self._tasks.pop(key, None)
        if task is not None:
            self._bar.remove_task(task)
        mark = "[green]ok[/green]" if status == "ok" else "[red]FAILED[/red]"
        self._bar.console.print(f"{mark} {_shown(key)}  {_shown(summary)}", highlight=False)
        if self._overall is not None:
            self._bar.advance(self._overall)

    def sweep_finished(self) -> None:
        self._bar.stop()


def make_progress(quiet: bool) -> Progress:
    return NullProgress() if quiet else RichProgress()
