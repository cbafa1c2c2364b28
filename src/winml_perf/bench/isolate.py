"""Run a route's session in its own child process (spawn), driven over a multiprocessing Pipe.

Protocol (parent -> child, one request at a time, each answered by one reply):

    ("load",)                       -> ("ok", load_info)
    ("begin_cell", CellSpec)        -> ("ok", {prompt_info, warmup_samples, ...})
    ("run_batch", n, round, warmup) -> ("ok", {samples, wall_s})
    ("end_cell",)                   -> ("ok", {memory, route_actual?})
    ("exit",)                       -> the child closes the pipe and exits 0

A Python exception in the child answers ("error", {...}) and the child lives on (the cell fails,
the next cell can use the same loaded session). A child that dies (a crash, a signal, os._exit)
closes its end of the pipe: the parent sees EOF, reaps it and raises ChildCrashed with the exit
code or signal. A child that does not answer within the deadline is killed: ChildTimeout.
The child stays loaded between requests, so an interleaved sweep never reloads a model per round.
"""

from __future__ import annotations

import multiprocessing as mp
import signal as _signal
import time
import traceback
from typing import Any, Callable

from winml_perf.bench.spec import CellSpec, SessionSpec

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


def _error_reply(exc: BaseException) -> tuple[str, dict]:
    return (
        "error",
        {
            "error_type": type(exc).__name__,
            "message": getattr(exc, "message", None) or str(exc) or type(exc).__name__,
            "remedy": getattr(exc, "remedy", None),
            "traceback": traceback.format_exc(),
        },
    )


def child_main(conn, spec: SessionSpec, session_factory: Callable, sample_memory: bool) -> None:
    """Entry point of the child: serve requests until "exit" or EOF."""
    from winml_perf.bench.host import SessionHost

    host = SessionHost(spec, session_factory, sample_memory=sample_memory)
    try:
        while True:
            try:
                msg = conn.recv()
            except EOFError:
                return
            op = msg[0]
            if op == "exit":
                return
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
                    reply = ("error", {"error_type": "ProtocolError", "message": f"unknown request {op!r}"})
            except Exception as exc:  # reported to the parent; the child stays usable
                reply = _error_reply(exc)
            conn.send(reply)
    finally:
        host.close()
        conn.close()


def describe_exit(exitcode: int | None) -> dict[str, Any]:
    """multiprocessing exit code -> exit_code / signal / signal_name and a phrase."""
    if exitcode is None:
        return {"exit_code": None, "signal": None, "signal_name": None, "text": "did not exit"}
    if exitcode < 0:
        sig = -exitcode
        try:
            name = _signal.Signals(sig).name
        except ValueError:
            name = f"signal {sig}"
        return {"exit_code": None, "signal": sig, "signal_name": name, "text": f"was killed by {name}"}
    return {"exit_code": exitcode, "signal": None, "signal_name": None, "text": f"exited with code {exitcode}"}


class ChildHost:
    """Parent-side handle of a child SessionHost; same methods as SessionHost, each taking an
    optional ``timeout_s`` (None waits forever)."""

    def __init__(self, spec: SessionSpec, session_factory: Callable, sample_memory: bool = True, context: str = "spawn") -> None:
        self.spec = spec
        self.session_factory = session_factory
        self.sample_memory = sample_memory
        self._ctx = mp.get_context(context)
        self._proc = None
        self._conn = None
        self.load_info: dict[str, Any] = {}

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.is_alive()

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def _start(self) -> None:
        parent_conn, child_conn = self._ctx.Pipe(duplex=True)
        proc = self._ctx.Process(
            target=child_main, args=(child_conn, self.spec, self.session_factory, self.sample_memory),
            name=f"winml-perf-cell:{self.spec.path}", daemon=True,
        )
        proc.start()
        child_conn.close()  # so the parent sees EOF when the child dies
        self._proc, self._conn = proc, parent_conn

    def _reap(self) -> dict[str, Any]:
        proc = self._proc
        proc.join(timeout=EXIT_GRACE_S)
        if proc.is_alive():
            proc.kill()
            proc.join(timeout=EXIT_GRACE_S)
        info = describe_exit(proc.exitcode)
        self._drop()
        return info

    def _drop(self) -> None:
        if self._conn is not None:
            self._conn.close()
        if self._proc is not None and not self._proc.is_alive():
            self._proc.close()
        self._proc = self._conn = None

    def _request(self, msg: tuple, timeout_s: float | None, what: str) -> Any:
        if self._proc is None:
            self._start()
        try:
            self._conn.send(msg)
            ready = self._conn.poll(timeout_s)
        except (BrokenPipeError, ConnectionResetError, EOFError, OSError):
            ready = True
        if not ready:
            pid = self._proc.pid
            self._proc.kill()
            info = self._reap()
            raise ChildTimeout(
                f"child {pid} gave no answer to {what} within the {timeout_s:.1f} s left of its time budget and was killed",
                **{k: v for k, v in info.items() if k != "text"},
            )
        try:
            status, payload = self._conn.recv()
        except (EOFError, ConnectionResetError, OSError):
            pid = self._proc.pid
            info = self._reap()
            raise ChildCrashed(f"child {pid} {info['text']} during {what}", **{k: v for k, v in info.items() if k != "text"})
        if status == "error":
            raise ChildError(payload.pop("message"), **payload)
        return payload

    # -- the SessionHost surface ---------------------------------------------------------------
    def load(self, timeout_s: float | None = None) -> dict[str, Any]:
        self.load_info = self._request(("load",), timeout_s, "load")
        return self.load_info

    def begin_cell(self, cell: CellSpec, timeout_s: float | None = None) -> dict[str, Any]:
        return self._request(("begin_cell", cell), timeout_s, "warmup")

    def run_batch(self, n: int, round_index: int, warmup: int = 0, timeout_s: float | None = None) -> dict[str, Any]:
        return self._request(("run_batch", n, round_index, warmup), timeout_s, f"iterations of round {round_index}")

    def end_cell(self, timeout_s: float | None = None) -> dict[str, Any]:
        return self._request(("end_cell",), timeout_s, "end of cell")

    def close(self) -> None:
        if self._proc is None:
            return
        try:
            self._conn.send(("exit",))
        except (BrokenPipeError, OSError):
            pass
        deadline = time.monotonic() + EXIT_GRACE_S
        self._proc.join(timeout=max(0.0, deadline - time.monotonic()))
        if self._proc.is_alive():
            self._proc.terminate()
            self._proc.join(timeout=EXIT_GRACE_S)
            if self._proc.is_alive():
                self._proc.kill()
                self._proc.join()
        self._drop()
