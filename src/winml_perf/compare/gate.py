"""The regression gate of ``winml compare runs --fail-on-regression``: judge the candidate's newest
run of each series by the change points of the series' history (results/changepoint.py
``judge_newest``), not by one night against another.

- History: each record's per-invocation medians of the metric (results/invocation_history.py; a
  record without invocations gives its median), the newest ``GATE_HISTORY`` records of the series
  (``records.series_key``) up to the candidate's newest, oldest first; the records of one run pool
  their invocations. The window bounds the cost (the detector is quadratic in the runs) and is far
  longer than the newest runs the gate judges.
- The detector gets every run's invocations, so its levels are mode-aware and a change in the share
  of the slow mode is judged too (results/run_levels.py): with at least ``changepoint.MIN_HISTORY``
  runs, a regression when a significant change point of either kind starts among the newest runs
  and its shift is worse than the threshold. With fewer: when the candidate's 95 % interval lies
  wholly beyond the threshold on the worse side of the earlier runs' median.
- Direction from the metric table; a metric that is the inverse of another compared one (TPOT of
  decode tok/s) is not counted again.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping, Sequence

from winml_perf.model.metrics import bigger_is_better, get
from winml_perf.results.invocation_history import invocation_histories
from winml_perf.results.store import Store
from winml_perf.stats.changepoint import INSUFFICIENT, Verdict, judge_newest

COUNTED_ONCE = "counted once"
#: Newest records of a series the gate reads (about six weeks of nightlies; the newest 10 are judged).
GATE_HISTORY = 40


def run_estimates(history: Sequence[Mapping]) -> tuple[list[list[float]], list[str], tuple[float, float] | None]:
    """(per-run invocation estimates oldest first, their run ids, the newest run's interval when it
    is one record). Rows without ``invocations`` count as one invocation, their median."""
    runs: OrderedDict[str, list[Mapping]] = OrderedDict()
    for h in history:
        if h.get("invocations") or h["median"] is not None:
            runs.setdefault(h["run_id"] or f"record {h['id']}", []).append(h)
    values = [[float(v) for h in rows for v in (h.get("invocations") or [h["median"]])] for rows in runs.values()]
    interval = None
    if runs:
        newest = list(runs.values())[-1]
        if len(newest) == 1 and newest[0]["ci95_low"] is not None and newest[0]["ci95_high"] is not None:
            interval = (float(newest[0]["ci95_low"]), float(newest[0]["ci95_high"]))
    return values, list(runs), interval


def judge_series(
    store: Store, candidate: Sequence[Mapping], metrics: Sequence[str], threshold_pct: float
) -> dict[str, Verdict]:
    """The gate's verdict on the newest of ``candidate`` (ok records of one series) per metric."""
    newest = max(candidate, key=lambda r: (r["created_utc"], r["id"]))
    if not newest.get("series_key"):
        return {m: Verdict(INSUFFICIENT, None, "the record has no series key") for m in metrics}
    histories = invocation_histories(
        store, newest["series_key"], metrics, until=newest["created_utc"], newest=GATE_HISTORY
    )
    out = {}
    for metric in metrics:
        values, runs, interval = run_estimates(histories[metric])
        if not values:
            out[metric] = Verdict(INSUFFICIENT, None, f"no stored {metric} for this series")
            continue
        out[metric] = judge_newest(
            values,
            runs,
            higher_is_better=bigger_is_better(metric),
            threshold=threshold_pct / 100.0,
            candidate_interval=interval,
        )
    return out


def counted_elsewhere(metric: str, compared: Sequence[str]) -> str | None:
    """The compared metric that ``metric`` is the inverse of (its verdict is not counted twice)."""
    m = get(metric)
    return m.inverse_of if m is not None and m.inverse_of in compared else None
