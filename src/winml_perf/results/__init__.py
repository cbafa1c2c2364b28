"""Results: the store of records, and records as pandas DataFrames (results/frame.py).

Python API::

    import winml_perf.results as results
    df = results.load()                                  # every record, one row each (pandas)
    df = results.load("postgresql://perf@db/winml", bundle="tiny-qwen2", route="config", since="7d")
    samples = results.load_samples(run_id="...")         # one row per measured iteration

``store`` is a path, a URL, an open ``Store`` or None (``$WINML_PERF_STORE``, else
``results/winml-perf.db`` under the current folder). Filters: bundle, route, testbed, run_id,
status, git_commit, version, since, until, prompt_tokens, max_new_tokens, ids, limit.

May import: record and the floors below it. Floors: docs/architecture.md; tests/unit/test_layering.py checks them.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pandas is imported lazily: writing a record never needs it
    import pandas as pd

    from winml_perf.results.store import Store

__all__ = ["load", "load_samples", "open_store"]


def open_store(url_or_path: Any = None, *, create: bool = True) -> Store:
    from winml_perf.results.store import open_store as _open

    return _open(url_or_path, create=create)


@contextmanager
def _reading(store: Any) -> Iterator[Store]:
    from winml_perf.results.store import Store

    if isinstance(store, Store):
        yield store
        return
    opened = open_store(store, create=False)
    try:
        yield opened
    finally:
        opened.close()


def load(store: Any = None, metrics: Any = None, **filters: Any) -> pd.DataFrame:
    """Records as a DataFrame, oldest first: identity and grouping columns, then per metric of
    model/metrics.py (in its order) a column of the median, named as the metric, with
    ``<metric>_ci95_low``, ``_ci95_high``, ``_cv_pct``, ``_n`` beside it. ``created_utc`` is a
    tz-aware UTC datetime. ``metrics``: only these metric names (default every one stored)."""
    from winml_perf.results.frame import frame, with_datetimes

    with _reading(store) as s:
        names = [metrics] if isinstance(metrics, str) else metrics
        return with_datetimes(frame(s.records(**filters), s.metrics_of(names, **filters)))


def load_samples(store: Any = None, phase: str | None = "measured", **filters: Any) -> pd.DataFrame:
    """Raw iterations as a DataFrame: one row per sample with its record's grouping columns,
    ``round_index``, the raw timings and the per-iteration metrics; ``created_utc`` a tz-aware
    UTC datetime."""
    import pandas as pd

    from winml_perf.results.frame import with_datetimes

    with _reading(store) as s:
        records = {r["id"]: r for r in s.records(**filters)}
        rows = []
        for sample in s.samples(list(records), phase=phase):
            r = records[sample["record_id"]]
            rows.append(
                {
                    "run_id": r["run_id"],
                    "created_utc": r["created_utc"],
                    "testbed_id": r["testbed_id"],
                    "bundle": r["bundle"],
                    "route": r["route"],
                    "prompt_tokens": r["prompt_tokens"],
                    "max_new_tokens": r["max_new_tokens"],
                    **sample,
                }
            )
        df = pd.DataFrame(rows)
        return with_datetimes(df) if rows else df
