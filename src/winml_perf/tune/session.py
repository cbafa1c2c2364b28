"""run_tune(request): candidates -> prune -> race -> standings and verdict -> report (and --emit)."""

from __future__ import annotations

import json
import math
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from winml_perf.model.serving import Slo
from winml_perf.support.errors import UsageError
from winml_perf.support.human_numbers import fixed
from winml_perf.tune.goal import GOODPUT, INTERRUPTED, TTFT_METRIC, Budget, objective_metric

if TYPE_CHECKING:
    from winml_perf.tune.prune import Pruned
    from winml_perf.tune.race import Race
    from winml_perf.tune.standings import Standing, Verdict


@dataclass(frozen=True)
class TuneRequest:
    bundle: Path
    budget: Budget
    eps: tuple[str, ...] = ()  # EP words; empty: every EP with a device here
    stages: tuple[str, ...] = ()  # --stages: only these stages are searched; empty: every stage
    ep_options: Mapping[str, Mapping[str, str]] = field(default_factory=dict)  # EP word -> its options
    objective: str = "decode"
    max_ttft_ms: float | None = None
    min_placement: float = 0.5
    max_crossings: int | None = None
    compile: bool = False
    ep_libraries: tuple[str, ...] = ()
    equivalence: bool = True
    equivalence_cache: bool = True  # reuse verdicts judged before on the same content (equivalence/verdict_cache.py)
    seed: int = 0
    prompt_tokens: int | None = None
    max_new_tokens: int = 32
    iterations: int = 5  # single-stream objectives: measured iterations per invocation
    warmup: int = 1
    max_rounds: int = 30
    min_rounds: int = 2  # rounds before the first elimination (= max_rounds: every route measured alike)
    screen_rounds: int = 2  # short rounds of every route before the full ones (tune/screen.py); 0: none
    concurrency: int = 4  # --objective goodput: requests in flight (closed loop)
    requests: int = 16  # --objective goodput: requests each route serves per round
    slo: Slo = Slo(200.0, 50.0)  # --objective goodput: what a request must meet to count
    store: str | None = None
    no_store: bool = False
    emit: Path | None = None
    report: Path | None = None

    @property
    def serving(self) -> bool:
        """Whether the race serves load (goodput) rather than timing single streams."""
        return self.objective == GOODPUT

    def load_label(self) -> str | None:
        """'concurrency 4' for --objective goodput (what its verdict is about), else None."""
        return f"concurrency {self.concurrency}" if self.serving else None


@dataclass
class TuneOutcome:
    standings: list[Standing]
    verdict: Verdict | None
    pruned: list[Pruned]
    race: Race
    emitted: list[str] = field(default_factory=list)
    store: str | None = None
    store_errors: list[str] = field(default_factory=list)
    run_ids: list[str] = field(default_factory=list)
    interrupted: int | None = None
    preparation_s: float = 0.0  # preparing, placement and equivalence checks: before the race, outside --budget
    equivalence_check: dict[str, Any] | None = (
        None  # what the equivalence check cost (part of preparation_s); None: not run
    )
    notes: list[str] = field(default_factory=list)  # what the ranking stood on, said on stderr (goodput's SLO)

    def to_dict(self, request: TuneRequest) -> dict[str, Any]:
        load = None
        if request.serving:
            load = {
                "mode": "closed",
                "concurrency": request.concurrency,
                "requests": request.requests,
                "slo": request.slo.to_dict(),
            }
        return {
            "kind": "tune",
            "bundle": str(request.bundle),
            "objective": request.objective,
            "load": load,  # --objective goodput: what each route served per round
            "budget": request.budget.describe(),
            "seed": request.seed,
            "rounds": self.race.rounds,
            "screening_rounds": self.race.screened,  # of the rounds, the short ones (tune/screen.py)
            "tokens": self.race.tokens,
            "elapsed_s": round(self.race.elapsed_s(), 3),  # the race's own clock (what --budget counts)
            "preparation_s": round(self.preparation_s, 3),
            "equivalence_check": self.equivalence_check,
            "stopped": self.race.stopped,
            "config_retired": self.race.config_retired,  # why config stopped racing, or None (tune/race.py)
            "interrupted": self.interrupted,
            "verdict": None if self.verdict is None else self.verdict.to_dict(),
            "standings": [s.to_dict() for s in self.standings],
            "pruned": [p.to_dict() for p in self.pruned],
            "run_ids": self.run_ids,
            "store": self.store,
            "notes": self.notes,
        }


def _say(line: str) -> None:
    from winml_perf.support.text_table import fill

    print(fill(line), file=sys.stderr, flush=True)


def _eps(request: TuneRequest) -> list[str]:
    from winml_perf.ep.devices import available_eps
    from winml_perf.ep.plugins import register_plugin_eps
    from winml_perf.tune.candidates import canonical_eps

    register_plugin_eps(list(request.ep_libraries))
    here = available_eps()
    if not request.eps:
        return here
    chosen = canonical_eps(request.eps)
    missing = [e for e in chosen if e not in here]
    if missing:
        raise UsageError(
            f"--eps {', '.join(missing)}: no device of this EP here (here: {', '.join(here)})",
            "drop it from --eps, or install its package (`winml devices` lists what is here)",
        )
    return chosen


def _options(request: TuneRequest) -> dict[str, dict[str, str]]:
    """--ep-option by canonical EP, each key checked against its EP here (exit 2 before any candidate is
    prepared: a bad key would only prune the routes it was meant for, and config would win)."""
    from winml_perf.ep.effective import effective_options
    from winml_perf.ep.table import CPU_EP, CPU_TAKES_NO_OPTIONS, ep_alias, normalize_ep_name

    options = {normalize_ep_name(word): dict(opts) for word, opts in request.ep_options.items()}
    for ep, opts in options.items():
        if ep == CPU_EP and opts:
            given = ", ".join(f"{ep_alias(ep)}:{k}={v}" for k, v in sorted(opts.items()))
            raise UsageError(
                f"--ep-option {given}: EP options do not apply to {CPU_TAKES_NO_OPTIONS}",
                "drop those options",
            )
        effective_options(ep, None, opts, where=f"--ep-option {ep_alias(ep)}:")
    return options


def _stage_paths(bundle: Path) -> tuple[dict[str, bool], dict[str, bool]]:
    from winml_perf.bundle.config import load_config

    stages = load_config(bundle).stages
    return {s.name: s.run_on_prompt for s in stages}, {s.name: s.run_on_token_gen for s in stages}


def progress_line(race: Race) -> str:
    lead = race.leader()
    sp = race.speedup(lead)
    left, tokens = race.time_left_s(), race.settings.budget.tokens
    if left is not None:
        budget = f"{left:.0f} s left"
    else:  # a budget is of seconds or of tokens (tune/goal.py parse_budget)
        budget = f"{max(tokens - race.tokens, 0)} tokens left" if tokens is not None else "no budget"
    if race.screened and not race.full_rounds:
        return f"tune: round {race.rounds} (short, screening): {len(race.alive)} racing, {len(race.dropped)} dropped, {budget}"
    return (
        f"tune: round {race.rounds}: {len(race.alive)} racing, {len(race.dropped)} dropped, {budget};"
        f" leader {lead} {fixed(sp.estimate, 2)}× config"
    )


def run_tune(
    request: TuneRequest,
    argv: Sequence[str] | None = None,
    measure_factory: Callable[..., Any] | None = None,
    say: Callable[[str], None] = _say,
) -> TuneOutcome:
    """The whole tune; ``measure_factory(specs, request, metrics, store)`` may replace the real rounds."""
    from winml_perf.bundle import cache
    from winml_perf.bundle.config import load_config
    from winml_perf.measure.validate import check_fits

    t0 = time.monotonic()
    config = load_config(request.bundle)  # a bad bundle: exit 2 before anything else
    metric = objective_metric(request.objective)
    if request.emit is not None:
        from winml_perf.tune.emit import check_emit_dir

        check_emit_dir(request.emit)
    if request.screen_rounds == 1:
        raise UsageError("--screen-rounds 1: the screen pools its variance over 2 short rounds or more", "pass 0 or 2")
    static = config.static_prompt(None if request.prompt_tokens is None else (request.prompt_tokens,))
    prompt_tokens = static[1] if static else (request.prompt_tokens or 16)
    in_flight = request.concurrency if request.objective == GOODPUT else 1
    check_fits(
        config.raw,
        Path(request.bundle) / "genai_config.json",
        prompt_tokens,
        request.max_new_tokens,
        prompt_given=request.prompt_tokens is not None,  # else the default or the static prompt: not a flag given
        in_flight=in_flight,
    )
    with cache.holding(request.bundle):
        return _tune(request, argv, measure_factory, say, t0, metric, prompt_tokens)


def _tune(
    request: TuneRequest,
    argv: Sequence[str] | None,
    measure_factory: Callable[..., Any] | None,
    say: Callable[[str], None],
    t0: float,
    metric: str,
    prompt_tokens: int,
) -> TuneOutcome:
    from winml_perf.tune.candidates import config_assignment, enumerate_candidates
    from winml_perf.tune.prune import PruneSettings, prune
    from winml_perf.tune.race import Race, RaceSettings
    from winml_perf.tune.rounds import SCREEN_ITERATIONS, RealRounds, Shape

    eps = _eps(request)
    candidates = enumerate_candidates(config_assignment(request.bundle), eps, _options(request), request.stages)
    say(f"tune: {len(candidates)} candidate assignments of {', '.join(eps)} to the stages of {request.bundle}")
    settings = PruneSettings(
        request.bundle,
        request.min_placement,
        request.max_crossings,
        request.compile,
        tuple(request.ep_libraries),
        request.equivalence,
        serving=request.serving,
        equivalence_cache=request.equivalence_cache,
    )
    survivors, pruned, check = prune(settings, candidates, _stage_paths(request.bundle), say)
    equivalence = {s.label: s.equivalence for s in survivors}
    said = " (each with its reason in the standings)" if pruned else ""
    preparation_s = time.monotonic() - t0
    say(
        f"tune: {len(survivors)} route(s) to race, {len(pruned)} pruned{said}, after {preparation_s:.1f} s of"
        " preparation and checks (outside --budget: the budget is the race's)"
    )
    shape = Shape(prompt_tokens, request.max_new_tokens, request.iterations, request.warmup)
    tokens_per_invocation = shape.tokens_per_invocation
    load = None
    if request.serving:
        from winml_perf.tune.serving_rounds import closed_loop, serving_tokens

        load = closed_loop(request.concurrency, request.requests, prompt_tokens, request.max_new_tokens, request.seed)
        tokens_per_invocation = serving_tokens(load)
    metrics = tuple(dict.fromkeys((metric, TTFT_METRIC)))
    store = None
    if not request.no_store:
        from winml_perf.results.store import open_store

        store = open_store(request.store)
    specs = {s.label: s.spec for s in survivors}
    if measure_factory is not None:
        measure = measure_factory(specs, request, metrics, store)
    elif load is not None:
        from winml_perf.tune.serving_rounds import ServingRounds

        measure = ServingRounds(specs, load, request.slo, request.seed, store, argv)
    else:
        measure = RealRounds(specs, shape, metrics, request.seed, store, argv)
    race = Race(
        [s.label for s in survivors],
        RaceSettings(
            metric,
            request.budget,
            request.seed,
            min_rounds=request.min_rounds,
            max_rounds=request.max_rounds,
            max_ttft_ms=request.max_ttft_ms,
            tokens_per_invocation=tokens_per_invocation,
            screen_rounds=request.screen_rounds,
            screen_tokens_per_invocation=replace(shape, iterations=SCREEN_ITERATIONS).tokens_per_invocation,
        ),
        measure,
        on_round=lambda r: say(progress_line(r)),
        screen=_screen(request, measure, say),
    )
    # the budget counts from here: preparing the routes and judging their equivalence is paid once,
    # before the race, and printed above; the budget buys paired measurements
    outcome = TuneOutcome([], None, pruned, race, store=None if store is None else store.display)
    outcome.preparation_s, outcome.equivalence_check = preparation_s, check
    try:
        race.run()
    except KeyboardInterrupt as exc:
        import signal

        outcome.interrupted = int(getattr(exc, "signum", signal.SIGINT))
        race.stopped = INTERRUPTED
    finally:
        if store is not None:
            store.close()
        outcome.store_errors = list(getattr(measure, "store_errors", []))
        outcome.run_ids = list(getattr(measure, "run_ids", []))
        outcome.notes = list(measure.notes()) if hasattr(measure, "notes") else []
        for note in outcome.notes:
            say(f"tune: note: {note}")
    return _conclude(request, outcome, equivalence, specs)


def _screen(request: TuneRequest, measure: Any, say: Callable[[str], None]) -> Any:
    """The seam of the race's short screening rounds (tune/screen.py), or None: it needs a seam that
    can measure a short round (the real single-stream rounds, or a test's seam offering short());
    a serving round has no iterations to shorten; under --max-ttft-ms short rounds do not judge the bound."""
    if not request.screen_rounds or request.serving or not hasattr(measure, "short"):
        return None
    if request.max_ttft_ms is not None:
        say("tune: no screening rounds under --max-ttft-ms (short rounds do not judge the bound); full rounds only")
        return None
    return measure.short()


def with_shown_routes(rows: list[Standing], specs: Mapping[str, Any]) -> list[Standing]:
    """Standings with each route as every listing shows it (model/route.shown_label: ``(compiled)``,
    ``(emulated)``), so a compiled and an uncompiled candidate never share a label (issue 35)."""
    from winml_perf.model.route import shown_label

    shown = {label: shown_label(spec.recorded_route) for label, spec in specs.items()}
    return [replace(s, route=shown.get(s.route, s.route)) for s in rows]


def _conclude(
    request: TuneRequest, outcome: TuneOutcome, equivalence: Mapping[str, str | None], specs: Mapping[str, Any]
) -> TuneOutcome:
    from winml_perf.tune.standings import NO_VERDICT, standings, verdict

    race = outcome.race
    outcome.standings = with_shown_routes(standings(race, outcome.pruned, equivalence), specs)
    outcome.verdict = verdict(race, equivalence, request.objective, request.load_label())
    if request.emit is not None and outcome.interrupted is None and outcome.verdict.kind != NO_VERDICT:
        from winml_perf.tune.emit import emit_bundle

        winner = outcome.verdict.winner
        sp = race.speedup(winner)
        about = {
            "route": winner,
            "source_bundle": str(request.bundle),
            "objective": request.objective,
            "speedup_vs_config": [x if math.isfinite(x) else None for x in (sp.estimate, sp.low, sp.high)],
            "pairs": sp.pairs,
            "equivalence": equivalence.get(winner),
            "verdict": outcome.verdict.text,
        }
        outcome.emitted = emit_bundle(Path(specs[winner].session.path), request.emit, about)
    if request.report is not None:
        request.report.write_text(json.dumps(outcome.to_dict(request), indent=2) + "\n", encoding="utf-8")
    return outcome
