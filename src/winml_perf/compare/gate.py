"""The regression gate of ``winml compare runs --fail-on-regression``: judge the candidate's newest
run of each series by the change points of the series' history (stats/series/changepoint.py
``judge_newest``), not by one night against another.

- History: each record's per-invocation medians of the metric (results/invocation_history.py; a
  record without invocations gives its median), the newest ``GATE_HISTORY`` records of the series
  (``records.series_key``) up to the candidate's newest, oldest first; the records of one run pool
  their invocations. The window bounds the cost (the detector is quadratic in the runs) and is far
  longer than the newest runs the gate judges.
- The detector gets every run's invocations, so its levels are mode-aware and a change in the share
  of the slow mode is judged too (stats/series/run_levels.py): with at least ``changepoint.MIN_HISTORY``
  runs, a regression when a significant change point of either kind starts among the newest runs
  and its shift is worse than the threshold. With fewer: when the candidate's 95 % interval lies
  wholly beyond the threshold on the worse side of the earlier runs' median.
- Direction from the metric table; a metric that is the inverse of another compared one (TPOT of
  decode tok/s) is not counted again.

It reads histories, never a store: ``history_queries`` says which each candidate series needs,
the caller reads them (results/invocation_history.py ``invocation_histories``) and ``gated``
judges the report with them.
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from winml_perf.compare.cells import Cell, Key
from winml_perf.compare.runs import RunChange, RunsReport
from winml_perf.compare.text import metric_word
from winml_perf.model.metrics import bigger_is_better, get
from winml_perf.stats.run_change import run_change
from winml_perf.stats.series.changepoint import INSUFFICIENT, UNCHANGED, GateStatus, Verdict, judge_newest

#: How a verdict was reached when the newest run ran another model than the runs before it.
BY_MODEL_CHANGE = "model change"

COUNTED_ONCE = "counted once"
#: Gate verdicts that say nothing per row a person must act on: one summary line each, not one per row.
QUIET = (UNCHANGED, INSUFFICIENT)
#: Newest records of a series the gate reads (about six weeks of nightlies; the newest 10 are judged).
GATE_HISTORY = 40

#: metric -> the series' history rows, oldest first (results/invocation_history.py).
Histories = Mapping[str, Sequence[Mapping[str, Any]]]


@dataclass(frozen=True)
class HistoryQuery:
    """The history the gate reads for one candidate series: ``metrics`` of ``series_key``, its
    newest ``newest`` ok records up to ``until`` (the candidate's newest record)."""

    series_key: str
    until: str
    metrics: tuple[str, ...]
    newest: int = GATE_HISTORY


def run_estimates(
    history: Sequence[Mapping[str, Any]],
) -> tuple[list[list[float]], list[str], tuple[float, float] | None]:
    """(per-run invocation estimates oldest first, their run ids, the newest run's interval when it
    is one record). Rows without ``invocations`` count as one invocation, their median."""
    runs: OrderedDict[str, list[Mapping[str, Any]]] = OrderedDict()
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


def judge_series(histories: Histories, metrics: Sequence[str], threshold_pct: float) -> dict[str, Verdict]:
    """The gate's verdict on the newest run of one series' ``histories`` per metric."""
    out = {}
    for metric in metrics:
        values, runs, interval = run_estimates(histories.get(metric) or ())
        if not values:
            out[metric] = Verdict(INSUFFICIENT, None, f"no stored {metric} for this series")
            continue
        verdict = judge_newest(
            values,
            runs,
            higher_is_better=bigger_is_better(metric),
            threshold=threshold_pct / 100.0,
            candidate_interval=interval,
        )
        if not verdict.is_regression:
            verdict = at_model_change(histories.get(metric) or (), metric, threshold_pct) or verdict
        out[metric] = verdict
    return out


def at_model_change(history: Sequence[Mapping[str, Any]], metric: str, threshold_pct: float) -> Verdict | None:
    """A model change is an event on its series (issue 35), a change point whose place is known:
    when the newest run ran another bundle content (``bundle_id``) than the run before it, its
    invocations against those of the runs of the previous model back to the change before
    (stats/run_change.py: the exact 95 % interval of the shift, Hodges-Lehmann); a regression when
    that interval lies wholly beyond the threshold on the worse side. None when the newest run
    ran the same model, a digest is unknown, or the interval does not say so (the change-point
    rules stand then)."""
    runs: OrderedDict[str, list[Mapping[str, Any]]] = OrderedDict()
    for h in history:
        if h.get("invocations") or h.get("median") is not None:
            runs.setdefault(h["run_id"] or f"record {h['id']}", []).append(h)
    if len(runs) < 2:
        return None
    digests = [{h.get("bundle_id") for h in rows} for rows in runs.values()]
    if any(len(d) != 1 or None in d for d in digests[-2:]) or digests[-1] == digests[-2]:
        return None
    (new,), (old,) = digests[-1], digests[-2]
    ids, groups = list(runs), list(runs.values())
    start = len(groups) - 1
    while start > 0 and digests[start - 1] == {old}:
        start -= 1

    def invocations(rows: Sequence[Mapping[str, Any]]) -> list[list[float]]:
        return [[float(v)] for h in rows for v in (h.get("invocations") or [h["median"]])]

    before = [inv for rows in groups[start:-1] for inv in invocations(rows)]
    ch = run_change(before, invocations(groups[-1]), higher_is_better=bigger_is_better(metric))
    threshold = threshold_pct / 100.0
    worse = ch.high < -threshold if bigger_is_better(metric) else ch.low > threshold  # NaN: False
    if not worse:
        return None
    return Verdict(
        GateStatus.REGRESSION,
        BY_MODEL_CHANGE,
        f"model changed between runs {ids[-2][:8]} and {ids[-1][:8]}: {str(old)[:6]} → {str(new)[:6]}; the newest run's"
        f" {ch.invocations_candidate} invocations against the {ch.invocations_baseline} of the previous model's"
        f" {len(groups) - 1 - start} run(s): {ch.shift:+.1%} [{ch.low:+.1%}, {ch.high:+.1%}], wholly beyond the"
        f" {threshold:.1%} threshold",
    )


def counted_elsewhere(metric: str, compared: Sequence[str]) -> str | None:
    """The compared metric that ``metric`` is the inverse of (its verdict is not counted twice)."""
    m = get(metric)
    return m.inverse_of if m is not None and m.inverse_of in compared else None


def _by_candidate(report: RunsReport) -> dict[Key, list[RunChange]]:
    groups: dict[Key, list[RunChange]] = {}
    for row in report.rows:
        groups.setdefault(row.candidate_key, []).append(row)
    return groups


def _judged(rows: Sequence[RunChange]) -> list[str]:
    """The metrics of one group the gate judges (not the inverse of another compared one)."""
    compared = [r.metric for r in rows]
    return [m for m in compared if counted_elsewhere(m, compared) is None]


def history_queries(report: RunsReport, candidate: Sequence[Cell]) -> dict[Key, HistoryQuery | None]:
    """Candidate group key -> the history its series needs; None where its newest cell has no
    series key."""
    out: dict[Key, HistoryQuery | None] = {}
    for key, rows in _by_candidate(report).items():
        cells = [c for c in candidate if c.ok and c.key == key]
        newest = max(cells, key=lambda c: (c.created_utc, c.record_id or 0))
        out[key] = (
            HistoryQuery(newest.series_key, newest.created_utc, tuple(_judged(rows))) if newest.series_key else None
        )
    return out


def gated(
    report: RunsReport,
    queries: Mapping[Key, HistoryQuery | None],
    histories: Mapping[HistoryQuery, Histories],
) -> RunsReport:
    """``report`` with the gate's verdicts at its threshold (``fail_threshold_pct``) in place of the
    pairwise regression flags; ``histories``: what each of ``queries`` read."""
    threshold = report.fail_threshold_pct
    if threshold is None:
        return report
    groups = _by_candidate(report)
    compared = {key: [r.metric for r in rows] for key, rows in groups.items()}
    verdicts = {key: _verdicts(queries.get(key), histories, _judged(rows), threshold) for key, rows in groups.items()}
    rows = [_with_verdict(r, verdicts[r.candidate_key], compared[r.candidate_key]) for r in report.rows]
    return replace(report, rows=tuple(rows))


def _verdicts(
    query: HistoryQuery | None, histories: Mapping[HistoryQuery, Histories], metrics: Sequence[str], threshold: float
) -> dict[str, Verdict]:
    if query is None:
        return {m: Verdict(INSUFFICIENT, None, "the record has no series key") for m in metrics}
    return judge_series(histories.get(query) or {}, metrics, threshold)


def _with_verdict(row: RunChange, verdicts: Mapping[str, Verdict], compared: Sequence[str]) -> RunChange:
    inverse = counted_elsewhere(row.metric, compared)
    if inverse is not None:
        return replace(row, regression=False, gate=COUNTED_ONCE, gate_reason=f"the inverse of {inverse}: judged there")
    v = verdicts[row.metric]
    return replace(row, regression=v.is_regression, gate=v.status, gate_reason=v.reason)


def explanation_lines(report: RunsReport) -> list[str]:
    """What a person needs beside the runs table: why a verdict is inconclusive, what the gate
    judges, and its verdict with its reason for each judged series and metric."""
    reasons = sorted({r.verdict_reason for r in report.rows if r.verdict_reason})
    lines = [f"verdict inconclusive: {why}; measure with `winml perf --invocations 5` or more" for why in reasons]
    if report.fail_threshold_pct is None:
        return lines
    lines.append(
        f"gate --fail-on-regression {report.fail_threshold_pct:g}%: judges each candidate series' stored history"
        f" (its newest {GATE_HISTORY} runs up to the candidate), whatever --baseline names; the table compares"
        " the two selections"
    )
    judged = [r for r in report.rows if r.gate is not None and r.gate != COUNTED_ONCE]
    lines += [
        f"gate: {report.label(r.key)} {metric_word(r.metric)}: {r.gate}: {r.gate_reason}"
        for r in judged
        if r.gate not in QUIET
    ]
    for status in QUIET:  # one summary line each: the table's gate column has every row's verdict
        rows = [r for r in judged if r.gate == status]
        if rows:
            series = len({r.key for r in rows})
            counts = Counter(str(r.gate_reason) for r in rows if r.gate_reason)
            reasons = sorted(counts, key=lambda w: (-counts[w], w))  # the most common first
            why = (f": {reasons[0]}" if reasons else "") + (
                f" (and {len(reasons) - 1} other reason(s); --format json has each)" if len(reasons) > 1 else ""
            )
            lines.append(
                f"gate: {status} for {len(rows)} metric(s) of {series} series{why if status == INSUFFICIENT else ''}"
            )
    return lines
