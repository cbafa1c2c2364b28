"""The SQLite writers' queue: an exclusive lock on '<db>.lock' taken around each write transaction."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any


class WriterLock:
    """An exclusive inter-process lock on a file: blocking flock on POSIX (the kernel queues the
    waiters and wakes the next at once), filelock elsewhere; a thread lock in front of it makes
    one Store safe to share between threads. Re-entrant."""

    def __init__(self, path: Path) -> None:
        self.path = path
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
            self._acquire_file()
        except BaseException:
            self._depth -= 1
            self._threads.release()
            raise

    def _acquire_file(self) -> None:
        try:
            import fcntl
        except ImportError:  # Windows
            from filelock import FileLock

            self._fallback = self._fallback or FileLock(str(self.path), poll_interval=0.002)
            self._fallback.acquire()
            return
        if self._fd is None:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
        fcntl.flock(self._fd, fcntl.LOCK_EX)

    def __exit__(self, *exc: object) -> None:
        try:
            self._depth -= 1
            if self._depth == 0:
                if self._fallback is not None:
                    self._fallback.release()
                else:
                    import fcntl

                    fcntl.flock(self._fd, fcntl.LOCK_UN)
        finally:
            self._threads.release()

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
