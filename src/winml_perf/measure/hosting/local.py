"""The hosts a runner drives a route's session through, one surface for both: ChildHost (a child
process, measure/hosting/isolate.py) and LocalHost (this process); both answer with measure/hosting/replies.py.
A host's failure becomes the cell's CellFailure here."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

from winml_perf.measure.hosting.isolate import ChildError, ChildFailure, ChildHost, ChildTimeout
from winml_perf.measure.hosting.replies import BatchReply, BeginReply, EndReply, LoadReply
from winml_perf.measure.hosting.session_host import SessionHost
from winml_perf.model.result import CellFailure
from winml_perf.model.spec import CellSpec, SessionSpec

P = ParamSpec("P")
T = TypeVar("T")


class LocalHost(SessionHost):
    """SessionHost in this process with ChildHost's surface: timeouts accepted (checked by the
    runner after the fact: an in-process call cannot be interrupted) and errors as ChildError."""

    def _call(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return fn(*args, **kwargs)
        except (KeyboardInterrupt, SystemExit):
            raise
        except Exception as exc:
            import traceback

            raise ChildError(
                getattr(exc, "message", None) or str(exc) or type(exc).__name__,
                error_type=type(exc).__name__,
                remedy=getattr(exc, "remedy", None),
                traceback=traceback.format_exc(),
            ) from exc

    @property
    def alive(self) -> bool:
        return self.session is not None

    def load(self, timeout_s: float | None = None) -> LoadReply:
        return self._call(super().load)

    def begin_cell(self, cell: CellSpec, timeout_s: float | None = None) -> BeginReply:
        return self._call(super().begin_cell, cell)

    def run_batch(self, n: int, round_index: int, warmup: int = 0, timeout_s: float | None = None) -> BatchReply:
        return self._call(super().run_batch, n, round_index, warmup)

    def end_cell(self, timeout_s: float | None = None) -> EndReply:
        return self._call(super().end_cell)


#: The surface both hosts offer the runner.
Host = ChildHost | LocalHost


def new_host(
    spec: SessionSpec,
    session_factory: Callable[[SessionSpec], Any],
    *,
    isolate: bool,
    sample_memory: bool,
    meter: Any = None,
) -> Host:
    """A host for a route's session: in a child process of its own with isolation, else in this one.
    ``meter``: the energy meter it reads at phase boundaries (None: energy not measured)."""
    cls = ChildHost if isolate else LocalHost
    return cls(spec, session_factory, sample_memory=sample_memory, meter=meter)


def cell_failure(exc: ChildFailure, phase: str, cell: CellSpec | None = None) -> CellFailure:
    """The cell's failure from a host's error; a timeout names --cell-timeout and what to try."""
    d = exc.details
    message, remedy = exc.message, d.get("remedy")
    if exc.kind == ChildTimeout.kind and cell is not None and cell.cell_timeout_s is not None:
        if "--cell-timeout" not in message:
            message += f" (--cell-timeout {cell.cell_timeout_s:g} s)"
        remedy = remedy or "raise --cell-timeout, or look for a hang in this route (an EP or driver deadlock)"
    return CellFailure(
        kind=exc.kind,
        message=message,
        remedy=remedy,
        error_type=d.get("error_type"),
        exit_code=d.get("exit_code"),
        signal=d.get("signal"),
        signal_name=d.get("signal_name"),
        traceback=d.get("traceback"),
        phase=phase,
    )
