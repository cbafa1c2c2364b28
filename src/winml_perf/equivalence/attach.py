"""The checks as measure/ asks for them before the sweep: each run over the prepared routes, its
verdicts recorded on them (route.equivalence, route.perplexity), and what it found said on stderr
through report.py (nothing of it enters a timed iteration)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from winml_perf.equivalence.report import (
    cost_line,
    equivalence_line,
    outputs_cost_line,
    outputs_line,
    say_check,
    say_perplexity,
    say_unjudged,
)
from winml_perf.support.errors import BenchmarkFailure, WinmlPerfError

if TYPE_CHECKING:
    from winml_perf.equivalence.check import CheckSource


def wants_equivalence(asked: bool | None, n_routes: int, reference_bundle: object) -> bool:
    """On by default when the run has more than one route or names a reference bundle; --equivalence
    forces it on, --no-equivalence off."""
    return asked if asked is not None else (n_routes > 1 or reference_bundle is not None)


def attach_equivalence(source: CheckSource, routes: list[Any], cache: bool = False) -> list[Any]:
    """The routes with their Equivalence recorded, judged against ``source``'s reference (the CheckSource a
    run made of the source bundle for all its checks); one line per route and the check's cost on stderr
    (it runs before the sweep: nothing of it enters a timed iteration). ``cache``: the verdict cache."""
    from winml_perf.equivalence.check import judge_routes

    try:
        run = judge_routes(source, routes, cache=cache)
    except BenchmarkFailure as exc:  # the reference itself could not run: no route is judged, and it says so
        say_unjudged(str(exc))
        return routes
    say_check(run, equivalence_line, cost_line([run], run.cost, cached=cache))
    return _recorded(routes, run.by_label)


def attach_outputs(routes: list[Any], source: str, base_options: Mapping[str, Any]) -> list[Any]:
    """The routes (model/spec.RouteSpec) of a plain ONNX model with their OutputEquivalence recorded;
    one line per route and the check's cost on stderr (it runs before the sweep: nothing of it enters
    a timed iteration)."""
    from winml_perf.equivalence.onnx_outputs import OutputsTarget, judge_outputs, reference_target

    reference = reference_target(routes, source, base_options)
    targets = [OutputsTarget(r.label, str(r.session.path), dict(r.session.options)) for r in routes]
    try:
        run = judge_outputs(reference, targets)
    except WinmlPerfError as exc:  # the reference itself could not run: no route is judged, and it says so
        say_unjudged(str(exc).splitlines()[0])
        return routes
    say_check(run, outputs_line, outputs_cost_line(run))
    return _recorded(routes, run.by_label)


def _recorded(routes: list[Any], by_label: Mapping[str, Any]) -> list[Any]:
    """The routes, each judged one with its verdict as route.equivalence."""
    return [
        replace(r, route=replace(r.recorded_route, equivalence=by_label[r.label])) if r.label in by_label else r
        for r in routes
    ]


def attach_perplexity(
    source: CheckSource,
    routes: list[Any],
    text_path: Path,
    chunk: int,
) -> list[Any]:
    """The routes with their perplexity recorded (route.perplexity) and, where the route was judged
    against the reference (route.equivalence), the ratio to the reference's with KL and top-1 over the
    same positions; one line per route and the cost on stderr. The text is tokenized by ``source``'s
    session, the ratios taken against its reference (equivalence/check.CheckSource)."""
    from winml_perf.equivalence.perplexity import (
        chunk_text,
        differences,
        measure_labels,
        reference_label,
        with_perplexity,
    )

    t0 = time.perf_counter()
    chunks = chunk_text(source, text_path, chunk)
    ref_label = reference_label(routes, source.reference)
    todo = [(r.label, Path(r.session.path)) for r in routes]
    if source.reference_bundle:
        todo.append((source.reference, Path(source.reference_bundle)))
    m = measure_labels(todo, ref_label, chunks)
    labels = [r.label for r in routes]
    diffs = differences(labels, m, ref_label)
    out = [with_perplexity(r, m, diffs.get(r.label)) for r in routes]
    say_perplexity(labels, m, diffs, ref_label, bool(source.reference_bundle), chunks, time.perf_counter() - t0)
    return out
