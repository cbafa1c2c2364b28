"""Pruning before anything is measured: each candidate that cannot win is set aside with its reason.

In order, cheapest first: its stages cross devices more often
than --max-device-crossings allows; the route cannot be prepared or its compile fails; for
--objective goodput, onnxruntime-genai's Engine refuses its genai_config.json; a stage it
forces onto an EP keeps less than --min-placement of its nodes there (the rest fall back); and,
once for every survivor together, the teacher-forced equivalence check says it is not the same
model as the config route ("within precision tolerance" stays in the race, shown as such).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from winml_perf.measure.orchestrate import PerfRequest
from winml_perf.model.route import OK
from winml_perf.support.errors import UsageError, WinmlPerfError
from winml_perf.tune.candidates import Candidate, device_crossings

#: Pruning reasons, by the check that gave them.
CROSSINGS, PREPARE, PLACEMENT, EQUIVALENCE = "crossings", "prepare", "placement", "equivalence"
ENGINE = "engine"  # --objective goodput: og.Engine does not serve the route


@dataclass(frozen=True)
class Pruned:
    label: str
    check: str  # CROSSINGS | PREPARE | ENGINE | PLACEMENT | EQUIVALENCE
    reason: str

    def line(self) -> str:
        return f"pruned {self.label}: {self.check}: {self.reason}"

    def to_dict(self) -> dict[str, str]:
        return {"route": self.label, "check": self.check, "reason": self.reason}


@dataclass(frozen=True)
class Survivor:
    """A candidate prepared for measuring: its RouteSpec (with its equivalence verdict once judged)."""

    candidate: Candidate
    spec: Any  # model.spec.RouteSpec
    verdict: str | None = None  # the tune's equivalence verdict (equivalence/pooled.py); None: its recorded one, if any

    @property
    def label(self) -> str:
        return str(self.spec.label)

    @property
    def equivalence(self) -> str | None:
        if self.verdict is not None:
            return self.verdict
        e = self.spec.recorded_route.equivalence
        return None if e is None else str(e.verdict)


@dataclass(frozen=True)
class PruneSettings:
    bundle: Path
    min_placement: float
    max_crossings: int | None
    compile: bool = False
    ep_libraries: tuple[str, ...] = ()
    equivalence: bool = True
    serving: bool = False  # --objective goodput: prune the routes og.Engine refuses
    equivalence_cache: bool = True  # reuse verdicts judged before on the same content


def engine_problem(spec: Any) -> str | None:
    """Why onnxruntime-genai's Engine refuses the route's genai_config.json (a decoder-pipeline), or None."""
    from winml_perf.session.genai_engine import engine_refusal
    from winml_perf.support.json_input import read_json

    return engine_refusal(read_json(Path(spec.session.path) / "genai_config.json"))


def placement_problem(spec: Any, min_placement: float) -> str | None:
    """Why a forced stage cannot hold its EP: its session failed there, or fewer than
    ``min_placement`` of its nodes stay on the EP asked; None when every forced stage holds it."""
    for stage in spec.recorded_route.stages:
        p = stage.placement
        if not stage.forced or p is None:
            continue
        if p.status != OK:
            return f"stage {stage.stage}: no session on {p.ep} ({p.error or p.status})"
        held = p.nodes_per_ep.get(p.ep, 0)
        if p.nodes and held / p.nodes < min_placement:
            return (
                f"stage {stage.stage}: {held} of {p.nodes} nodes on {p.ep}, the rest fall back"
                f" (--min-placement {min_placement:g})"
            )
    return None


def prepare_one(settings: PruneSettings, candidate: Candidate) -> Any:
    """The candidate's RouteSpec, prepared (derived bundle, compile, placement) as `winml perf` does."""
    from winml_perf.measure.prepare import prepare_request

    req = PerfRequest(
        path=settings.bundle, routes=(candidate.route,), ep_libraries=settings.ep_libraries, compile=settings.compile
    )
    (spec,) = prepare_request(req)
    return spec


def prune(
    settings: PruneSettings,
    candidates: Sequence[Candidate],
    stage_paths: tuple[dict[str, bool], dict[str, bool]],
    say: Callable[[str], None] = lambda line: print(line, file=sys.stderr),
) -> tuple[list[Survivor], list[Pruned], dict[str, Any] | None]:
    """(survivors, pruned, what the equivalence check cost: None when it did not run) of ``candidates``
    (config first: it is the reference and is never pruned). ``stage_paths``: which stages run on the
    prompt and on token generation. Each reason is kept for the standings, which print it once."""
    survivors: list[Survivor] = []
    pruned: list[Pruned] = []

    def drop(label: str, check: str, reason: str) -> None:  # said once, in the standings (or the JSON)
        pruned.append(Pruned(label, check, reason))

    for i, c in enumerate(candidates):
        crossings = device_crossings(c.assignment, *stage_paths)
        if i > 0 and settings.max_crossings is not None and crossings > settings.max_crossings:
            drop(c.label, CROSSINGS, f"{crossings} device crossings > --max-device-crossings {settings.max_crossings}")
            continue
        try:
            spec = prepare_one(settings, c)
        except WinmlPerfError as exc:
            if i == 0:
                raise  # the config route is the reference: the tune cannot go on without it
            check = "compile" if settings.compile and "compile" in str(exc).lower() else PREPARE
            drop(c.label, check, str(exc).splitlines()[0])
            continue
        refused = engine_problem(spec) if settings.serving else None
        if refused and i == 0:  # no reference to state goodput against: nothing can be raced
            raise UsageError(
                f"--objective goodput: the Engine does not serve {settings.bundle} (route config): {refused}",
                "tune it on a single-stream objective (--objective decode), or give a decoder-only bundle",
            )
        if refused:
            drop(c.label, ENGINE, refused)
            continue
        problem = placement_problem(spec, settings.min_placement) if i > 0 else None
        if problem:
            drop(c.label, PLACEMENT, problem)
            continue
        survivors.append(Survivor(c, spec))
    cost = None
    if settings.equivalence and len(survivors) > 1:
        survivors, cost = _judged(settings, survivors, drop, say)
    return survivors, pruned, cost


def _judged(
    settings: PruneSettings,
    survivors: list[Survivor],
    drop: Callable[[str, str, str], None],
    say: Callable[[str], None],
) -> tuple[list[Survivor], dict[str, Any]]:
    """The survivors equivalent to the config route (or within its precision tolerance) on the tune's
    fixed check prompts (equivalence/pooled.py), each with its verdict; the others dropped with the check's figures.
    The record keeps the judgement on `winml perf`'s check prompt."""
    from winml_perf.equivalence.pooled import judge
    from winml_perf.model.equivalence import NOT_EQUIVALENT

    judged, cost = judge(str(settings.bundle), [s.spec for s in survivors], settings.equivalence_cache)
    say(f"tune: {cost.line}")
    kept = [survivors[0]]
    for s in survivors[1:]:
        j = judged.get(s.label)
        if j is None:
            kept.append(s)
            continue
        if j.error is not None:
            drop(s.label, EQUIVALENCE, f"its teacher-forced pass failed: {j.error}")
            continue
        if j.verdict == NOT_EQUIVALENT:
            drop(s.label, EQUIVALENCE, j.line)
            continue
        say(j.line)
        route = replace(s.spec.recorded_route, equivalence=j.first)
        kept.append(replace(s, spec=replace(s.spec, route=route), verdict=j.verdict))
    return kept, cost.figures
