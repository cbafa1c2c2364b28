"""Serving cells compared (``winml serve``): the batching gain of each route (a concurrency's output
tokens/s over the sequential batch-1 generators of the same route, same invocations) and, per load
point, each route's goodput against a reference route's ("at concurrency 4, ep=webgpu serves 2.1x the
goodput of config"). Ratios are paired by invocation: the routes of one invocation ran back to back
in the same shuffled round (stats/serving.py ratio)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from winml_perf.model.record import CellRecord
from winml_perf.model.serving import ServingSection
from winml_perf.stats import serving as S
from winml_perf.stats.paired import RatioResult
from winml_perf.support.human_numbers import fixed


def per_invocation(section: ServingSection, name: str) -> list[float]:
    """A figure's value in each invocation, in invocation order (NaN where undefined)."""
    out = []
    for inv in sorted(section.invocations, key=lambda i: i.invocation):
        value = S.invocation_figures(inv.requests, inv.steps, section.slo).get(name)
        out.append(math.nan if value is None else float(value))
    return out


@dataclass(frozen=True)
class Comparison:
    route: str
    load: str
    against: str
    figure: str
    ratio: RatioResult
    sentence: str


def _interval(r: RatioResult) -> str:
    if not (math.isfinite(r.low) and math.isfinite(r.high)):
        return f"({r.pairs} paired invocation(s): no interval)"
    return f"[{fixed(r.low, 2)}, {fixed(r.high, 2)}] 95% over {r.pairs} paired invocations: {r.verdict.value}"


def _ratio(a: ServingSection, b: ServingSection, name: str) -> RatioResult | None:
    x, y = per_invocation(a, name), per_invocation(b, name)
    pairs = [(p, q) for p, q in zip(x, y, strict=False) if math.isfinite(p) and math.isfinite(q) and p > 0 and q > 0]
    if not pairs:
        return None
    return S.ratio([p for p, _ in pairs], [q for _, q in pairs])


def _serving(cells: Sequence[CellRecord]) -> list[tuple[CellRecord, ServingSection]]:
    return [(c, c.serving) for c in cells if c.serving is not None]


def batching_gains(cells: Sequence[CellRecord]) -> list[Comparison]:
    """For each route with a sequential baseline: each closed-loop point's output tokens/s over it."""
    out = []
    rows = _serving(cells)
    for cell, sec in rows:
        if sec.load.mode != "closed":
            continue
        base = next(
            (s for c, s in rows if c.route.label == cell.route.label and s.load.mode == "sequential"),
            None,
        )
        if base is None:
            continue
        r = _ratio(sec, base, "output_tokens_per_s")
        if r is None:
            continue
        sentence = (
            f"{cell.route.label}: at {sec.load.label} the {sec.server} serves {fixed(r.estimate, 2)}x the output "
            f"tokens/s of {sec.load.requests} requests run one after another in batch-1 generators {_interval(r)}"
        )
        out.append(Comparison(cell.route.label, sec.load.key, "sequential", "output_tokens_per_s", r, sentence))
    return out


def route_verdicts(cells: Sequence[CellRecord], reference: str | None = None) -> list[Comparison]:
    """Per load point, each route's goodput over the reference route's (the first route when None);
    where neither met the SLO, their output tokens/s instead, said so."""
    rows = [(c, s) for c, s in _serving(cells) if s.load.mode != "sequential"]
    labels = list(dict.fromkeys(c.route.label for c, _ in rows))
    if len(labels) < 2:
        return []
    ref = reference if reference in labels else labels[0]
    out = []
    for cell, sec in rows:
        if cell.route.label == ref:
            continue
        base = next((s for c, s in rows if c.route.label == ref and s.load.key == sec.load.key), None)
        if base is None:
            continue
        figure, what = "goodput_requests_per_s", "goodput"
        r = _ratio(sec, base, figure)
        if r is None:
            figure, what = "output_tokens_per_s", "output tokens/s (no goodput to compare: the SLO was not met)"
            r = _ratio(sec, base, figure)
        if r is None:
            continue
        sentence = (
            f"at {sec.load.label}, {cell.route.label} serves {fixed(r.estimate, 2)}x the {what} of {ref} {_interval(r)}"
        )
        out.append(Comparison(cell.route.label, sec.load.key, ref, figure, r, sentence))
    return out
