"""Routes of one interleaved run against a baseline route (default 'config'), per shape and metric:
speedup with a 95 % CI and a verdict against the equivalence band. Statistics come from
stats/significance.py; this module pairs the cells' samples.

Runs of several invocations are compared over paired invocations (the same invocation round;
stats.paired_ratio), so what differs between processes is in the interval. Runs of one process:
a bootstrap over the rounds both routes ran in it (round_index pairs them).

It reads cells (compare/cells.py), never a store: `winml compare routes` gets them from a store
query, the closing summary of `winml perf` from the run in memory.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from winml_perf.compare.cells import Cell, MeasuredSample, choose_metrics
from winml_perf.compare.text import metric_word, shape_label
from winml_perf.model.equivalence_view import NOT_CHECKED, EquivalenceView
from winml_perf.model.metrics import bigger_is_better
from winml_perf.model.route import bare_label
from winml_perf.stats import significance as sig
from winml_perf.support.errors import UsageError
from winml_perf.support.human_numbers import fixed

INVOCATIONS = "invocations"
ROUNDS = "rounds"


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
    verdict: sig.SpeedVerdict
    rounds: int
    n_baseline: int
    n_candidate: int
    equivalence_pct: float
    pairing: str = ROUNDS  # what pairs the two routes: INVOCATIONS (fresh processes) or ROUNDS (in one process)
    pooled_speedup: float = math.nan  # the same orientation from the pooled medians (what the table shows)
    # the route's numerical equivalence (issue 24): is the faster route still the same model?
    equivalence: EquivalenceView = EquivalenceView()

    @property
    def not_equivalent(self) -> bool:
        """The route computes something else than its reference: its speed wins nothing."""
        return self.equivalence.not_equivalent

    def verdict_shown(self) -> str:
        """The speed verdict, marked when the route is not equivalent ('faster (NOT numerically equivalent)')."""
        return f"{self.verdict} (NOT numerically equivalent)" if self.not_equivalent else self.verdict

    def equivalence_text(self) -> str:
        """'numerically equivalent to config', 'NOT numerically equivalent to config (top-1 44 %, ...)',
        'within precision tolerance of config (KL ...)', 'numerical equivalence not checked'."""
        e = self.equivalence
        if not e.checked:
            return "numerical equivalence not checked"
        ref = e.reference or "?"
        if e.verdict == "equivalent":
            return f"numerically equivalent to {ref}"
        figures = f" ({e.figures_text()})" if e.figures_text() else ""
        if e.not_equivalent:
            return f"NOT numerically equivalent to {ref}{figures}"
        return f"{e.verdict} of {ref}{figures}"

    @property
    def half_width(self) -> float:
        """The larger distance from the speedup to a CI bound, on the printed (≥ 1) scale."""
        s, lo, hi = self._oriented()
        return max(s - lo, hi - s) if all(map(math.isfinite, (s, lo, hi))) else math.nan

    @property
    def enough(self) -> bool:
        """Whether the rounds behind this comparison support an interval and a verdict."""
        ci = sig.RatioCI(self.speedup, self.ci_low, self.ci_high, self.rounds, self.n_baseline, self.n_candidate, 0)
        return enough(ci, self.pairing)

    def point_sentence(self, equivalence: bool = True) -> str:
        """The point ratio alone, for a comparison too small for an interval: 'ep=cpu decode: 1.15 ×
        slower than config (p4 n4, 3 rounds)' (then the equivalence verdict, unless told not to)."""
        if not math.isfinite(self.speedup):
            return self.sentence() if equivalence else self.speed_sentence(marked=False)
        s, _, _ = self._oriented()
        direction = "slower than" if self._slower() else "faster than"
        return (
            f"{self.route} {metric_word(self.metric)}: {fixed(s, 2)} times {direction} {self.baseline_route} "
            f"({shape_label(self.prompt_tokens, self.max_new_tokens)}, {self._pairs_text()})"
            + (f"; {self.equivalence_text()}" if equivalence else "")
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
        up, down = fixed(max(hi - s, 0.0), 2), fixed(max(s - lo, 0.0), 2)
        return f"± {up}" if up == down else f"+{up}/−{down}"

    def sentence(self) -> str:
        """'ep=webgpu decode ran 1.84 ± 0.05 times faster than config (p16 n32, 5 rounds): faster;
        equivalent against config'; an asymmetric interval goes beside the shape: 'ran 161.3 times
        faster than config (95% CI +170.5/−124.8; p16 n4, 5 rounds)' (the speed verdict marked 'NOT
        equivalent' when the route computes something else)."""
        return f"{self.speed_sentence()}; {self.equivalence_text()}"

    def speed_sentence(self, marked: bool = True) -> str:
        """The ratio and its speed verdict; ``marked``: 'NOT equivalent' beside the verdict of such a route."""
        if not math.isfinite(self.speedup):
            return f"{self.route} {metric_word(self.metric)}: no paired rounds with {self.baseline_route}"
        s, _, _ = self._oriented()
        direction = (
            "as fast as" if self.verdict == sig.EQUIVALENT else "slower than" if self._slower() else "faster than"
        )
        interval = self.interval_text()
        if interval.startswith("±"):  # hyperfine's sentence: '1.84 ± 0.05 times faster than config'
            lead, where = f"{fixed(s, 2)} {interval}", ""
        else:  # an asymmetric interval: the sentence first, the interval's two sides beside the shape
            lead, where = fixed(s, 2), f"95% CI {interval}; "
        text = (
            f"{self.route} {metric_word(self.metric)} ran {lead} times {direction} {self.baseline_route}"
            f" ({where}{shape_label(self.prompt_tokens, self.max_new_tokens)}, {self._pairs_text()})"
        )
        if self.verdict == sig.EQUIVALENT:
            return text + f": equivalent within ±{self.equivalence_pct:g}%"
        if self.verdict == sig.INCONCLUSIVE:
            if not self.enough:
                return text + f": inconclusive ({self._too_few()})"
            return text + f": inconclusive (the 95% CI spans both sides; {self._remedy()})"
        return text + f": {self.verdict_shown() if marked else self.verdict}"

    def _remedy(self) -> str:
        return "raise --invocations" if self.pairing == INVOCATIONS else "raise --iterations (more rounds)"

    def _too_few(self) -> str:
        if self.pairing == INVOCATIONS:
            return f"{self.rounds} paired invocation(s) are too few for an interval; raise --invocations"
        return (
            f"{min(self.n_baseline, self.n_candidate)} iterations in {self.rounds} rounds are too few;"
            f" measure at least {sig.MIN_PAIRED_ROUNDS} interleaved rounds: raise --iterations"
        )

    def pooled_note(self) -> str | None:
        """Why the ratio differs from the table's medians, when it does by more than its interval
        (or the equivalence band) allows: paired invocations, not pooled iterations."""
        if self.pairing != INVOCATIONS or not (math.isfinite(self.pooled_speedup) and math.isfinite(self.speedup)):
            return None
        lo, hi = (self.ci_low, self.ci_high) if self.enough else (self.speedup, self.speedup)
        band = 1.0 + self.equivalence_pct / 100.0
        if lo / band <= self.pooled_speedup <= hi * band:
            return None
        p = self.pooled_speedup
        pooled = f"{fixed(p, 2)} times faster" if p >= 1 else f"{fixed(1 / p, 2)} times slower"
        return (
            f"why not the table's medians ({pooled}): this ratio pairs each {self.route} invocation with the"
            f" {self.baseline_route} invocation of its round and takes the median of the pairs' ratios; the"
            f" table pools every iteration of a route. They differ when invocations differ; {self._remedy()}"
        )

    def _pairs_text(self) -> str:
        return f"{self.rounds} paired invocations" if self.pairing == INVOCATIONS else f"{self.rounds} rounds"

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("equivalence")
        d.update(self.equivalence.columns())  # equivalence_verdict, _reference and the key figures
        d["half_width"] = self.half_width
        d["sentence"] = self.sentence()
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in d.items()}


@dataclass(frozen=True)
class RoutesReport:
    run_id: str
    baseline_route: str
    rows: tuple[RouteComparison, ...]
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "baseline_route": self.baseline_route,
            "comparisons": [r.to_dict() for r in self.rows],
            "notes": list(self.notes),
        }


# -- ratios ----------------------------------------------------------------------------------------
def _rounds(samples: Sequence[MeasuredSample], metric: str) -> dict[int, list[float]]:
    out: dict[int, list[float]] = defaultdict(list)
    for s in samples:
        if metric in s.values:
            out[s.round_index].append(s.values[metric])
    return dict(out)


def invocation_ratio(
    baseline_rounds: Mapping[int, Sequence[float]],
    candidate_rounds: Mapping[int, Sequence[float]],
    confidence: float = sig.CONFIDENCE_LEVEL,
) -> sig.RatioCI:
    """candidate / baseline over paired invocations (keys: the invocation round both ran): the
    median of the per-pair ratios of medians with stats.paired_ratio's interval (at ``confidence``)."""
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
    r = paired_ratio([candidate_rounds[k] for k in common], [baseline_rounds[k] for k in common], confidence)
    return sig.RatioCI(r.estimate, r.low, r.high, r.pairs, n_b, n_c, 0)


def route_ratio(
    base: Sequence[MeasuredSample],
    cand: Sequence[MeasuredSample],
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


def enough(ci: sig.RatioCI, pairing: str) -> bool:
    """Whether a ratio's pairs support an interval and a verdict."""
    if pairing == INVOCATIONS:
        return ci.rounds >= 2 and math.isfinite(ci.ci_low) and math.isfinite(ci.ci_high)
    return sig.enough_for_ci(ci)


# -- one run's routes ------------------------------------------------------------------------------
@dataclass
class _Shape:
    """One bundle x testbed x shape of the run: each route's samples, and whether all its cells ran
    several invocations."""

    samples: dict[str, list[MeasuredSample]]
    several: dict[str, bool]
    equivalence: dict[str, EquivalenceView] = field(default_factory=dict)  # route -> its newest cell's verdict


def as_shown(route: str, present: set[str]) -> str:
    """A route named without its marks (``config``) as the run shows it (``config (compiled)``:
    model/route.shown_label) when exactly one of ``present`` is it; else as given."""
    if route in present:
        return route
    marked = [p for p in present if bare_label(p) == route]
    return marked[0] if len(marked) == 1 else route


def _wanted_routes(run_id: str, ok: Sequence[Cell], baseline_route: str, routes: Sequence[str] | None) -> list[str]:
    present = sorted({str(c.route) for c in ok})
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
    return wanted


#: A shape's key: bundle, testbed, prompt tokens, new tokens.
ShapeKey = tuple[str | None, str | None, int | None, int | None]


def _shapes(ok: Sequence[Cell]) -> dict[ShapeKey, _Shape]:
    shapes: dict[ShapeKey, _Shape] = {}
    for c in ok:
        shape = shapes.setdefault((c.bundle, c.testbed_id, c.prompt_tokens, c.max_new_tokens), _Shape({}, {}))
        shape.samples.setdefault(str(c.route), []).extend(c.samples)
        shape.several[str(c.route)] = (c.invocations or 1) > 1
        shape.equivalence[str(c.route)] = c.equivalence  # cells come oldest first: the newest stays
    return shapes


def _shape_order(key: ShapeKey) -> tuple[str, ...]:
    return tuple("" if v is None else str(v).zfill(12) for v in key)


@dataclass(frozen=True)
class _Options:
    baseline_route: str
    metrics: Sequence[str] | None
    equivalence_pct: float
    resamples: int
    seed: int


def _compared(key: ShapeKey, route: str, shape: _Shape, o: _Options) -> list[RouteComparison]:
    """Every metric of one route against the baseline route in one shape."""
    base, cand = shape.samples[o.baseline_route], shape.samples[route]
    invocations = shape.several[o.baseline_route] and shape.several[route]
    out = []
    for metric in choose_metrics(o.metrics, base, cand):
        ci, pairing = route_ratio(base, cand, metric, invocations, resamples=o.resamples, seed=o.seed)
        s, lo, hi = sig.speedup_ci(ci, bigger_is_better(metric))
        pooled = sig.speedup(_pooled_median(cand, metric) / _pooled_median(base, metric), bigger_is_better(metric))
        verdict = sig.ci_verdict(lo, hi, o.equivalence_pct / 100.0) if enough(ci, pairing) else sig.INCONCLUSIVE
        bundle, testbed_id, prompt_tokens, max_new_tokens = key
        out.append(
            RouteComparison(
                bundle=bundle,
                testbed_id=testbed_id,
                prompt_tokens=prompt_tokens,
                max_new_tokens=max_new_tokens,
                route=route,
                baseline_route=o.baseline_route,
                metric=metric,
                speedup=s,
                ci_low=lo,
                ci_high=hi,
                verdict=verdict,
                rounds=ci.rounds,
                n_baseline=ci.n_baseline,
                n_candidate=ci.n_candidate,
                equivalence_pct=o.equivalence_pct,
                pairing=pairing,
                pooled_speedup=pooled,
                equivalence=shape.equivalence.get(route, EquivalenceView()),
            )
        )
    return out


def _pooled_median(samples: Sequence[MeasuredSample], metric: str) -> float:
    values = [s.values[metric] for s in samples if metric in s.values]
    return float(np.median(values)) if values else math.nan


def compare_routes(
    cells: Sequence[Cell],
    run_id: str,
    *,
    baseline_route: str = "config",
    routes: Sequence[str] | None = None,
    metrics: Sequence[str] | None = None,
    equivalence_pct: float = sig.EQUIVALENCE * 100,
    resamples: int = sig.BOOTSTRAP_RESAMPLES,
    seed: int = sig.BOOTSTRAP_SEED,
) -> RoutesReport:
    """Each route of the run ``run_id`` (its ``cells``, oldest first) against ``baseline_route``,
    per shape and metric; failed cells are named in the notes."""
    notes = [
        f"{c.route} {shape_label(c.prompt_tokens, c.max_new_tokens)}: cell failed, not compared"
        for c in cells
        if not c.ok
    ]
    ok = [c for c in cells if c.ok]
    present = {str(c.route) for c in ok}
    baseline_route = as_shown(baseline_route, present)
    routes = [as_shown(r, present) for r in routes] if routes else routes
    wanted = _wanted_routes(run_id, ok, baseline_route, routes)
    options = _Options(baseline_route, metrics, equivalence_pct, resamples, seed)
    shapes = _shapes(ok)
    rows: list[RouteComparison] = []
    for key in sorted(shapes, key=_shape_order):
        shape = shapes[key]
        if not shape.samples.get(baseline_route):
            notes.append(f"{shape_label(key[2], key[3])}: no {baseline_route} cell; skipped")
            continue
        for route in wanted:
            if shape.samples.get(route):
                rows += _compared(key, route, shape, options)
    baseline_views = [v for sh in shapes.values() for r, v in sh.equivalence.items() if r == baseline_route]
    notes.append(equivalence_note(rows, baseline_route, baseline_views))
    return RoutesReport(run_id, baseline_route, tuple(rows), tuple(notes))


def equivalence_note(
    rows: Sequence[RouteComparison], baseline_route: str = "config", baseline: Sequence[EquivalenceView] = ()
) -> str:
    """What the equivalence verdicts beside the ratios are judged against (and the baseline's own
    verdict when it was judged too, against another bundle)."""
    refs = sorted({r.equivalence.reference or "?" for r in rows if r.equivalence.checked})
    unchecked = sorted({r.route for r in rows if not r.equivalence.checked})
    text = (
        f"equivalence: whether each route computes the same model as {', '.join(refs)} (its outputs judged"
        " before the timed iterations; docs/equivalence.md); a route NOT equivalent wins nothing, whatever its speed"
        if refs
        else "equivalence: no route of this run was judged against a reference"
    )
    judged = [v for v in baseline if v.checked]
    if judged:
        text += f"; the baseline {baseline_route} itself: {judged[-1].label()} against {judged[-1].reference or '?'}"
    if unchecked:
        text += f"; {NOT_CHECKED}: {', '.join(unchecked)} (run with two or more routes, or --equivalence)"
    return text
