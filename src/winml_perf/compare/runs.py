"""A baseline set of cells against a candidate set (two runs, commits, versions or dates; see
results/selectors.py), matched on testbed x bundle x route x shape, over invocations (fresh
processes; stats/run_change.py): each side's median of invocation medians, Δ% between them with
the exact 95 % interval of the shift, a Mann-Whitney p-value over the invocation medians, the
verdict the interval gives, and whether it is a regression beyond a threshold (the pairwise flag;
compare/gate.py replaces it by the gate's verdict on each series' history). A cell recorded before
invocations existed counts as one invocation.

It reads cells (compare/cells.py), never a store: `winml compare runs` gets both sets from store
queries.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from winml_perf.compare.cells import KEY_FIELDS, Cell, Key, MeasuredSample, choose_metrics
from winml_perf.compare.text import bundle_labels, key_label, metric_word
from winml_perf.model.metrics import bigger_is_better
from winml_perf.stats import significance as sig
from winml_perf.stats.run_change import run_change
from winml_perf.support.errors import StoreError, UsageError
from winml_perf.support.human_numbers import fixed, human

#: Selectors that pick a run of each series: a series with one run has no pair.
PER_SERIES_SELECTORS = ("latest", "previous")


@dataclass(frozen=True)
class Side:
    """The cells one selector picked (``--baseline`` or ``--candidate``) and how it was read."""

    selector: str
    meaning: str
    cells: tuple[Cell, ...]


@dataclass(frozen=True)
class RunChange:
    key: Key
    candidate_key: Key
    metric: str
    n_baseline: int  # invocations a side (fresh processes; a cell without them counts as one)
    n_candidate: int
    baseline_median: float  # the median of the side's invocation medians
    candidate_median: float
    delta_pct: float
    delta_low_pct: float  # the exact 95 % interval of the shift (Hodges-Lehmann, Mann-Whitney)
    delta_high_pct: float
    p_value: float
    verdict: sig.SpeedVerdict
    regression: bool
    verdict_reason: str = ""  # why the verdict is inconclusive, when it is for too few invocations
    gate: str | None = None  # the gate's verdict (changepoint.Verdict.status), when gated
    gate_reason: str | None = None

    def sentence(self, label: str | None = None) -> str:
        """The change in one line; ``label``: the series as the report names it (RunsReport.label).
        It ends with one verdict: the one that decides the exit code (shown_verdict)."""
        sign = "+" if self.delta_pct >= 0 else ""
        return (
            f"{label or key_label(self.key)} {metric_word(self.metric)}: {human(self.baseline_median)} -> {human(self.candidate_median)} "
            f"({sign}{fixed(self.delta_pct, 2)}%{self.interval_text()} over {self.n_baseline} vs {self.n_candidate}"
            f" invocations): {self.shown_verdict()}"
        )

    def shown_verdict(self) -> str:
        """'REGRESSION (why)' when the row fails the gate; else the gate's verdict where a gate judged
        the series (--fail-on-regression: it decides the exit code), else the two runs' verdict."""
        shown = "REGRESSION" if self.regression else self.gate
        if shown is None:
            return self.verdict
        return f"{shown} ({self.gate_reason})" if self.gate_reason else shown

    def interval_text(self) -> str:
        """' [-9.3%, -4.1%]', or '' when there is no interval (too few invocations)."""
        if not (math.isfinite(self.delta_low_pct) and math.isfinite(self.delta_high_pct)):
            return ""
        return f" [{fixed(self.delta_low_pct, signed=True)}%, {fixed(self.delta_high_pct, signed=True)}%]"

    def to_dict(self) -> dict[str, Any]:
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
    bundles: Mapping[Key, str] = field(default_factory=dict)  # group key -> its bundle's label
    # candidate group key -> 'model changed between baseline and candidate: a1b2c3 → d4e5f6' (issue 35)
    model_changes: Mapping[Key, str] = field(default_factory=dict)

    def label(self, key: Key) -> str:
        """A group key as this report names it: its bundle's path tail in place of the name where
        two bundles of the report share a name (compare/text.bundle_labels)."""
        return key_label(key, self.bundles.get(tuple(key)))

    @property
    def regressions(self) -> tuple[RunChange, ...]:
        return tuple(r for r in self.rows if r.regression)

    def to_dict(self) -> dict[str, Any]:
        d = {
            "baseline": self.baseline,
            "candidate": self.candidate,
            "equivalence_pct": self.equivalence_pct,
            "fail_threshold_pct": self.fail_threshold_pct,
            "changes": [r.to_dict() for r in self.rows],
            "regressions": len(self.regressions),
            "notes": list(self.notes),
        }
        if self.model_changes:  # series whose bundle's content differs between the two sides (issue 35)
            d["model_changes"] = [{"series": self.label(k), "change": v} for k, v in self.model_changes.items()]
        return d

    def failure_text(self, change: RunChange) -> str:
        """A regression as the gate's failure names it: its sentence, and the model change between
        the two sides when its series has one (the rebuilt model is what to look at first)."""
        text = change.sentence(self.label(change.key))
        model = self.model_changes.get(tuple(change.candidate_key))
        return f"{text}; {model}" if model else text


def _pair_groups(
    base: dict[Key, list[Invocation]],
    cand: dict[Key, list[Invocation]],
    force: bool,
    notes: list[str],
    per_series: bool = False,
    label: Callable[[Key], str] = key_label,
) -> list[tuple[Key, Key]]:
    common = sorted(set(base) & set(cand), key=str)
    only_b = sorted(set(base) - set(cand), key=str)
    only_c = sorted(set(cand) - set(base), key=str)
    if not only_b and not only_c:
        return [(k, k) for k in common]
    if per_series and common:  # previous/latest of each series: a series with one run has no pair
        notes.extend(
            [f"not compared (one run of this series so far): {label(k)}" for k in only_c]
            + [f"not compared (no ok cell in its latest run): {label(k)}" for k in only_b]
        )
        return [(k, k) for k in common]
    if not force:
        what = "; ".join(
            [f"only in baseline: {label(k)}" for k in only_b[:3]]
            + [f"only in candidate: {label(k)}" for k in only_c[:3]]
        )
        raise UsageError(
            f"baseline and candidate do not measure the same testbed, bundle, route and shape ({what})",
            "narrow both with --bundle/--route/--testbed/--prompt-tokens/--max-new-tokens, or pass --force to compare anyway",
        )
    if not common and len(base) == 1 and len(cand) == 1:
        (kb,), (kc,) = base, cand
        notes.append(f"--force: comparing {label(kb)} with {label(kc)}")
        return [(kb, kc)]
    notes.extend(
        [f"--force: not compared, only in baseline: {label(k)}" for k in only_b]
        + [f"--force: not compared, only in candidate: {label(k)}" for k in only_c]
    )
    return [(k, k) for k in common]


#: One invocation's measured samples (a fresh process; a cell without invocations is one).
Invocation = tuple[MeasuredSample, ...]


def invocations_of_cell(cell: Cell) -> list[Invocation]:
    """A cell's measured samples split by the invocation they ran in, in invocation order."""
    by_invocation: dict[int, list[MeasuredSample]] = {}
    for s in cell.samples:
        by_invocation.setdefault(-1 if s.invocation is None else s.invocation, []).append(s)
    return [tuple(v) for _, v in sorted(by_invocation.items())]


def samples_by_group(cells: Sequence[Cell], notes: list[str], side: str) -> dict[Key, list[Invocation]]:
    """Group key -> the invocations of one side's ok cells; failed cells counted in the notes."""
    ok = [c for c in cells if c.ok]
    if len(ok) < len(cells):
        notes.append(f"{side}: {len(cells) - len(ok)} failed cell(s) left out")
    out: dict[Key, list[Invocation]] = {}
    for c in ok:
        out.setdefault(c.key, []).extend(invocations_of_cell(c))
    return out


def _flat(invocations: Sequence[Invocation]) -> list[MeasuredSample]:
    return [s for inv in invocations for s in inv]


def compare_samples(
    key: Key,
    cand_key: Key,
    metric: str,
    base: Sequence[Invocation],
    cand: Sequence[Invocation],
    *,
    equivalence_pct: float,
    fail_threshold_pct: float | None,
) -> RunChange:
    """One metric of one group over invocations (stats/run_change.py): medians, Δ% with its
    interval, p, verdict, and the pairwise regression flag (compare/gate.py replaces it by the
    gate's verdict on the series): a 'slower' verdict worse than the threshold."""

    def values(invocations: Sequence[Invocation]) -> list[list[float]]:
        out = [[s.values[metric] for s in inv if metric in s.values] for inv in invocations]
        return [v for v in out if v]

    up = bigger_is_better(metric)
    ch = run_change(values(base), values(cand), higher_is_better=up, equivalence=equivalence_pct / 100.0)
    d = sig.delta_pct(ch.baseline, ch.candidate)
    worse = -d if up else d
    regression = fail_threshold_pct is not None and ch.verdict == sig.SLOWER and worse > fail_threshold_pct
    return RunChange(
        key,
        cand_key,
        metric,
        ch.invocations_baseline,
        ch.invocations_candidate,
        ch.baseline,
        ch.candidate,
        d,
        ch.low * 100.0,
        ch.high * 100.0,
        ch.p_value,
        ch.verdict,
        regression,
        ch.why,
    )


#: Hex digits of a bundle's content digest in a model change sentence.
DIGEST_DIGITS = 6


def model_change(base: Sequence[Cell], cand: Sequence[Cell]) -> str | None:
    """'model changed between baseline and candidate: a1b2c3 → d4e5f6' when the ok cells of one
    series' two sides ran bundles of other contents (record/bundle_identity.py); None when they
    ran the same one, a side has no digest (records made before digests), or the sides track
    other bundles (a --force pairing: their contents differ, no model of one changed). A side of
    several digests names each."""

    def digests(cells: Sequence[Cell]) -> list[str]:
        return sorted({c.bundle_id for c in cells if c.ok and c.bundle_id})

    def tracked(cells: Sequence[Cell]) -> set[tuple[str | None, str | None]]:
        return {(c.bundle, c.bundle_where) for c in cells if c.ok}

    b, c = digests(base), digests(cand)
    if not b or not c or b == c or tracked(base) != tracked(cand):
        return None
    return (
        "model changed between baseline and candidate: "
        f"{', '.join(d[:DIGEST_DIGITS] for d in b)} → {', '.join(d[:DIGEST_DIGITS] for d in c)}"
    )


def _check_sides(baseline: Side, candidate: Side) -> None:
    overlap = {c.uid for c in baseline.cells} & {c.uid for c in candidate.cells}
    if overlap:
        raise UsageError(
            f"--baseline {baseline.selector!r} and --candidate {candidate.selector!r} select {len(overlap)} of the same records",
            "pick two different runs, commits, versions or dates",
        )


def _check_groups(flag: str, side: Side, groups: Mapping[Key, list[Invocation]]) -> None:
    if not groups:
        raise StoreError(
            f"{flag} {side.selector!r} ({side.meaning}) has no ok cells ({len(side.cells)} failed)",
            "pick a selection whose cells succeeded (see `winml results list --status ok`)",
        )


def compare_runs(
    baseline: Side,
    candidate: Side,
    *,
    metrics: Sequence[str] | None = None,
    equivalence_pct: float = sig.EQUIVALENCE * 100,
    fail_threshold_pct: float | None = None,
    force: bool = False,
) -> RunsReport:
    """Baseline cells against candidate cells, matched on testbed x bundle x route x shape."""
    _check_sides(baseline, candidate)
    notes: list[str] = []
    base = samples_by_group(baseline.cells, notes, "baseline")
    cand = samples_by_group(candidate.cells, notes, "candidate")
    _check_groups("--baseline", baseline, base)
    _check_groups("--candidate", candidate, cand)
    per_series = baseline.selector in PER_SERIES_SELECTORS and candidate.selector in PER_SERIES_SELECTORS
    cells = (*baseline.cells, *candidate.cells)
    names = bundle_labels((c.bundle, c.bundle_where) for c in cells)
    bundles = {c.key: names[(c.bundle, c.bundle_where or None)] for c in cells}
    rows = [
        compare_samples(
            kb,
            kc,
            metric,
            base[kb],
            cand[kc],
            equivalence_pct=equivalence_pct,
            fail_threshold_pct=fail_threshold_pct,
        )
        for kb, kc in _pair_groups(base, cand, force, notes, per_series, lambda k: key_label(k, bundles.get(k)))
        for metric in choose_metrics(metrics, _flat(base[kb]), _flat(cand[kc]))
    ]
    if not rows:
        raise StoreError(
            "nothing to compare: no metric has samples on both sides", "check the selections with `winml results list`"
        )
    changes: dict[Key, str] = {}
    for kb, kc in sorted({(r.key, r.candidate_key) for r in rows}, key=str):
        sentence = model_change([c for c in baseline.cells if c.key == kb], [c for c in candidate.cells if c.key == kc])
        if sentence:
            changes[kc] = sentence
            notes.append(f"{key_label(kc, bundles.get(kc))}: {sentence}")
    return RunsReport(
        baseline.meaning,
        candidate.meaning,
        tuple(rows),
        fail_threshold_pct,
        equivalence_pct,
        tuple(notes),
        bundles,
        changes,
    )
