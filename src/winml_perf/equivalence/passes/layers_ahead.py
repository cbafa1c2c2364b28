"""The routes' layer passes of one equivalence check, run in a second thread beside their
teacher-forced passes.

A route's layer passes need only the reference's layer profile and the route's folder, not its
teacher-forced pass; so once the reference is ready, every route to be judged has its layer passes
started, in route order, on one worker thread. onnxruntime lets go of Python's lock while it opens
and runs a session (and most of a layer pass is that); onnxruntime-genai holds it for each of its
calls. The two kinds of work therefore overlap: while the main thread loads a route's model and
steps it, the worker opens and runs the next routes' layer sessions. Each route's layers are the
same arrays as when run in the main thread: the same passes, in the same order, against the same
shared passes (equivalence/passes/shared_passes.py). The worker runs in a copy of the check's context, so it
sees the check's kept models and sessions (equivalence/passes/model_pool.py) and the run's configs.
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any


class LayersAhead:
    """Layer passes started ahead, by route folder; ``run(path)`` is what one route's passes are."""

    def __init__(self, run: Callable[[str], Any]) -> None:
        self.run = run
        self.futures: dict[str, Future[Any]] = {}
        self.worker_ms = 0.0  # the worker's time in layer passes
        self.waited_ms = 0.0  # the main thread's time waiting for them
        self.in_turn_ms = 0.0  # the main thread's time in the passes of routes not started ahead
        self._pool: ThreadPoolExecutor | None = None

    def start(self, paths: Iterable[str]) -> None:
        """Start the layer passes of ``paths`` (each once), in order, on the worker thread."""
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="winml-layer-passes")
        for path in paths:
            if path not in self.futures:
                context = contextvars.copy_context()
                self.futures[path] = self._pool.submit(context.run, self._timed, path)

    def result(self, path: str) -> Any:
        """The route's layers: from the worker (waiting for them), else run here now."""
        future = self.futures.pop(path, None)
        t0 = time.perf_counter()
        if future is None:
            try:
                return self.run(path)
            finally:
                self.in_turn_ms += (time.perf_counter() - t0) * 1000.0
        try:
            return future.result()
        finally:
            self.waited_ms += (time.perf_counter() - t0) * 1000.0

    def close(self) -> None:
        """Drop what was started and not asked for (a route whose teacher-forced pass failed), and
        wait for the pass under way."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
        self.futures.clear()

    def _timed(self, path: str) -> Any:
        t0 = time.perf_counter()
        try:
            return self.run(path)
        finally:
            self.worker_ms += (time.perf_counter() - t0) * 1000.0
