"""A series' history with each record's per-invocation medians: the input of mode-aware change
points (stats/series/changepoint.py given invocation values) for the gate and the dashboard.

One query on the series index, bounded by ``newest`` records: the records of one ``series_key``
(status ok, up to ``until``) with the metrics' medians, 95 % intervals and per-invocation medians
(``metrics.invocations``, migration 0006; the median of each invocation's iterations,
rows.invocation_medians). Rows without that column read the records' measured samples instead
(``samples.invocation``, migration 0003); samples without an invocation (records made before
invocations existed, or a metric the samples table does not hold) leave the record one
estimate, its stored median. The dashboard reads the same column (results/series.py).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa

from winml_perf.model.metrics import get
from winml_perf.results import migrations as mig
from winml_perf.results.rows import invocation_medians
from winml_perf.results.sql_types import AnyRow
from winml_perf.results.store import Store

#: Newest records of a series read by default (the gate's window).
DEFAULT_NEWEST = 40


def _sampled(metrics: Sequence[str]) -> list[str]:
    """The metrics that are per-iteration columns of the samples table."""
    return [m for m in metrics if (meta := get(m)) is not None and meta.stored and m in mig.samples.c]


def invocation_histories(
    store: Store, series: str, metrics: Sequence[str], *, until: str | None = None, newest: int | None = DEFAULT_NEWEST
) -> dict[str, list[dict[str, Any]]]:
    """metric -> its records in the series, oldest first: id, run_id, created_utc, bundle_id, median,
    ci95_low, ci95_high and ``invocations`` (the per-invocation medians, in invocation order)."""
    r, m, s = mig.records.c, mig.metrics.c, mig.samples.c
    ids = sa.select(r.id).where(r.series_key == series, r.status == "ok")
    if until is not None:
        ids = ids.where(r.created_utc <= until)
    if newest is not None:
        ids = sa.select(ids.order_by(r.created_utc.desc(), r.id.desc()).limit(int(newest)).subquery().c.id)
    heads = (
        sa.select(r.id, r.run_id, r.created_utc, r.bundle_id, m.name, m.median, m.ci95_low, m.ci95_high, m.invocations)
        .join(mig.metrics, m.record_id == r.id)
        .where(r.id.in_(ids), m.name.in_(list(metrics)))
        .order_by(r.created_utc, r.id)
    )
    sampled = _sampled(metrics)

    def read(conn: sa.Connection) -> tuple[Sequence[AnyRow], Sequence[AnyRow]]:
        head_rows = conn.execute(heads).all()
        # rows without stored invocations (none measured, or written without the column): the samples
        missing = sorted({row.id for row in head_rows if row.invocations is None and row.name in sampled})
        per_sample = (
            sa.select(s.record_id, s.invocation, *(s[name] for name in sampled))
            .where(s.record_id.in_(missing), s.phase == "measured")
            .order_by(s.record_id, s.seq)
        )
        return head_rows, (conn.execute(per_sample).all() if missing else [])

    head_rows, sample_rows = store.read(read)

    by_record: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for row in sample_rows:
        by_record[row.record_id].append(dict(row._mapping))
    from_samples = {rid: invocation_medians(rows, sampled) for rid, rows in by_record.items()}
    out: dict[str, list[dict[str, Any]]] = {name: [] for name in metrics}
    for row in head_rows:
        if row.invocations is not None:
            estimates = [float(v) for v in json.loads(row.invocations)]
        else:
            estimates = from_samples.get(row.id, {}).get(row.name) or (
                [] if row.median is None else [float(row.median)]
            )
        out[row.name].append(
            {
                "id": row.id,
                "run_id": row.run_id,
                "created_utc": row.created_utc,
                "bundle_id": row.bundle_id,  # the model's content digest: a change is an event (issue 35)
                "median": row.median,
                "ci95_low": row.ci95_low,
                "ci95_high": row.ci95_high,
                "invocations": estimates,
            }
        )
    return out
