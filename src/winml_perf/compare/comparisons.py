"""Comparisons read from the store: routes of one interleaved run, and a baseline run against a
candidate run. Statistics come from results/significance.py; this module selects and pairs data.

- ``compare_routes``: every forced route against the baseline route (default 'config') of the same
  interleaved sweep, per shape and metric: speedup with a 95 % CI and a verdict against the
  equivalence band. Runs of several invocations: over paired invocations (the same invocation
  round; uncertainty.paired_ratio), so what differs between processes is in the interval. Runs of
  one process: a bootstrap over the rounds both routes ran in it (round_index pairs them).
- ``compare_runs``: records picked by two selectors (run id, git commit, package version, date,
  'latest', 'previous'), matched on testbed x bundle x route x shape: Δ% of medians, a
  Mann-Whitney U p-value, a verdict, and whether it is a regression beyond a threshold.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from winml_perf.model.metrics import METRICS, bigger_is_better, get
from winml_perf.results.selectors import Selection, resolve_run_id, select  # noqa: F401  (select is re-exported)
from winml_perf.results.store import Store
from winml_perf.stats import significance as sig
from winml_perf.support.errors import StoreError, UsageError

#: Metrics compared by default, in table order, when both sides have them.
DEFAULT_METRICS = tuple(m.name for m in METRICS if m.compared)
#: Metrics --metric may name: every per-iteration metric the samples table keeps.
COMPARABLE_METRICS = tuple(m.name for m in METRICS if m.stored)
GROUP_FIELDS = ("testbed_id", "bundle", "route", "prompt_tokens", "max_new_tokens")
#: A group key is GROUP_FIELDS plus the series key (options that change what is measured).
KEY_FIELDS = GROUP_FIELDS + ("series_key",)
PER_SERIES_SELECTORS = ("latest", "previous")


def metric_word(metric: str) -> str:
    m = get(metric)
    return m.word if m else metric


def shape_label(prompt_tokens: Any, max_new_tokens: Any) -> str:
    parts = []
    if prompt_tokens is not None:
        parts.append(f"p{prompt_tokens}")
    if max_new_tokens is not None:
        parts.append(f"n{max_new_tokens}")
    return " ".join(parts) or "-"


def parse_pct(value: float | str | None, flag: str) -> float | None:
    """'2%', '2' or 0.02-style numbers are all 'two percent' -> 2.0."""
    if value is None:
        return None
    text = str(value).strip().rstrip("%").strip()
    try:
        pct = float(text)
    except ValueError:
        raise UsageError(f"{flag} {value!r} is not a percentage", f"e.g. {flag} 2%") from None
    if not math.isfinite(pct) or pct < 0:
        raise UsageError(f"{flag} must be a percentage >= 0, got {value!r}", f"e.g. {flag} 2%")
    return pct


def _samples_by_record(store: Store, record_ids: Sequence[int]) -> dict[int, list[dict]]:
    out: dict[int, list[dict]] = defaultdict(list)
    for s in store.samples(record_ids, phase="measured"):
        out[s["record_id"]].append(s)
    return out


def _metrics_present(samples: Iterable[dict], wanted: Sequence[str]) -> list[str]:
    samples = list(samples)
    return [m for m in wanted if any(s.get(m) is not None for s in samples)]


def _choose_metrics(metrics: Sequence[str] | None, base: list[dict], cand: list[dict]) -> list[str]:
    if metrics:
        unknown = [m for m in metrics if m not in COMPARABLE_METRICS]
        if unknown:
            raise UsageError(
                f"--metric {unknown[0]!r} is not a per-iteration metric", f"use one of {', '.join(COMPARABLE_METRICS)}"
            )
        return [m for m in metrics if m in _metrics_present(base, metrics) and m in _metrics_present(cand, metrics)]
    both = [m for m in _metrics_present(base, DEFAULT_METRICS) if m in _metrics_present(cand, DEFAULT_METRICS)]
    if any(get(m).token for m in both):  # a token session's latency is its e2e time: compare its token metrics
        both = [m for m in both if get(m).token]
    return both


# == routes ========================================================================================
@dataclass(frozen=True)
class RouteComparison:
    bundle: str | None
    testbed_id: str | None
    prompt_tokens: int | None
    max_new_tokens: int | None
    route: str
    baseline_route: str
    metric: str
    speedup: float
    ci_low: float
    ci_high: float
    verdict: str
    rounds: int
    n_baseline: int
    n_candidate: int
    equivalence_pct: float
    pairing: str = "rounds"  # what pairs the two routes: "invocations" (fresh processes) or "rounds" (in one process)

    @property
    def half_width(self) -> float:
        """The larger distance from the speedup to a CI bound, on the printed (≥ 1) scale."""
        s, lo, hi = self._oriented()
        return max(s - lo, hi - s) if all(map(math.isfinite, (s, lo, hi))) else math.nan

    @property
    def enough(self) -> bool:
        """Whether the rounds behind this comparison support an interval and a verdict."""
        ci = sig.RatioCI(self.speedup, self.ci_low, self.ci_high, self.rounds, self.n_baseline, self.n_candidate, 0)
        return _enough(ci, self.pairing)

    def point_sentence(self) -> str:
        """The point ratio alone, for a comparison too small for an interval: 'ep=cpu decode: 1.15 ×
        slower than config (p4 n4, 3 rounds)'."""
        if not math.isfinite(self.speedup):
            return self.sentence()
        s, _, _ = self._oriented()
        direction = "slower than" if self._slower() else "faster than"
        return (
            f"{self.route} {metric_word(self.metric)}: {s:.2f} × {direction} {self.baseline_route} "
            f"({shape_label(self.prompt_tokens, self.max_new_tokens)}, {self._pairs_text()})"
        )

    def _slower(self) -> bool:
        """Whether the sentence says 'slower': the verdict decides when it has a side, else the point."""
        if self.verdict in (sig.FASTER, sig.SLOWER):
            return self.verdict == sig.SLOWER
        return math.isfinite(self.speedup) and self.speedup < 1.0

    def _oriented(self) -> tuple[float, float, float]:
        if self._slower():
            return 1.0 / self.speedup, 1.0 / self.ci_high, 1.0 / self.ci_low
        return self.speedup, self.ci_low, self.ci_high

    def interval_text(self) -> str:
        """The CI around the printed speedup: '± 0.05' when symmetric at two decimals, else
        '+0.90/−0.03' (a lone '± 0.90' of the larger side would suggest a CI reaching below 1)."""
        s, lo, hi = self._oriented()
        up, down = f"{max(hi - s, 0.0):.2f}", f"{max(s - lo, 0.0):.2f}"
        return f"± {up}" if up == down else f"+{up}/−{down}"

    def sentence(self) -> str:
        """'ep=webgpu decode ran 1.84 ± 0.05 × faster than config (p16 n32): faster'."""
        if not math.isfinite(self.speedup):
            return f"{self.route} {metric_word(self.metric)}: no paired rounds with {self.baseline_route}"
        s, _, _ = self._oriented()
        direction = (
            "as fast as" if self.verdict == sig.EQUIVALENT else "slower than" if self._slower() else "faster than"
        )
        text = (
            f"{self.route} {metric_word(self.metric)} ran {s:.2f} {self.interval_text()} × {direction} "
            f"{self.baseline_route} ({shape_label(self.prompt_tokens, self.max_new_tokens)}, {self._pairs_text()})"
        )
        if self.verdict == sig.EQUIVALENT:
            return text + f": equivalent within ±{self.equivalence_pct:g}%"
        if self.verdict == sig.INCONCLUSIVE:
            if not self.enough:
                return text + (
                    f": inconclusive ({min(self.n_baseline, self.n_candidate)} iterations in {self.rounds} rounds are too few;"
                    f" measure at least {sig.MIN_PAIRED_ROUNDS} interleaved rounds: more --iterations)"
                )
            return text + ": inconclusive (the 95% CI spans both sides; run more rounds)"
        return text + f": {self.verdict}"

    def _pairs_text(self) -> str:
        return f"{self.rounds} paired invocations" if self.pairing == INVOCATIONS else f"{self.rounds} rounds"

    def to_dict(self) -> dict:
        d = asdict(self)
        d["half_width"] = self.half_width
        d["sentence"] = self.sentence()
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in d.items()}


@dataclass(frozen=True)
class RoutesReport:
    run_id: str
    baseline_route: str
    rows: tuple[RouteComparison, ...]
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        return {
            "run_id": self.run_id,
            "baseline_route": self.baseline_route,
            "comparisons": [r.to_dict() for r in self.rows],
            "notes": list(self.notes),
        }


def _resolve_run(store: Store, run: str | None, baseline_route: str, filters: Mapping[str, Any]) -> str:
    if run:
        return resolve_run_id(store, run, "--run", **filters)
    runs = store.run_ids(**filters)
    for r in runs:  # newest first: the latest run with the baseline route and another route
        routes = {x["route"] for x in store.records(run_id=r, status="ok", **filters)}
        if baseline_route in routes and len(routes) > 1:
            return r
    raise StoreError(
        f"no run in {store.display} measured route {baseline_route!r} together with another route",
        f"run e.g. `winml perf BUNDLE --route {baseline_route} --route ep=cpu`, or pass --run / --baseline-route",
    )


def _rounds(samples: Sequence[dict], metric: str) -> dict[int, list[float]]:
    out: dict[int, list[float]] = defaultdict(list)
    for s in samples:
        if s.get(metric) is not None:
            out[int(s["round_index"])].append(float(s[metric]))
    return dict(out)


INVOCATIONS = "invocations"
ROUNDS = "rounds"


def invocation_ratio(
    baseline_rounds: Mapping[int, Sequence[float]], candidate_rounds: Mapping[int, Sequence[float]]
) -> sig.RatioCI:
    """candidate / baseline over paired invocations (keys: the invocation round both ran): the
    median of the per-pair ratios of medians with uncertainty.paired_ratio's interval."""
    from winml_perf.stats import paired_ratio

    common = sorted(
        k
        for k in set(baseline_rounds) & set(candidate_rounds)
        if np.isfinite(baseline_rounds[k]).any() and np.isfinite(candidate_rounds[k]).any()
    )
    n_b = sum(len(baseline_rounds[k]) for k in common)
    n_c = sum(len(candidate_rounds[k]) for k in common)
    if not common:
        return sig.RatioCI(math.nan, math.nan, math.nan, 0, n_b, n_c, 0)
    r = paired_ratio([candidate_rounds[k] for k in common], [baseline_rounds[k] for k in common])
    return sig.RatioCI(r.estimate, r.low, r.high, r.pairs, n_b, n_c, 0)


def _invocations_of(store: Store, record_id: int) -> int:
    """How many invocations a stored cell ran (1 for records made before invocations existed)."""
    record = store.get(record_id)["record"]
    return len(record.get("invocations") or ()) or 1


def route_ratio(
    base: Sequence[dict],
    cand: Sequence[dict],
    metric: str,
    paired_invocations: bool,
    *,
    resamples: int = sig.BOOTSTRAP_RESAMPLES,
    seed: int = sig.BOOTSTRAP_SEED,
) -> tuple[sig.RatioCI, str]:
    """The candidate/baseline ratio of one metric and what paired the samples (INVOCATIONS or ROUNDS)."""
    if paired_invocations:
        return invocation_ratio(_rounds(base, metric), _rounds(cand, metric)), INVOCATIONS
    return sig.paired_ratio_ci(_rounds(base, metric), _rounds(cand, metric), resamples=resamples, seed=seed), ROUNDS


def _enough(ci: sig.RatioCI, pairing: str) -> bool:
    if pairing == INVOCATIONS:
        return ci.rounds >= 2 and math.isfinite(ci.ci_low) and math.isfinite(ci.ci_high)
    return sig.enough_for_ci(ci)


def compare_routes(
    store: Store,
    run: str | None = None,
    *,
    baseline_route: str = "config",
    routes: Sequence[str] | None = None,
    metrics: Sequence[str] | None = None,
    equivalence_pct: float = sig.EQUIVALENCE * 100,
    resamples: int = sig.BOOTSTRAP_RESAMPLES,
    seed: int = sig.BOOTSTRAP_SEED,
    **filters: Any,
) -> RoutesReport:
    """Each route of one run against ``baseline_route``, per shape and metric."""
    run_id = _resolve_run(store, run, baseline_route, filters)
    records = store.records(run_id=run_id, **filters)
    notes = [
        f"{r['route']} {shape_label(r['prompt_tokens'], r['max_new_tokens'])}: cell failed, not compared"
        for r in records
        if r["status"] != "ok"
    ]
    records = [r for r in records if r["status"] == "ok"]
    present = sorted({r["route"] for r in records})
    if baseline_route not in present:
        raise UsageError(
            f"run {run_id} has no ok cells of route {baseline_route!r} (routes: {', '.join(present) or 'none'})",
            "pass --baseline-route with one of them",
        )
    wanted = list(routes) if routes else [x for x in present if x != baseline_route]
    missing = [x for x in wanted if x not in present]
    if missing:
        raise UsageError(
            f"run {run_id} has no ok cells of route(s) {', '.join(missing)}",
            f"routes in this run: {', '.join(present)}",
        )
    by_id = _samples_by_record(store, [r["id"] for r in records])
    multi = {r["id"]: _invocations_of(store, r["id"]) > 1 for r in records}
    groups: dict[tuple, dict[str, list[dict]]] = defaultdict(lambda: defaultdict(list))
    paired: dict[tuple, dict[str, bool]] = defaultdict(dict)
    for r in records:
        key = (r["bundle"], r["testbed_id"], r["prompt_tokens"], r["max_new_tokens"])
        groups[key][r["route"]].extend(by_id[r["id"]])
        paired[key][r["route"]] = multi[r["id"]]
    rows = []
    for key in sorted(groups, key=lambda k: tuple("" if v is None else str(v).zfill(12) for v in k)):
        by_route = groups[key]
        base = by_route.get(baseline_route)
        if not base:
            notes.append(f"{shape_label(key[2], key[3])}: no {baseline_route} cell; skipped")
            continue
        for route in wanted:
            cand = by_route.get(route)
            if not cand:
                continue
            invocations = paired[key][baseline_route] and paired[key][route]
            for metric in _choose_metrics(metrics, base, cand):
                ci, pairing = route_ratio(base, cand, metric, invocations, resamples=resamples, seed=seed)
                s, lo, hi = sig.speedup_ci(ci, bigger_is_better(metric))
                verdict = sig.ci_verdict(lo, hi, equivalence_pct / 100.0) if _enough(ci, pairing) else sig.INCONCLUSIVE
                rows.append(
                    RouteComparison(
                        key[0],
                        key[1],
                        key[2],
                        key[3],
                        route,
                        baseline_route,
                        metric,
                        s,
                        lo,
                        hi,
                        verdict,
                        ci.rounds,
                        ci.n_baseline,
                        ci.n_candidate,
                        equivalence_pct,
                        pairing,
                    )
                )
    return RoutesReport(run_id, baseline_route, tuple(rows), tuple(notes))


# == runs ==========================================================================================
def _group_key(r: Mapping[str, Any]) -> tuple:
    return tuple(r.get(f) for f in KEY_FIELDS)


def key_label(key: Sequence[Any]) -> str:
    testbed, bundle, route, p, n = key[:5]
    return f"{bundle} {route} {shape_label(p, n)} @{testbed}"


@dataclass(frozen=True)
class RunChange:
    key: tuple
    candidate_key: tuple
    metric: str
    n_baseline: int
    n_candidate: int
    baseline_median: float
    candidate_median: float
    delta_pct: float
    p_value: float
    u: float
    verdict: str
    regression: bool
    gate: str | None = None  # the gate's verdict (changepoint.Verdict.status), when gated
    gate_reason: str | None = None

    def sentence(self) -> str:
        sign = "+" if self.delta_pct >= 0 else ""
        flag = (
            f"  REGRESSION ({self.gate_reason})"
            if self.regression and self.gate_reason
            else "  REGRESSION"
            if self.regression
            else ""
        )
        return (
            f"{key_label(self.key)} {metric_word(self.metric)}: {self.baseline_median:.4g} -> {self.candidate_median:.4g} "
            f"({sign}{self.delta_pct:.2f}%, p={self.p_value:.3g}): {self.verdict}{flag}"
        )

    def to_dict(self) -> dict:
        d = asdict(self)
        d["key"] = dict(zip(KEY_FIELDS, self.key))
        d["candidate_key"] = dict(zip(KEY_FIELDS, self.candidate_key))
        d["sentence"] = self.sentence()
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in d.items()}


@dataclass(frozen=True)
class RunsReport:
    baseline: str
    candidate: str
    rows: tuple[RunChange, ...]
    fail_threshold_pct: float | None
    equivalence_pct: float
    notes: tuple[str, ...] = field(default=())

    @property
    def regressions(self) -> tuple[RunChange, ...]:
        return tuple(r for r in self.rows if r.regression)

    def to_dict(self) -> dict:
        return {
            "baseline": self.baseline,
            "candidate": self.candidate,
            "equivalence_pct": self.equivalence_pct,
            "fail_threshold_pct": self.fail_threshold_pct,
            "changes": [r.to_dict() for r in self.rows],
            "regressions": len(self.regressions),
            "notes": list(self.notes),
        }


def _pair_groups(
    base: dict[tuple, list], cand: dict[tuple, list], force: bool, notes: list[str], per_series: bool = False
) -> list[tuple[tuple, tuple]]:
    common = sorted(set(base) & set(cand), key=str)
    only_b = sorted(set(base) - set(cand), key=str)
    only_c = sorted(set(cand) - set(base), key=str)
    if not only_b and not only_c:
        return [(k, k) for k in common]
    if per_series and common:  # previous/latest of each series: a series with one run has no pair
        notes.extend(
            [f"not compared (one run of this series so far): {key_label(k)}" for k in only_c]
            + [f"not compared (no ok cell in its latest run): {key_label(k)}" for k in only_b]
        )
        return [(k, k) for k in common]
    if not force:
        what = "; ".join(
            [f"only in baseline: {key_label(k)}" for k in only_b[:3]]
            + [f"only in candidate: {key_label(k)}" for k in only_c[:3]]
        )
        raise UsageError(
            f"baseline and candidate do not measure the same testbed, bundle, route and shape ({what})",
            "narrow both with --bundle/--route/--testbed/--prompt-tokens/--max-new-tokens, or pass --force to compare anyway",
        )
    if not common and len(base) == 1 and len(cand) == 1:
        (kb,), (kc,) = base, cand
        notes.append(f"--force: comparing {key_label(kb)} with {key_label(kc)}")
        return [(kb, kc)]
    notes.extend(
        [f"--force: not compared, only in baseline: {key_label(k)}" for k in only_b]
        + [f"--force: not compared, only in candidate: {key_label(k)}" for k in only_c]
    )
    return [(k, k) for k in common]


def _groups(
    store: Store, records: Sequence[dict], notes: list[str], side: str
) -> tuple[dict[tuple, list[dict]], dict[tuple, list[dict]]]:
    """(group key -> its samples, group key -> its ok records) of one side."""
    ok = [r for r in records if r["status"] == "ok"]
    if len(ok) < len(records):
        notes.append(f"{side}: {len(records) - len(ok)} failed cell(s) left out")
    by_id = _samples_by_record(store, [r["id"] for r in ok])
    out: dict[tuple, list[dict]] = defaultdict(list)
    rows: dict[tuple, list[dict]] = defaultdict(list)
    for r in ok:
        out[_group_key(r)].extend(by_id[r["id"]])
        rows[_group_key(r)].append(r)
    return dict(out), dict(rows)


def _gated(
    store: Store, changes: Sequence[RunChange], candidate: Sequence[dict], threshold_pct: float
) -> list[RunChange]:
    """``changes`` (one group) with the regression gate's verdicts on the candidate's series (results/gate.py)."""
    from dataclasses import replace

    from winml_perf.compare import gate

    compared = [c.metric for c in changes]
    inverse = {c.metric: gate.counted_elsewhere(c.metric, compared) for c in changes}
    verdicts = gate.judge_series(store, candidate, [m for m in compared if inverse[m] is None], threshold_pct)
    out = []
    for c in changes:
        if inverse[c.metric] is not None:
            out.append(
                replace(
                    c,
                    regression=False,
                    gate=gate.COUNTED_ONCE,
                    gate_reason=f"the inverse of {inverse[c.metric]}: judged there",
                )
            )
        else:
            v = verdicts[c.metric]
            out.append(replace(c, regression=v.is_regression, gate=v.status, gate_reason=v.reason))
    return out


def compare_samples(
    key: tuple,
    cand_key: tuple,
    metric: str,
    base: Sequence[dict],
    cand: Sequence[dict],
    *,
    equivalence_pct: float,
    fail_threshold_pct: float | None,
) -> RunChange:
    """One metric of one group: medians, Δ%, Mann-Whitney p, verdict, and the pairwise regression
    flag (compare_runs replaces it by the change-point gate's verdict on the series)."""
    b = [s[metric] for s in base if s.get(metric) is not None]
    c = [s[metric] for s in cand if s.get(metric) is not None]
    mb, mc = float(np.median(b)), float(np.median(c))
    d = sig.delta_pct(mb, mc)
    mw = sig.mann_whitney_u(c, b)
    up = bigger_is_better(metric)
    regression = fail_threshold_pct is not None and sig.is_regression(d, mw.p_value, up, fail_threshold_pct)
    return RunChange(
        key,
        cand_key,
        metric,
        len(b),
        len(c),
        mb,
        mc,
        d,
        mw.p_value,
        mw.u,
        sig.change_verdict(d, mw.p_value, up, equivalence_pct / 100.0),
        regression,
    )


def compare_runs(
    store: Store,
    baseline: str,
    candidate: str,
    *,
    metrics: Sequence[str] | None = None,
    equivalence_pct: float = sig.EQUIVALENCE * 100,
    fail_threshold_pct: float | None = None,
    force: bool = False,
    **filters: Any,
) -> RunsReport:
    """Baseline records against candidate records, matched on testbed x bundle x route x shape."""
    b_sel = select(store, baseline, "--baseline", **filters)
    c_sel = select(store, candidate, "--candidate", **filters)
    overlap = {r["id"] for r in b_sel.records} & {r["id"] for r in c_sel.records}
    if overlap:
        raise UsageError(
            f"--baseline {baseline!r} and --candidate {candidate!r} select {len(overlap)} of the same records",
            "pick two different runs, commits, versions or dates",
        )
    notes: list[str] = []
    (base, _), (cand, cand_rows) = (
        _groups(store, b_sel.records, notes, "baseline"),
        _groups(store, c_sel.records, notes, "candidate"),
    )
    for side, sel, groups in (("--baseline", b_sel, base), ("--candidate", c_sel, cand)):
        if not groups:
            raise StoreError(
                f"{side} {sel.selector!r} ({sel.meaning}) has no ok cells ({len(sel.records)} failed)",
                "pick a selection whose cells succeeded (see `winml results list --status ok`)",
            )
    per_series = b_sel.selector in PER_SERIES_SELECTORS and c_sel.selector in PER_SERIES_SELECTORS
    rows = []
    for kb, kc in _pair_groups(base, cand, force, notes, per_series):
        changes = [
            compare_samples(
                kb,
                kc,
                metric,
                base[kb],
                cand[kc],
                equivalence_pct=equivalence_pct,
                fail_threshold_pct=fail_threshold_pct,
            )
            for metric in _choose_metrics(metrics, base[kb], cand[kc])
        ]
        rows += (
            _gated(store, changes, cand_rows[kc], fail_threshold_pct)
            if fail_threshold_pct is not None and changes
            else changes
        )
    if not rows:
        raise StoreError(
            "nothing to compare: no metric has samples on both sides", "check the selections with `winml results list`"
        )
    return RunsReport(b_sel.meaning, c_sel.meaning, tuple(rows), fail_threshold_pct, equivalence_pct, tuple(notes))
