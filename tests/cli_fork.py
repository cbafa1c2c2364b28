"""`winml` for the tests without paying its imports each time: a fork server.

A test that runs `winml ARGS` spends most of that process's CPU importing the package and its
libraries (~1 CPU s of ~2 for a tiny `perf`), hundreds of times a session. One server per pytest
worker imports them once; each run is a fork of it that takes the test's argv, environment, working
folder and output files, then runs `winml_perf/__main__.py` exactly as `python -m winml_perf` does.
The run is a real process of its own (its exit code, its stdout and stderr, its children, the real
runtime); only the imports were done before it started.

What a fork cannot reproduce falls back to a plain subprocess (``RunServer.can_run``): a different
``LD_*`` or ``PYTHON*`` variable (read when the interpreter starts) or a variable that typer or rich
read when imported. The server holds no onnxruntime (its import starts a thread, and a fork copies
no threads); numpy's and scipy's OpenBLAS pools re-create their threads after a fork.
``WINML_PERF_TEST_FORK=0`` turns the server off."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path

#: Variables read at interpreter start or at import time: a run that changes one is a subprocess.
IMPORT_TIME_PREFIXES = ("LD_", "PYTHON", "TYPER_", "_TYPER_")
IMPORT_TIME_NAMES = {"TERMINAL_WIDTH", "FORCE_COLOR", "PY_COLORS", "GITHUB_ACTIONS", "OPENBLAS_NUM_THREADS"}


#: What a run imports after the package: typer's parameter adapters (pydantic), the record's schema
#: validator, the stores' SQL dialects, the intervals' t quantile. Never onnxruntime (a thread).
LIBRARIES = (
    "typer._adapters",
    "pydantic",
    "pydantic.main",
    "pydantic.type_adapter",
    "jsonschema",
    "jsonschema.validators",
    "jsonschema_specifications",
    "sqlalchemy.dialects.sqlite",
    "sqlalchemy.dialects.postgresql",
    "scipy.special",
    "psutil",
    "pynvml",
)


def _import_time(name: str) -> bool:
    return (name.startswith(IMPORT_TIME_PREFIXES) and name != "PYTHONUNBUFFERED") or name in IMPORT_TIME_NAMES


# -- the server (python -m tests.cli_fork) -----------------------------------------------------------
def _preload() -> None:
    """Every module of the package (none imports onnxruntime at import time) and what they pull in."""
    import importlib
    import pkgutil

    import winml_perf

    for module in pkgutil.walk_packages(winml_perf.__path__, "winml_perf."):
        if not module.name.endswith("__main__"):
            importlib.import_module(module.name)
    for name in LIBRARIES:
        with contextlib.suppress(ImportError):  # an optional extra not installed here
            importlib.import_module(name)


def _child(request: Mapping) -> None:
    """In the fork: become `python -m winml_perf ARGV` with the request's environment; never returns."""
    code = 1
    try:
        stdin = os.open(os.devnull, os.O_RDONLY)
        out = os.open(request["out"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        err = os.open(request["err"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        for fd, target in ((stdin, 0), (out, 1), (err, 2)):
            os.dup2(fd, target)
            os.close(fd)
        if request.get("cwd"):
            os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        sys.path[0] = os.getcwd()  # as `python -m` puts it
        sys.argv = ["-m", *request["argv"]]  # runpy writes __main__.py's path over argv[0]
        import runpy

        try:
            runpy.run_module("winml_perf", run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as stop:
            if stop.code is None or isinstance(stop.code, int):
                code = stop.code or 0
            else:
                print(stop.code, file=sys.stderr)
                code = 1
        except BaseException:  # what an uncaught exception does to `python -m`
            import traceback

            traceback.print_exc()
            code = 1
        import atexit

        atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        os._exit(code)


def _serve() -> None:
    _preload()
    reply = sys.stdout
    reply.write(json.dumps({"ready": True, "threads": len(os.listdir("/proc/self/task"))}) + "\n")
    reply.flush()
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            _child(request)
        deadline = time.monotonic() + float(request["timeout"])
        timed_out = False
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                _, status = os.waitpid(pid, 0)
                timed_out = True
                break
            time.sleep(0.005)
        reply.write(json.dumps({"returncode": os.waitstatus_to_exitcode(status), "timed_out": timed_out}) + "\n")
        reply.flush()


# -- the client (one per pytest worker) --------------------------------------------------------------
class RunServer:
    """The worker's handle on its fork server; ``run`` is used by tests.conftest.run_winml."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen | None = None
        self._env: dict[str, str] = {}
        self._broken = os.environ.get("WINML_PERF_TEST_FORK", "1") == "0" or not hasattr(os, "fork")

    def _start(self) -> None:
        self._env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "tests.cli_fork"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=self._env,
            cwd=Path(__file__).resolve().parents[1],
        )
        hello = self._proc.stdout.readline() if self._proc.stdout else ""
        if not hello.startswith('{"ready": true'):
            self._broken = True

    def can_run(self, env: Mapping[str, str]) -> bool:
        """A fork reproduces this run: every start-up variable is as the server started with."""
        if self._broken:
            return False
        keys = {k for k in {*env, *self._env} if _import_time(k)}
        return all(env.get(k) == self._env.get(k) for k in keys)

    def run(self, argv: list[str], env: Mapping[str, str], cwd, out: Path, err: Path, timeout: float) -> int | None:
        """The run's exit code, or None when this run must be a plain subprocess instead."""
        if not self._lock.acquire(blocking=False):
            return None  # another thread of this worker is using the server
        try:
            if self._proc is None and not self._broken:
                self._start()
            if not self.can_run(env) or self._proc is None or self._proc.poll() is not None:
                return None
            request = {"argv": argv, "env": dict(env), "cwd": str(cwd) if cwd else None}
            request |= {"out": str(out), "err": str(err), "timeout": timeout}
            assert self._proc.stdin and self._proc.stdout
            self._proc.stdin.write(json.dumps(request) + "\n")
            self._proc.stdin.flush()
            line = self._proc.stdout.readline()
            if not line:  # the server died (it never should): this run and the rest are subprocesses
                self._broken = True
                return None
            answer = json.loads(line)
            if answer["timed_out"]:
                raise subprocess.TimeoutExpired(["winml", *argv], timeout)
            return int(answer["returncode"])
        finally:
            self._lock.release()

    def close(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            assert self._proc.stdin
            self._proc.stdin.close()
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()


if __name__ == "__main__":
    _serve()
