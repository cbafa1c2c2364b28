"""The SQLite writers' queue: an exclusive lock on '<db>.lock' taken around each write transaction.

The wait has a deadline: the lock is tried without blocking and retried with short sleeps; after
``NOTICE_AFTER_S`` one line says who holds it, and at the deadline StoreLockTimeout (exit 2) names
the lock file. The holder's pid is written into the lock file while it holds the lock.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from winml_perf.support.errors import StoreError

#: Seconds a writer waits for the lock before giving up; $WINML_PERF_STORE_LOCK_TIMEOUT overrides.
LOCK_TIMEOUT_S = 120.0
LOCK_TIMEOUT_ENV = "WINML_PERF_STORE_LOCK_TIMEOUT"
#: Seconds of waiting before the wait is announced.
NOTICE_AFTER_S = 1.0


class StoreLockTimeout(StoreError):
    """Another process held the store's write lock past the deadline."""


def lock_timeout_s() -> float:
    text = os.environ.get(LOCK_TIMEOUT_ENV)
    if not text:
        return LOCK_TIMEOUT_S
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value < 1e7:
        raise StoreError(
            f"${LOCK_TIMEOUT_ENV}={text!r} is not a number of seconds above 0", f"e.g. {LOCK_TIMEOUT_ENV}=120"
        )
    return value


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


class WriterLock:
    """An exclusive inter-process lock on a file (flock on POSIX, filelock elsewhere) with a
    deadline; a thread lock in front of it makes one Store safe to share between threads. Re-entrant."""

    def __init__(self, path: Path, timeout_s: float | None = None, notice: Callable[[str], None] = _say) -> None:
        self.path = path
        self.timeout_s = timeout_s
        self.notice = notice
        self._fd: int | None = None
        self._depth = 0
        self._fallback: Any = None
        self._threads = threading.RLock()

    def __enter__(self) -> None:
        self._threads.acquire()
        self._depth += 1
        if self._depth > 1:
            return
        try:
            self._acquire_file(lock_timeout_s() if self.timeout_s is None else self.timeout_s)
        except BaseException:
            self._depth -= 1
            self._threads.release()
            raise

    def _timeout(self, waited: float) -> StoreLockTimeout:
        holder = self._holder()
        return StoreLockTimeout(
            f"the results store's write lock {self.path} was held by {holder} for {waited:.0f} s; gave up waiting",
            f"wait for that process, or raise ${LOCK_TIMEOUT_ENV} (seconds)",
        )

    def _holder(self) -> str:
        try:
            pid = self.path.read_text(encoding="ascii").strip()
        except (OSError, UnicodeDecodeError):
            pid = ""
        return f"pid {pid}" if pid.isdigit() else "another process"

    def _acquire_file(self, timeout_s: float) -> None:
        try:
            import fcntl
        except ImportError:  # Windows
            self._acquire_filelock(timeout_s)
            return
        if self._fd is None:
            try:
                self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
            except OSError as exc:
                raise StoreError(
                    f"cannot open the results store's lock file {self.path}: {exc.strerror or exc}",
                    "pass --store with a path in a writable folder",
                ) from None
        t0 = time.monotonic()
        delay, announced = 0.001, False
        while True:
            try:
                fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                pass
            waited = time.monotonic() - t0
            if waited >= timeout_s:
                raise self._timeout(waited)
            if not announced and waited >= NOTICE_AFTER_S:
                self.notice(
                    f"waiting for the results store's lock {self.path}, held by {self._holder()} "
                    f"(gives up after {timeout_s:g} s)"
                )
                announced = True
            time.sleep(min(delay, max(0.0, timeout_s - waited)))
            delay = min(delay * 2, 0.02)
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, str(os.getpid()).encode(), 0)

    def _acquire_filelock(self, timeout_s: float) -> None:
        from filelock import FileLock, Timeout

        self._fallback = self._fallback or FileLock(str(self.path), poll_interval=0.002)
        try:
            self._fallback.acquire(timeout=timeout_s)
        except Timeout:
            raise self._timeout(timeout_s) from None

    def __exit__(self, *exc: object) -> None:
        try:
            self._depth -= 1
            if self._depth == 0:
                if self._fallback is not None:
                    self._fallback.release()
                else:
                    import fcntl

                    os.ftruncate(self._fd, 0)  # no stale pid for the next waiter to name
                    fcntl.flock(self._fd, fcntl.LOCK_UN)
        finally:
            self._threads.release()

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
