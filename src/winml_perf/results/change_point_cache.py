"""Change points kept in the store (table ``change_point_cache``, migration 0004), so a nightly
dashboard rebuild runs the detector only on the series that changed.

A row holds, per series and metric, the change points last found and a digest (SHA-256) of
everything that decided them: the detector's fingerprint (the bytes of stats/series/changepoint.py and
of the winml_perf modules it uses, and numpy's version: any change to the method invalidates
every row), the options it was called
with, and its whole input: the record ids, run ids and values searched, in order (per record its
per-invocation medians when any record searched has them, else its median; results/series.py). A row is used
only when the digest of what the detector would be given now is the same, so a record added,
pruned or imported into the searched window, or a value changed in place, recomputes the series:
a cached change point is never stale. One row per series and metric (replaced on recompute);
rows of series that no longer have records are dropped by ``Store.prune``.

A read-only store (a file nobody may write) still gets change points: they are computed and not
kept.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import sqlalchemy as sa

from winml_perf.results import migrations as mig
from winml_perf.results.series import SeriesColumns
from winml_perf.results.store import Store
from winml_perf.stats.series import changepoint

#: Bumped when what a row holds changes shape (the detector's own changes are in its fingerprint).
#: 2: the input is each record's per-invocation medians where it has them (was: its median).
#: 3: the digest hashes the values' float64 bytes (was: their reprs in JSON).
#: 4: a change point may carry shift_coverage (its interval covers less than 95 %).
CACHE_FORMAT = 4
#: Series keys per lookup statement (bounded bind parameters).
LOOKUP_CHUNK = 500


@lru_cache(maxsize=1)
def detector_fingerprint() -> str:
    """A digest of the detector's code (stats/series/changepoint.py and every winml_perf module it
    draws on) and of numpy's version: it changes when any of them does."""
    import numpy

    h = hashlib.sha256(b"%d|%s|" % (CACHE_FORMAT, numpy.__version__.encode()))
    for name, path in sorted(_detector_sources().items()):
        h.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def _detector_sources() -> dict[str, Path]:
    """Source files of changepoint and of the winml_perf modules its globals come from, transitively."""
    seen: dict[str, Path] = {}
    todo = [changepoint]
    while todo:
        module = todo.pop()
        file = getattr(module, "__file__", None)
        if module.__name__ in seen or not file:
            continue
        seen[module.__name__] = Path(file)
        for value in vars(module).values():
            owner = (
                value if isinstance(value, ModuleType) else sys.modules.get(getattr(value, "__module__", None) or "")
            )
            if owner is not None and owner.__name__.startswith("winml_perf.") and owner.__name__ not in seen:
                todo.append(owner)
    return seen


def _runs_bytes(values: Sequence[Any]) -> tuple[bytes, bytes]:
    """Each run's count of values (int64) and all the values one run after the other (float64),
    as bytes; runs of one length as one array."""
    try:
        table = np.asarray(values, dtype="<f8")
    except ValueError:  # runs of different lengths
        table = np.empty(0)
    if table.ndim == 2:
        return np.full(len(table), table.shape[1], dtype="<i8").tobytes(), table.tobytes()
    runs = [np.atleast_1d(np.asarray(v, dtype="<f8")) for v in values]
    return np.array([len(r) for r in runs], dtype="<i8").tobytes(), np.concatenate(runs).tobytes() if runs else b""


@dataclass(frozen=True)
class Search:
    """What the detector is given for one series' metric: the records searched, oldest first."""

    series_key: str
    metric: str
    record_ids: tuple[int, ...]
    run_ids: tuple[Any, ...]
    values: tuple[float, ...] | tuple[tuple[float, ...], ...]  # per record: its median, or its invocations
    options: tuple[tuple[str, Any], ...]  # the keyword arguments of detect_change_points

    def digest(self, fingerprint: str) -> str:
        """SHA-256 of the fingerprint, the options, the ids and the values' float64 bytes (exact:
        two inputs digest alike only when every value is the same float), with each record's
        count of invocations when the values are lists."""
        head = json.dumps(
            [fingerprint, self.metric, list(self.options), list(self.record_ids), [str(r) for r in self.run_ids]],
            separators=(",", ":"),
        )
        h = hashlib.sha256(head.encode())
        if all(np.ndim(v) == 0 for v in self.values):
            h.update(b"medians\0" + np.asarray(self.values, dtype="<f8").tobytes())
        else:
            counts, flat = _runs_bytes(self.values)
            h.update(b"invocations\0" + counts)
            h.update(flat)
        return h.hexdigest()

    def detect(self) -> list[dict[str, Any]]:
        """Run the detector (its public function) on this input: change points as dicts."""
        values = [list(v) if isinstance(v, tuple) else v for v in self.values]  # per record: a median or a list
        found = changepoint.detect_change_points(values, list(self.run_ids), **dict(self.options))
        return [cp.to_dict() for cp in found]


def kept(store: Store, keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], tuple[str, str]]:
    """(series_key, metric) -> (input digest, change points as JSON) of the rows kept for ``keys``."""
    wanted = set(keys)
    series = sorted({k for k, _ in wanted})
    c = mig.change_point_cache.c
    out: dict[tuple[str, str], tuple[str, str]] = {}

    def read(conn: sa.Connection) -> None:
        for k in range(0, len(series), LOOKUP_CHUNK):
            stmt = sa.select(c.series_key, c.metric, c.input_digest, c.change_points_json).where(
                c.series_key.in_(series[k : k + LOOKUP_CHUNK])
            )
            for key, metric, digest, text in conn.execute(stmt):
                if (key, metric) in wanted:
                    out[(key, metric)] = (digest, text)

    store.read(read)
    return out


def current(search: Search, row: tuple[str, str] | None, fingerprint: str | None = None) -> list[dict[str, Any]] | None:
    """The kept change points of ``search`` when ``row`` (from ``kept``) was computed from exactly
    this input by this detector; else None (compute them)."""
    if row is None or row[0] != search.digest(fingerprint or detector_fingerprint()):
        return None
    points: list[dict[str, Any]] = json.loads(row[1])  # save()'s JSON of detect()'s change points
    return points


def save(store: Store, found: Iterable[tuple[Search, list[dict[str, Any]]]], fingerprint: str | None = None) -> int:
    """Keep freshly computed change points (replacing each series' older row); returns rows written.
    Nothing is kept in a read-only store."""
    fingerprint = fingerprint or detector_fingerprint()
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    rows = [
        {
            "series_key": s.series_key,
            "metric": s.metric,
            "input_digest": s.digest(fingerprint),
            "records": len(s.record_ids),
            "newest_record_id": max(s.record_ids, default=None),
            "change_points_json": json.dumps(cps, sort_keys=True),
            "computed_utc": now,
        }
        for s, cps in found
    ]
    if not rows or store.read_only:
        return 0
    stmt = store.dialect_insert(mig.change_point_cache)
    stmt = stmt.on_conflict_do_update(
        index_elements=["series_key", "metric"],
        set_={
            k: stmt.excluded[k]
            for k in ("input_digest", "records", "newest_record_id", "change_points_json", "computed_utc")
        },
    )
    store.write(lambda conn: conn.execute(stmt, rows), "keep change points in")
    return len(rows)


def search_of(
    series_key: str, metric: str, cols: SeriesColumns, window: int, options: Mapping[str, Any]
) -> tuple[Search, list[int]]:
    """The detector's input for ``metric`` over the newest ``window`` ok records of one series
    (results/series.series_columns), and the positions of the records searched. The values are
    the records' per-invocation medians (``cols.invocations``, a record without them counts as one
    invocation, its median) when any record searched has them, as the gate judges; else the
    medians."""
    median = cols.values[metric][0]
    where = np.flatnonzero(cols.ok & ~np.isnan(median))[-window:].tolist()
    lists = cols.invocations.get(metric) or {}
    values: tuple[float, ...] | tuple[tuple[float, ...], ...] = tuple(median[where].tolist())
    if any(cols.ids[i] in lists for i in where):
        values = tuple(tuple(lists.get(cols.ids[i]) or (float(median[i]),)) for i in where)
    search = Search(
        series_key,
        metric,
        tuple(cols.ids[i] for i in where),
        tuple(cols.run_ids[i] for i in where),
        values,
        tuple(sorted(options.items())),
    )
    return search, where
