"""Every child process winml-perf starts is started here, and every one reports its end the same way.

The ways to start one:

* ``run_module(MODULE, ARGS, context, timeout_s)``: ``python -m winml_perf.ep.child MODULE ARGS``. The
  child applies the context, then returns ``MODULE.main(ARGS)`` as its exit status; its stdout and
  stderr come back captured (compile, prepare, the bandwidth probe).
* ``Worker(target, args, context)``: a multiprocessing "spawn" process that applies the context,
  then runs ``target(conn, *args)`` against one end of a Pipe (isolated measurement cells).
* ``started_pool(jobs, context, setup, args)``: a pool of ``jobs`` spawned processes that applied the
  context and ran ``setup``, started before its items are known, so their start overlaps the parent's
  own work (the dashboard's pages: it lists its series meanwhile).
* ``one_process_pool(context, setup, args)``: an executor of one spawned process that applied the
  context, then ran ``setup(*args)``; work submitted runs there in order, and what one item leaves
  behind (a loaded model) is there for the next (the equivalence check's pass lanes).
* ``run_command(ARGV, timeout_s)``: an external program (git, sysctl, nvidia-smi, onnxruntime-genai's
  model builder); no context, since it is not ours.

A ``ChildContext`` is what the parent hands every child of its own: the plugin EP libraries it
registered ('NAME=PATH', registered again in the child before anything else), environment variables
it decided, its ``sys.path`` (so the child imports the same code), and a verbosity (above 0 lowers
onnxruntime's log threshold in the child). A child that overruns its timeout is killed.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import json
import multiprocessing as mp
import os
import signal as _signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CONTEXT_ENV = "WINML_PERF_CHILD_CONTEXT"  # the context, as JSON, for a run_module child
FAILED = 3  # the exit status of a module child whose work raised
ERROR_MARK = "winml-perf child error: "  # starts the line exit_status writes, so failure() finds it among native logs
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])  # the folder that holds this winml_perf


@dataclass(frozen=True)
class ChildContext:
    """What a child gets from its parent (see the module doc)."""

    plugin_libraries: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    sys_path: tuple[str, ...] = ()
    verbosity: int = 0

    @classmethod
    def from_parent(
        cls, plugin_libraries: Sequence[str] | None = None, env: Mapping[str, str] | None = None, verbosity: int = 0
    ) -> ChildContext:
        """This process's context: its registered plugins (unless given), ``env`` and its sys.path."""
        if plugin_libraries is None:
            from winml_perf.ep import plugins

            plugin_libraries = plugins.registered_specs()
        return cls(tuple(plugin_libraries), dict(env or {}), tuple(sys.path), verbosity)

    def to_json(self) -> str:
        return json.dumps(
            {
                "plugin_libraries": list(self.plugin_libraries),
                "env": dict(self.env),
                "sys_path": list(self.sys_path),
                "verbosity": self.verbosity,
            }
        )

    @classmethod
    def from_json(cls, text: str) -> ChildContext:
        data = json.loads(text)
        return cls(tuple(data["plugin_libraries"]), dict(data["env"]), tuple(data["sys_path"]), int(data["verbosity"]))


def apply(context: ChildContext) -> None:
    """In the child, first thing: environment, sys.path, plugins, verbosity. A plugin that fails to
    register is reported on stderr and only matters to whoever uses its EP (they get its error)."""
    os.environ.update(context.env)
    sys.path[:0] = [p for p in context.sys_path if p not in sys.path]
    if context.plugin_libraries:
        from winml_perf.ep import plugins

        try:
            plugins.register_plugin_eps(context.plugin_libraries, env={}, discover=False)
        except Exception as exc:
            print(f"plugin registration: {exc}", file=sys.stderr)
    if context.verbosity > 0:
        import onnxruntime as ort

        ort.set_default_logger_severity(max(0, 2 - context.verbosity))


# -- how a child ended ----------------------------------------------------------------------------
@dataclass(frozen=True)
class ChildExit:
    exit_code: int | None  # None when a signal ended it, or it has not ended
    signal: int | None = None
    signal_name: str | None = None
    timed_out: bool = False
    timeout_s: float | None = None

    @classmethod
    def of(cls, returncode: int | None, timed_out: bool = False, timeout_s: float | None = None) -> ChildExit:
        """From a subprocess/multiprocessing return code (negative: the signal that ended it)."""
        if returncode is None or returncode >= 0:
            return cls(returncode, None, None, timed_out, timeout_s)
        try:
            name = _signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return cls(None, -returncode, name, timed_out, timeout_s)

    @property
    def text(self) -> str:
        if self.timed_out:
            return f"did not finish within {self.timeout_s:g} s and was killed"
        if self.signal is not None:
            return f"was killed by {self.signal_name}"
        if self.exit_code is None:
            return "did not exit"
        return f"exited with code {self.exit_code}"

    def to_dict(self) -> dict[str, Any]:
        return {"exit_code": self.exit_code, "signal": self.signal, "signal_name": self.signal_name, "text": self.text}


def describe_exit(returncode: int | None) -> dict[str, Any]:
    """A return code -> exit_code / signal / signal_name and a phrase."""
    return ChildExit.of(returncode).to_dict()


@dataclass(frozen=True)
class ChildResult:
    exit: ChildExit
    stdout: str
    stderr: str
    wall_s: float

    @property
    def ok(self) -> bool:
        return self.exit.exit_code == 0 and not self.exit.timed_out

    def failure(self) -> str:
        """The error line ``exit_status`` wrote (native libraries may log after it), else the child's last
        stderr line, else how it ended."""
        lines = [ln for ln in self.stderr.strip().splitlines() if ln.strip()]
        marked = [ln[len(ERROR_MARK) :] for ln in lines if ln.startswith(ERROR_MARK)]
        return marked[-1] if marked else lines[-1] if lines else f"child {self.exit.text}"


# -- starting children ----------------------------------------------------------------------------
def run_module(module: str, args: Sequence[str], context: ChildContext, timeout_s: float | None = None) -> ChildResult:
    """``MODULE.main(args)`` in a fresh Python that applied ``context`` first."""
    env = {**os.environ, **context.env, CONTEXT_ENV: context.to_json()}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (_PACKAGE_ROOT, env.get("PYTHONPATH")) if p)
    return _run([sys.executable, "-m", "winml_perf.ep.child", module, *map(str, args)], env, timeout_s, None)


def run_command(
    argv: Sequence[str], timeout_s: float | None = None, cwd: str | os.PathLike[str] | None = None
) -> ChildResult:
    """An external program; OSError when it cannot be started (e.g. not installed)."""
    return _run([str(a) for a in argv], None, timeout_s, cwd)


def _run(
    argv: list[str], env: Mapping[str, str] | None, timeout_s: float | None, cwd: str | os.PathLike[str] | None
) -> ChildResult:
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        errors="replace",
        env=env,
        cwd=cwd,
    )
    timed_out = False
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        timed_out = True
    except BaseException:  # interrupted: never leave the child running
        proc.kill()
        proc.wait()
        raise
    from winml_perf.support.stdio import without_native_noise

    return ChildResult(
        ChildExit.of(proc.returncode, timed_out, timeout_s),
        without_native_noise(out or ""),
        without_native_noise(err or ""),  # where a child's output is read: libQnnHtp's LIBNATIVE line left out
        time.perf_counter() - t0,
    )


def _worker_main(context: ChildContext, target: Callable[..., None], conn: Any, args: tuple[Any, ...]) -> None:
    from winml_perf.support.stdio import own_stdout

    with own_stdout():  # a worker inherits the parent's fds; keep native prints off its stdout all the same
        apply(context)
        target(conn, *args)
    # The work is done and answered: let the interpreter's final collections skip every live object
    # (they took ~0.15 s of each invocation's exit, which the parent waits for).
    gc.freeze()


_tracker_started = False


def _mp_context(start_method: str) -> Any:  # Any: typeshed's BaseContext lacks the Process each one has
    """multiprocessing's context for ``start_method``, with its resource tracker started first (POSIX,
    not fork) while fd 1 points at stderr. The tracker lives until this process exits and keeps the
    fd 1 it was started with; started on support/stdio.own_stdout's pipe, it held that pipe open,
    so every CLI command that spawned a child waited out own_stdout's 1 s timeout at its exit."""
    global _tracker_started
    if os.name == "posix" and start_method != "fork" and not _tracker_started:
        from multiprocessing import resource_tracker

        _tracker_started = True  # once a process: the tracker it starts outlives every child

        try:
            saved = os.dup(1)
        except OSError:  # no fd 1: none to hold open
            return mp.get_context(start_method)
        try:
            with contextlib.suppress(OSError):  # no fd 2: the tracker starts as it would have
                os.dup2(2, 1)  # what the tracker may print goes to stderr, where own_stdout's pipe sends it
            resource_tracker.ensure_running()
        finally:
            os.dup2(saved, 1)
            os.close(saved)
    return mp.get_context(start_method)


class Worker:
    """A spawned child running ``target(conn, *args)``; the parent talks to it over ``conn``."""

    def __init__(
        self,
        target: Callable[..., None],
        args: tuple[Any, ...],
        context: ChildContext,
        name: str,
        start_method: str = "spawn",
    ) -> None:
        ctx = _mp_context(start_method)
        parent_conn, child_conn = ctx.Pipe(duplex=True)
        self._proc = ctx.Process(
            target=_worker_main, args=(context, target, child_conn, tuple(args)), name=name, daemon=True
        )
        # Ctrl-C reaches the whole process group; the parent ends its children. Blocked while the child
        # starts, SIGINT stays blocked in it (a signal mask survives exec), so one arriving while it
        # imports prints no traceback of its own; the parent gets its own SIGINT once unblocked.
        if not hasattr(_signal, "pthread_sigmask"):  # Windows: no signal masks (Ctrl-C reaches each process)
            self._proc.start()
        else:
            mask = _signal.pthread_sigmask(_signal.SIG_BLOCK, {_signal.SIGINT})
            try:
                self._proc.start()
            finally:
                _signal.pthread_sigmask(_signal.SIG_SETMASK, mask)
        child_conn.close()  # so the parent sees EOF when the child dies
        self.conn = parent_conn

    @property
    def pid(self) -> int | None:
        pid: int | None = self._proc.pid
        return pid

    @property
    def alive(self) -> bool:
        return bool(self._proc.is_alive())

    def kill(self) -> None:
        self._proc.kill()

    def end(self, grace_s: float, terminate_first: bool) -> ChildExit:
        """Wait up to ``grace_s`` for the child to exit, then end it (SIGTERM first when asked, then
        SIGKILL); close the pipe and say how it ended."""
        self._proc.join(timeout=grace_s)
        if self._proc.is_alive() and terminate_first:
            self._proc.terminate()
            self._proc.join(timeout=grace_s)
        if self._proc.is_alive():
            self._proc.kill()
            self._proc.join()
        code = self._proc.exitcode
        self.conn.close()
        self._proc.close()
        return ChildExit.of(code)


def started_pool(
    jobs: int,
    context: ChildContext,
    setup: Callable[..., None] | None = None,
    args: tuple[Any, ...] = (),
    now: int | None = None,
    start_method: str = "spawn",
) -> Any:
    """A ProcessPoolExecutor of up to ``jobs`` spawned processes that applied ``context`` and then
    ran ``setup(*args)`` (both importable by name), ``now`` of them (default: all) started now: for
    work whose items are known later, so the processes' start (their imports) overlaps the caller's
    own work; the rest start as items wait for one. The caller maps its items on it and ends it
    with ``shutdown(wait=True, cancel_futures=True)``."""
    pool = _pool(max(1, jobs), context, setup, args, start_method)
    for _ in range(max(1, jobs if now is None else min(jobs, now))):
        pool.submit(os.getpid)  # a task that finds no idle process starts one
    return pool


def _pool(
    workers: int, context: ChildContext, setup: Callable[..., None] | None, args: tuple[Any, ...], start_method: str
) -> Any:
    """A ProcessPoolExecutor of up to ``workers`` processes that apply ``context``, then run ``setup(*args)``."""
    from concurrent.futures import ProcessPoolExecutor

    return ProcessPoolExecutor(
        max_workers=workers,
        mp_context=_mp_context(start_method),
        initializer=_apply_then,
        initargs=(context, setup, args),
    )


def _apply_then(context: ChildContext, setup: Callable[..., None] | None, args: tuple[Any, ...]) -> None:
    apply(context)
    if setup is not None:
        setup(*args)


def one_process_pool(
    context: ChildContext,
    setup: Callable[..., None] | None = None,
    args: tuple[Any, ...] = (),
    start_method: str = "spawn",
) -> Any:
    """A ProcessPoolExecutor of one spawned process that applied ``context`` and then ran ``setup(*args)``
    (both importable by name). Its work runs in the order submitted, in that one process; a process
    that dies breaks the executor (its futures raise BrokenProcessPool)."""
    return _pool(1, context, setup, args, start_method)


def exit_status(work: Callable[[], None]) -> int:
    """In a module child: 0 when ``work()`` returns, else FAILED with ``Type: message`` on stderr
    (the line the parent's ChildResult.failure() reports)."""
    try:
        work()
    except Exception as exc:
        print(f"{ERROR_MARK}{type(exc).__name__}: {' '.join(str(exc).split())}", file=sys.stderr, flush=True)
        return FAILED
    return 0


# -- child entry: python -m winml_perf.ep.child MODULE ARGS... ---------------------------------------
def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        print("usage: python -m winml_perf.ep.child MODULE [ARGS...]", file=sys.stderr)
        return 2
    from winml_perf.support.stdio import own_stdout

    context = ChildContext.from_json(os.environ.pop(CONTEXT_ENV, "") or ChildContext().to_json())
    with own_stdout():  # what EP libraries print on fd 1 goes to stderr; the module's own output stays on stdout
        apply(context)
        return int(importlib.import_module(args[0]).main(args[1:]) or 0)


if __name__ == "__main__":
    sys.exit(main())
