"""The parent's timeline of one `winml dashboard` build (issue 37): when the parent starts the record
count, the search for serving records and the listing, when the first and the last page's result come
back from the workers, when the workers have exited and when the process ends. Run on demand:

    WINML_PERF_STORE=STORE python benchmarks/dashboard_timeline.py dashboard -o SITE

Each line: seconds since the start, the parent's CPU seconds, the step. The arguments are the CLI's.
"""

from __future__ import annotations

import atexit
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

START = time.perf_counter()


def log(step: str) -> None:
    print(
        f"[{time.perf_counter() - START:6.2f} s, cpu {time.process_time():5.2f} s] {step}", file=sys.stderr, flush=True
    )


def _timed(fn: Callable[..., Any], name: str) -> Callable[..., Any]:
    def timed(*args: Any, **kwargs: Any) -> Any:
        log(f"{name} starts")
        out = fn(*args, **kwargs)
        log(f"{name} ends")
        return out

    return timed


def _instrument() -> None:
    from winml_perf.publish import dashboard as d

    for name in ("series_records", "find_serving", "series_list"):
        setattr(d, name, _timed(getattr(d, name), name))
    results, workers = d._results, d._page_workers

    def each_result(*args: Any) -> Iterator[Any]:
        for n, result in enumerate(results(*args), 1):
            if n == 1:
                log("first page's result")
            yield result
        log("last page's result")

    @contextmanager
    def page_workers(wanted: int) -> Iterator[Any]:
        with workers(wanted) as pool:
            yield pool
            log("workers to end")
        log("workers ended")

    d._results, d._page_workers = each_result, page_workers


if __name__ == "__main__":
    atexit.register(log, "process ends")  # registered first: runs last
    _instrument()
    from winml_perf.cli import main

    main(sys.argv[1:])
