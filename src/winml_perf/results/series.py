"""Series-level reads of the results store: a series is every record of one ``records.series_key``
(testbed, bundle, route, shape, options; rows.series_identity), read as one range of the index on
(series_key, created_utc).

- ``series_list(store, **filters)``: one row per series the filters select (the dashboard's list);
  ``series_records``: their records, counted.
- ``history`` / ``histories``: one or several metrics of one series, oldest first (the gate).
- ``series_columns`` / ``page_columns``: every record of one series (of a few series, read
  together) with the medians and 95 % CIs of some metrics, as columns, and the per-invocation
  medians of the newest records (the dashboard's pages).
- ``series_runs``: each series' newest run ids ('latest' / 'previous' per series).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import sqlalchemy as sa

from winml_perf.results import migrations as mig
from winml_perf.results.filters import apply_filters
from winml_perf.results.sql_types import AnySelect
from winml_perf.results.store import Store
from winml_perf.support.errors import UsageError

#: Series looked up per statement when reading their identity columns (bounded bind parameters).
IDENTITY_CHUNK = 900


def series_list(store: Store, **filters: Any) -> list[dict[str, Any]]:
    """One row per series the filters select: its key, identity columns (testbed, bundle, route,
    runtime, shape), the equivalence verdict and reference of its newest ok record (else its newest),
    records and newest time. Counting reads the series index alone; the identity
    columns, the same for every record of a series, come from each series' newest record."""
    r = mig.records.c
    counts = apply_filters(
        sa.select(
            r.series_key,
            sa.func.count().label("records"),
            sa.func.max(r.created_utc).label("newest"),
            sa.func.max(r.id).label("last_id"),
            sa.func.max(sa.case((r.status == "ok", r.id), else_=None)).label("last_ok_id"),
        ),
        filters,
    )
    counts = counts.where(r.series_key.is_not(None)).group_by(r.series_key)
    ident = (
        r.id, r.testbed_id, r.bundle, r.bundle_id, r.bundle_path, r.series_label, r.route, r.runtime, r.prompt_tokens,
        r.max_new_tokens,
    )  # fmt: skip
    # the verdict belongs to the route and the run it was made in (issue 35): its run comes with it
    # and its figures: the dashboard shows the KL, top-1 and the perplexity ratio beside the verdict (issue 34)
    judged = (
        r.id, r.equivalence_verdict, r.equivalence_reference, r.run_id.label("equivalence_run_id"),
        r.equivalence_kind, r.equivalence_kl_mean, r.equivalence_top1_agreement, r.equivalence_perplexity,
        r.equivalence_perplexity_ratio, r.equivalence_perplexity_ratio_low, r.equivalence_perplexity_ratio_high,
        r.equivalence_perplexity_kl, r.equivalence_perplexity_kl_low, r.equivalence_perplexity_kl_high,
        r.equivalence_perplexity_top1,
    )  # fmt: skip

    def by_ids(conn: sa.Connection, cols: tuple[Any, ...], wanted: list[int]) -> dict[int, dict[str, Any]]:
        out: dict[int, dict[str, Any]] = {}
        ids = sorted(set(wanted))
        for k in range(0, len(ids), IDENTITY_CHUNK):
            for x in conn.execute(sa.select(*cols).where(r.id.in_(ids[k : k + IDENTITY_CHUNK]))):
                out[x.id] = dict(x._mapping)
        return out

    def read(conn: sa.Connection) -> list[dict[str, Any]]:
        rows = [dict(x._mapping) for x in conn.execute(counts)]
        by_id = by_ids(conn, ident, [row["last_id"] for row in rows])
        # the equivalence verdict of the newest ok record (whose value the overview shows), else the newest's
        verdicts = by_ids(conn, judged, [row["last_ok_id"] or row["last_id"] for row in rows])
        out = []
        for row in rows:
            idn = dict(by_id[row["last_id"]])
            idn.pop("id")
            verdict = dict(verdicts[row["last_ok_id"] or row["last_id"]])
            verdict.pop("id")
            out.append(
                {"series_key": row["series_key"], **idn, **verdict, "records": row["records"], "newest": row["newest"]}
            )
        return out

    return store.read(read)


def series_records(store: Store, **filters: Any) -> int:
    """Records of the series the filters select (``series_list``'s record counts summed), in one count."""
    r = mig.records.c
    stmt = apply_filters(sa.select(sa.func.count()).select_from(mig.records), filters).where(r.series_key.is_not(None))
    return int(store.read(lambda c: c.execute(stmt).scalar()) or 0)


def history(
    store: Store, series: str, metric: str, *, until: str | None = None, status: str = "ok", newest: int | None = None
) -> list[dict[str, Any]]:
    """One metric of one series (a ``series_key``), oldest first: record id, run, time, commit,
    version, testbed and the metric's median and 95 % CI; only the ``newest`` records when
    given. One range of the series index."""
    return histories(store, series, [metric], until=until, status=status, newest=newest)[metric]


def histories(
    store: Store,
    series: str,
    metrics: Sequence[str],
    *,
    until: str | None = None,
    status: str = "ok",
    newest: int | None = None,
) -> dict[str, list[dict[str, Any]]]:
    """``history`` of several metrics of one series in one query: metric -> its rows."""
    r, m = mig.records.c, mig.metrics.c
    ids = sa.select(r.id).where(r.series_key == series, r.status == status)
    if until is not None:
        ids = ids.where(r.created_utc <= until)
    if newest is not None:
        ids = sa.select(ids.order_by(r.created_utc.desc(), r.id.desc()).limit(int(newest)).subquery().c.id)
    stmt = (
        sa.select(
            r.id,
            r.run_id,
            r.created_utc,
            r.git_commit,
            r.winml_perf_version,
            r.testbed_id,
            m.name,
            m.median,
            m.ci95_low,
            m.ci95_high,
        )
        .join(mig.metrics, m.record_id == r.id)
        .where(r.id.in_(ids), m.name.in_(list(metrics)))
        .order_by(r.created_utc, r.id)
    )
    out: dict[str, list[dict[str, Any]]] = {name: [] for name in metrics}
    for x in store.read(lambda c: c.execute(stmt).all()):
        row = dict(x._mapping)
        out[row.pop("name")].append(row)
    return out


@dataclass
class SeriesColumns:
    """Every record of one series (failed ones too), oldest first, as columns: the record fields
    the dashboard shows, and per metric its medians and 95 % CI bounds (NaN: none stored). The
    testbed is the series' own (part of its identity), not a column."""

    ids: list[int]
    run_ids: list[Any]
    created_utc: list[str]
    git_commits: list[Any]
    versions: list[Any]
    ok: np.ndarray  # status == 'ok'
    values: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]  # metric -> (median, low, high)
    # metric -> record id -> its per-invocation medians (metrics.invocations), for the metrics and
    # newest records asked for (series_columns' invocations_of and window); records without: absent
    invocations: dict[str, dict[int, list[float]]] = field(default_factory=dict)
    bundle_ids: list[Any] = field(default_factory=list)  # each record's bundle content digest (None: unknown)

    def __len__(self) -> int:
        return len(self.ids)


def series_columns(
    store: Store,
    series: str,
    metrics: Sequence[str],
    *,
    invocations_of: Sequence[str] = (),
    window: int | None = None,
    **filters: Any,
) -> SeriesColumns:
    """``SeriesColumns`` of one series (a ``series_key``) and ``metrics``, filtered (``page_columns``
    of that series alone)."""
    return page_columns(store, [series], metrics, invocations_of=invocations_of, window=window, **filters)[series]


def page_columns(
    store: Store,
    series: Sequence[str],
    metrics: Sequence[str],
    *,
    invocations_of: Sequence[str] = (),
    window: int | None = None,
    **filters: Any,
) -> dict[str, SeriesColumns]:
    """series_key -> ``SeriesColumns`` of each of ``series`` (a dashboard page's: a few) and
    ``metrics``, filtered, in three reads for them all: the records (the series index), their metric
    rows (no row per record and metric of an outer join), and for each metric of ``invocations_of``
    the per-invocation medians of each series' newest ``window`` ok records with a value (all when
    None): what change points search."""
    r, m = mig.records.c, mig.metrics.c
    keys = list(dict.fromkeys(series))
    shown = (r.series_key, r.id, r.run_id, r.created_utc, r.git_commit, r.winml_perf_version, r.status, r.bundle_id)
    recs = apply_filters(sa.select(*shown), filters).where(r.series_key.in_(keys))
    in_series = apply_filters(sa.select(r.id), filters).where(r.series_key.in_(keys))
    # each metric by its position in ``metrics`` (a small int: no text per row to build)
    which = sa.case({name: k for k, name in enumerate(metrics)}, value=m.name)
    vals = sa.select(m.record_id, which, m.median, m.ci95_low, m.ci95_high).where(
        m.record_id.in_(in_series), m.name.in_(list(metrics)), m.median.is_not(None)
    )

    def read(conn: sa.Connection) -> dict[str, SeriesColumns]:
        by_series: dict[str, list[tuple[Any, ...]]] = {key: [] for key in keys}
        for row in _plain_rows(conn, recs.order_by(r.series_key, r.created_utc, r.id)):
            by_series[row[0]].append(row)
        ids = [[row[1] for row in rows] for rows in by_series.values()]
        values = _metric_columns(ids, _plain_rows(conn, vals), metrics)
        out = {key: _columns(rows, v) for (key, rows), v in zip(by_series.items(), values)}
        for metric in invocations_of:
            newest = {key: _newest_ok(cols, metric, window) for key, cols in out.items()}
            texts = _invocation_texts(conn, metric, [i for chosen in newest.values() for i in chosen])
            for key, chosen in newest.items():
                out[key].invocations[metric] = _parsed(store, key, [(i, texts[i]) for i in chosen if i in texts])
        return out

    return store.read(read)


def _plain_rows(conn: sa.Connection, stmt: AnySelect) -> list[tuple[Any, ...]]:
    """The rows of ``stmt`` as the driver returns them (tuples), not as SQLAlchemy rows: a page reads
    ~12,000 of them, and building a row object each cost more than the driver's fetch. Only for
    columns the driver already gives as Python wants them (text, integers, floats)."""
    result = conn.execute(stmt)
    try:
        return list(result.cursor.fetchall())
    finally:
        result.close()


def _columns(
    rec_rows: Sequence[Sequence[Any]], values: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]
) -> SeriesColumns:
    """One series' columns from its record rows (series_key first) and its metric columns."""
    cols = list(zip(*rec_rows)) if rec_rows else [()] * 8
    return SeriesColumns(
        list(cols[1]),
        list(cols[2]),
        list(cols[3]),
        list(cols[4]),
        list(cols[5]),
        np.array([status == "ok" for status in cols[6]], dtype=bool),
        values,
        {},
        list(cols[7]),
    )


def _newest_ok(cols: SeriesColumns, metric: str, window: int | None) -> list[int]:
    """Record ids of the newest ``window`` ok records with a value of ``metric`` (all when None)."""
    where = np.flatnonzero(cols.ok & ~np.isnan(cols.values[metric][0]))
    return [cols.ids[i] for i in (where if window is None else where[len(where) - min(len(where), int(window)) :])]


def _invocation_texts(conn: sa.Connection, metric: str, ids: Sequence[int]) -> dict[int, str]:
    """record id -> its metrics.invocations text of ``metric``, for those of ``ids`` that have one."""
    m = mig.metrics.c
    # the ids bound at execution (an expanding parameter): no SQL element built for each id
    stmt = sa.select(m.record_id, m.invocations).where(
        m.record_id.in_(sa.bindparam("ids", expanding=True)), m.name == metric, m.invocations.is_not(None)
    )
    out: dict[int, str] = {}
    for k in range(0, len(ids), IDENTITY_CHUNK):
        result = conn.execute(stmt, {"ids": list(ids[k : k + IDENTITY_CHUNK])})
        try:
            out.update(result.cursor.fetchall())  # the driver's (id, text) tuples
        finally:
            result.close()
    return out


def _parsed(store: Store, series: str, rows: Sequence[tuple[int, str]]) -> dict[int, list[float]]:
    """record id -> its per-invocation medians, from (record id, JSON list text) rows: one parse."""
    lists = json.loads("[" + ",".join(text for _, text in rows) + "]")  # each text is a JSON list
    if len(lists) != len(rows) or not all(isinstance(v, list) for v in lists):
        raise UsageError(
            f"{store.display}: metrics.invocations of series {series} holds a value that is not a JSON list",
            "the column is written by winml-perf itself; set the damaged rows' invocations to NULL (their medians are searched then)",
        )
    return {rid: [float(v) for v in values] for (rid, _), values in zip(rows, lists)}


#: Integers whose float64 is exact (record ids read as floats with the values of their rows).
_EXACT_IDS = 2**53


def _metric_columns(
    ids: Sequence[Sequence[int]], rows: Sequence[Sequence[Any]], metrics: Sequence[str]
) -> list[dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]]:
    """Per series (``ids``: each series' record ids), metric -> (median, low, high) columns aligned
    with its ids, from the (record id, the metric's position in ``metrics``, median, low, high) rows
    of them all (NaN where a record has no row or a bound is NULL), by array operations."""
    sizes = [len(x) for x in ids]
    starts = np.cumsum([0, *sizes]).tolist()
    # [metric, median/low/high, record of the page]: each row written once, each column cut out
    table = np.full((len(metrics), 3, starts[-1]), np.nan)
    if rows:
        page_ids = np.asarray([i for x in ids for i in x], dtype=np.int64)
        n = len(page_ids)
        numbers = _float_table(rows, 5)
        wanted = numbers[:, 0].astype(np.int64)  # ids below 2**53 are exact as floats
        if wanted.max() >= _EXACT_IDS or wanted.min() <= -_EXACT_IDS:
            wanted = np.asarray([row[0] for row in rows], dtype=np.int64)
        order = np.argsort(page_ids, kind="stable")
        sorted_ids = page_ids[order]
        at = np.minimum(np.searchsorted(sorted_ids, wanted), n - 1)
        if n == 0 or not np.array_equal(sorted_ids[at], wanted):
            raise RuntimeError("series_columns: metric rows of records the records query did not return")
        position = order[at]  # into the records of all the series, one after the other
        table[numbers[:, 1].astype(np.int64), :, position] = numbers[:, 2:]
    return [
        {
            metric: (table[k, 0, a:b].copy(), table[k, 1, a:b].copy(), table[k, 2, a:b].copy())
            for k, metric in enumerate(metrics)
        }
        for a, b in zip(starts, starts[1:])
    ]


def _float_table(rows: Sequence[Sequence[Any]], width: int) -> np.ndarray:
    """``rows`` (numbers or None) as a float array, None as NaN: through one iterator when no value is
    None (half the time of building the array from the tuples), else from the tuples."""
    try:
        flat = np.fromiter(itertools.chain.from_iterable(rows), float, len(rows) * width)
    except TypeError:  # a None: a NULL bound
        flat = np.array(rows, dtype=float)
    return flat.reshape(len(rows), width)


def series_runs(store: Store, depth: int = 2, **filters: Any) -> dict[str, list[str]]:
    """series_key -> its newest ``depth`` run ids, newest first, for the series ``filters``
    select: one index range per series, so 'latest' and 'previous' mean the same testbed,
    bundle, route and shape in a fleet where many testbeds write."""
    r = mig.records.c
    keys_stmt = apply_filters(sa.select(r.series_key).distinct(), filters).where(r.series_key.is_not(None))

    def read(conn: sa.Connection) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for key in conn.execute(keys_stmt).scalars().all():
            newest = apply_filters(sa.select(r.run_id), filters).where(r.series_key == key, r.run_id.is_not(None))
            runs: list[str] = []
            for run in conn.execute(newest.order_by(r.created_utc.desc(), r.id.desc()).limit(8 * depth)).scalars():
                if run not in runs:
                    runs.append(run)
                if len(runs) == depth:
                    break
            out[key] = runs
        return out

    return store.read(read)


def newest_shared_run(store: Store, series: str, other: str, *, newest: int = 200) -> str | None:
    """The newest run (by its record in ``series``) that holds ok records of both series, among the
    newest ``newest`` runs of ``series``; None when they were never measured in one run (issue 35:
    the overview's ratio to config comes from one run, never across runs)."""
    r = mig.records.c
    mine = (
        sa.select(r.run_id, sa.func.max(r.created_utc).label("t"))
        .where(r.series_key == series, r.status == "ok", r.run_id.is_not(None))
        .group_by(r.run_id)
        .order_by(sa.desc("t"))
        .limit(int(newest))
        .subquery()
    )
    theirs = sa.select(r.run_id).where(r.series_key == other, r.status == "ok")
    stmt = sa.select(mine.c.run_id).where(mine.c.run_id.in_(theirs)).order_by(mine.c.t.desc()).limit(1)
    return store.read(lambda c: c.execute(stmt).scalar())


def newest_shared_run_of(series: SeriesColumns, other: SeriesColumns, *, newest: int = 200) -> str | None:
    """``newest_shared_run`` from the columns of both series already read (every record of each:
    read without filters): the newest run (by its newest ok record in ``series``), among the
    ``newest`` newest runs of ``series``, that holds ok records of ``other`` too; else None."""
    latest: dict[Any, str] = {}
    for run, t, ok in zip(series.run_ids, series.created_utc, series.ok.tolist()):
        if ok and run is not None and (run not in latest or t > latest[run]):
            latest[run] = t
    theirs = {run for run, ok in zip(other.run_ids, other.ok.tolist()) if ok and run is not None}
    for run in sorted(latest, key=latest.__getitem__, reverse=True)[: int(newest)]:
        if run in theirs:
            return str(run)
    return None
