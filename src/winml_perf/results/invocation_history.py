"""A series' history with each record's per-invocation medians: the input of mode-aware change
points (results/changepoint.py given invocation values) for the gate and the dashboard.

Two queries on the series index, bounded by ``newest`` records: the records of one ``series_key``
(status ok, up to ``until``) with the metrics' medians and 95 % intervals; then those records'
measured samples, whose ``invocation`` column (migration 0003) says which fresh process ran each
iteration. A record's invocation estimate of a metric is the median of that invocation's
iterations; samples without an invocation (records made before invocations existed, or a metric
the samples table does not hold) leave the record one estimate, its stored median.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from typing import Sequence

import sqlalchemy as sa

from winml_perf.model.metrics import get
from winml_perf.results import migrations as mig
from winml_perf.results.store import Store

#: Newest records of a series read by default (the gate's window).
DEFAULT_NEWEST = 40


def _sampled(metrics: Sequence[str]) -> list[str]:
    """The metrics that are per-iteration columns of the samples table."""
    return [m for m in metrics if (meta := get(m)) is not None and meta.stored and m in mig.samples.c]


def invocation_histories(store: Store, series: str, metrics: Sequence[str], *, until: str | None = None,
                         newest: int | None = DEFAULT_NEWEST) -> dict[str, list[dict]]:
    """metric -> its records in the series, oldest first: id, run_id, created_utc, median,
    ci95_low, ci95_high and ``invocations`` (the per-invocation medians, in invocation order)."""
    r, m, s = mig.records.c, mig.metrics.c, mig.samples.c
    ids = sa.select(r.id).where(r.series_key == series, r.status == "ok")
    if until is not None:
        ids = ids.where(r.created_utc <= until)
    if newest is not None:
        ids = sa.select(ids.order_by(r.created_utc.desc(), r.id.desc()).limit(int(newest)).subquery().c.id)
    heads = (sa.select(r.id, r.run_id, r.created_utc, m.name, m.median, m.ci95_low, m.ci95_high)
             .join(mig.metrics, m.record_id == r.id)
             .where(r.id.in_(ids), m.name.in_(list(metrics))).order_by(r.created_utc, r.id))
    sampled = _sampled(metrics)
    per_sample = (sa.select(s.record_id, s.invocation, *(s[name] for name in sampled))
                  .where(s.record_id.in_(ids), s.phase == "measured").order_by(s.record_id, s.seq))

    def read(conn: sa.Connection) -> tuple[list, list]:
        return conn.execute(heads).all(), (conn.execute(per_sample).all() if sampled else [])
    head_rows, sample_rows = store.read(read)

    # (record, metric) -> invocation -> values
    by_invocation: dict[tuple[int, str], dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for row in sample_rows:
        if row.invocation is None:
            continue
        for name in sampled:
            value = row._mapping[name]
            if value is not None:
                by_invocation[(row.record_id, name)][row.invocation].append(float(value))
    out: dict[str, list[dict]] = {name: [] for name in metrics}
    for row in head_rows:
        groups = by_invocation.get((row.id, row.name))
        if groups:
            estimates = [statistics.median(groups[k]) for k in sorted(groups)]
        else:
            estimates = [] if row.median is None else [float(row.median)]
        out[row.name].append({"id": row.id, "run_id": row.run_id, "created_utc": row.created_utc, "median": row.median,
                              "ci95_low": row.ci95_low, "ci95_high": row.ci95_high, "invocations": estimates})
    return out
