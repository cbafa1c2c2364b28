"""The SQLite writers' queue: an exclusive lock on '<db>.lock' taken around each write transaction.

The wait has a deadline: the lock is tried without blocking and retried with short sleeps; after
``NOTICE_AFTER_S`` one line says who holds it, and at the deadline StoreLockTimeout (exit 2) names
the lock file. The holder's pid is written into the lock file while it holds the lock. The lock
itself is filelock's (one lock on every platform, as bundle/cache.py's Windows path uses).
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path

from filelock import FileLock, Timeout

from winml_perf.support.errors import StoreError

#: Seconds a writer waits for the lock before giving up; $WINML_PERF_STORE_LOCK_TIMEOUT overrides.
LOCK_TIMEOUT_S = 120.0
LOCK_TIMEOUT_ENV = "WINML_PERF_STORE_LOCK_TIMEOUT"
#: Seconds of waiting before the wait is announced.
NOTICE_AFTER_S = 1.0
#: Seconds between tries while the lock is held elsewhere.
POLL_INTERVAL_S = 0.002


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
    """An exclusive inter-process lock on a file (filelock's FileLock: flock on POSIX, LockFileEx on
    Windows) with a deadline; a thread lock in front of it makes one Store safe to share between
    threads. Re-entrant. The lock file stays on release (waiters name it; the store's tests open it)."""

    def __init__(self, path: Path, timeout_s: float | None = None, notice: Callable[[str], None] = _say) -> None:
        self.path = path
        self.timeout_s = timeout_s
        self.notice = notice
        self._file_lock = FileLock(
            str(path),
            thread_local=False,
            poll_interval=POLL_INTERVAL_S,
            preserve_lock_file=True,
            on_acquired=self._write_holder,
        )
        self._held_fd: int | None = None
        self._depth = 0
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

    def __exit__(self, *exc: object) -> None:
        try:
            self._depth -= 1
            if self._depth == 0:
                self._clear_holder()
                self._file_lock.release()
        finally:
            self._threads.release()

    def close(self) -> None:
        """Nothing to close: filelock closes its descriptor on each release."""

    def _acquire_file(self, timeout_s: float) -> None:
        """Wait up to ``timeout_s``, saying once after ``NOTICE_AFTER_S`` who holds the lock."""
        first_wait = min(NOTICE_AFTER_S, timeout_s)
        if self._try_acquire(first_wait):
            return
        if timeout_s > first_wait:
            self.notice(
                f"waiting for the results store's lock {self.path}, held by {self._holder()} "
                f"(gives up after {timeout_s:g} s)"
            )
            if self._try_acquire(timeout_s - first_wait):
                return
        raise self._timeout(timeout_s)

    def _try_acquire(self, timeout_s: float) -> bool:
        try:
            self._file_lock.acquire(timeout=timeout_s)
        except Timeout:
            return False
        except OSError as exc:
            raise StoreError(
                f"cannot open the results store's lock file {self.path}: {exc.strerror or exc}",
                "pass --store with a path in a writable folder",
            ) from None
        return True

    def _write_holder(self, fd: int) -> None:
        """Called by filelock once the lock is ours: the lock file names this process."""
        self._held_fd = fd
        os.ftruncate(fd, 0)
        os.lseek(fd, 0, os.SEEK_SET)
        os.write(fd, str(os.getpid()).encode())

    def _clear_holder(self) -> None:
        """No stale pid for the next waiter to name."""
        if self._held_fd is not None:
            try:
                os.ftruncate(self._held_fd, 0)
            except OSError:
                pass
            self._held_fd = None

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
