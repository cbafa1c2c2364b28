"""Run a route's session in its own child process (a child.Worker), driven over its Pipe.

Protocol (parent -> child, one request at a time, each answered by one reply):

    ("load",)                       -> ("ok", LoadReply)
    ("begin_cell", CellSpec)        -> ("ok", BeginReply)
    ("run_batch", n, round, warmup) -> ("ok", BatchReply)
    ("end_cell",)                   -> ("ok", EndReply)
    ("exit",)                       -> the child closes the pipe and exits 0

The replies are measure/hosting/replies.py's dataclasses. A Python exception in the child answers
("error", ErrorReply) and the child lives on (the cell fails, the next cell can use the same
loaded session). A child that dies (a crash, a signal, os._exit) closes its end of the pipe: the
parent sees EOF, reaps it and raises ChildCrashed with the exit code or signal. A child that does not answer within the deadline is killed: ChildTimeout.
The child stays loaded between requests, so an interleaved sweep never reloads a model per round.
It starts with the spec's plugin EP libraries registered (child.ChildContext).
"""

from __future__ import annotations

import signal
import traceback
from collections.abc import Callable
from typing import Any

from winml_perf.ep import child
from winml_perf.measure.hosting.replies import BatchReply, BeginReply, EndReply, ErrorReply, LoadReply
from winml_perf.model.spec import CellSpec, SessionSpec

#: Seconds to wait for a child to exit on its own after "exit" before terminating it.
EXIT_GRACE_S = 5.0


class ChildFailure(Exception):
    """Base of the ways a child can fail the parent's request."""

    kind = "error"

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details = details


class ChildError(ChildFailure):
    """The child raised a Python exception (details: error_type, remedy, traceback)."""

    kind = "error"


class ChildCrashed(ChildFailure):
    """The child process died (details: exit_code, signal, signal_name)."""

    kind = "crash"


class ChildTimeout(ChildFailure):
    """The child did not answer in time and was killed."""

    kind = "timeout"


def _error_reply(exc: BaseException) -> tuple[str, ErrorReply]:
    return (
        "error",
        ErrorReply(
            error_type=type(exc).__name__,
            message=getattr(exc, "message", None) or str(exc) or type(exc).__name__,
            remedy=getattr(exc, "remedy", None),
            traceback=traceback.format_exc(),
        ),
    )


def child_main(
    conn: Any, spec: SessionSpec, session_factory: Callable[[SessionSpec], Any], sample_memory: bool, meter: Any = None
) -> None:
    """Entry point of the child: serve requests until "exit" or EOF."""
    from winml_perf.measure.hosting.session_host import SessionHost

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group: the parent stops us
    host = SessionHost(spec, session_factory, sample_memory=sample_memory, meter=meter)
    try:
        while True:
            try:
                msg = conn.recv()
            except EOFError:
                return
            op = msg[0]
            if op == "exit":
                return
            reply: tuple[str, object]  # ("ok", a measure/hosting/replies.py reply) or ("error", ErrorReply)
            try:
                if op == "load":
                    reply = ("ok", host.load())
                elif op == "begin_cell":
                    reply = ("ok", host.begin_cell(msg[1]))
                elif op == "run_batch":
                    reply = ("ok", host.run_batch(msg[1], msg[2], msg[3]))
                elif op == "end_cell":
                    reply = ("ok", host.end_cell())
                else:
                    reply = ("error", ErrorReply("ProtocolError", f"unknown request {op!r}"))
            except Exception as exc:  # reported to the parent; the child stays usable
                reply = _error_reply(exc)
            conn.send(reply)
    except (BrokenPipeError, ConnectionResetError):  # the parent is gone: nobody to answer
        return
    finally:
        host.close()
        conn.close()


class ChildHost:
    """Parent-side handle of a child SessionHost; same methods as SessionHost, each taking an
    optional ``timeout_s`` (None waits forever)."""

    def __init__(
        self,
        spec: SessionSpec,
        session_factory: Callable[[SessionSpec], Any],
        sample_memory: bool = True,
        context: str = "spawn",
        meter: Any = None,
    ) -> None:
        self.spec = spec
        self.session_factory = session_factory
        self.sample_memory = sample_memory
        self.meter = meter  # picklable until read: the child opens its own
        self._start_method = context
        self._worker: child.Worker | None = None
        self.load_info: LoadReply | None = None

    @property
    def alive(self) -> bool:
        return self._worker is not None and self._worker.alive

    @property
    def pid(self) -> int | None:
        return self._worker.pid if self._worker is not None else None

    def _start(self) -> child.Worker:
        context = child.ChildContext.from_parent(self.spec.plugin_libraries)
        self._worker = worker = child.Worker(
            child_main,
            (self.spec, self.session_factory, self.sample_memory, self.meter),
            context,
            f"winml-perf-cell:{self.spec.path}",
            self._start_method,
        )
        return worker

    def _end(self, terminate_first: bool) -> dict[str, Any]:
        worker, self._worker = self._worker, None
        assert worker is not None  # ended only while a child runs
        return worker.end(EXIT_GRACE_S, terminate_first).to_dict()

    def _request(self, msg: tuple[Any, ...], timeout_s: float | None, what: str) -> Any:
        worker = self._worker if self._worker is not None else self._start()
        conn = worker.conn
        try:
            conn.send(msg)
            ready = conn.poll(timeout_s)
        except (BrokenPipeError, ConnectionResetError, EOFError, OSError):
            ready = True
        if not ready:
            pid = worker.pid
            worker.kill()
            info = self._end(terminate_first=False)
            raise ChildTimeout(
                f"child {pid} gave no answer to {what} within the {timeout_s:.1f} s left of its time budget and was killed",
                **{k: v for k, v in info.items() if k != "text"},
            )
        try:
            status, payload = conn.recv()
        except (EOFError, ConnectionResetError, OSError):
            pid = worker.pid
            info = self._end(terminate_first=False)
            crashed = {k: v for k, v in info.items() if k != "text"}
            raise ChildCrashed(f"child {pid} {info['text']} during {what}", **crashed) from None
        if status == "error":
            error: ErrorReply = payload
            raise ChildError(error.message, error_type=error.error_type, remedy=error.remedy, traceback=error.traceback)
        return payload

    # -- the SessionHost surface ---------------------------------------------------------------
    def load(self, timeout_s: float | None = None) -> LoadReply:
        self.load_info = self._request(("load",), timeout_s, "load")
        return self.load_info

    def begin_cell(self, cell: CellSpec, timeout_s: float | None = None) -> BeginReply:
        reply: BeginReply = self._request(("begin_cell", cell), timeout_s, "warmup")
        return reply

    def run_batch(self, n: int, round_index: int, warmup: int = 0, timeout_s: float | None = None) -> BatchReply:
        reply: BatchReply = self._request(
            ("run_batch", n, round_index, warmup), timeout_s, f"iterations of round {round_index}"
        )
        return reply

    def end_cell(self, timeout_s: float | None = None) -> EndReply:
        reply: EndReply = self._request(("end_cell",), timeout_s, "end of cell")
        return reply

    def kill(self) -> None:
        """Stop the child at once (an interrupted run does not wait for its current request)."""
        if self._worker is not None:
            self._worker.kill()
            self._end(terminate_first=False)

    def close(self) -> None:
        if self._worker is None:
            return
        try:
            self._worker.conn.send(("exit",))
        except (BrokenPipeError, OSError):
            pass
        self._end(terminate_first=True)
