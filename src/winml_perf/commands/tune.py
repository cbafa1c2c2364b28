"""`winml tune BUNDLE`: which route should I ship? Per-stage EP assignments pruned, raced, ranked."""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from winml_perf.commands.option_groups import option_groups
from winml_perf.commands.tune_flags import CandidateFlags, RoundFlags, SearchFlags, TuneOutputFlags
from winml_perf.publish.formats import Offer, check_format, format_named
from winml_perf.support.errors import BenchmarkFailure, RunInterrupted, UsageError
from winml_perf.support.text_table import fill, say

if TYPE_CHECKING:
    from winml_perf.tune.session import TuneOutcome, TuneRequest

EPILOG = (
    "Examples: winml tune bundles/tiny-qwen2-pipeline --eps cpu,webgpu --budget 300s --emit /tmp/best\n\n"
    "winml tune bundles/tiny-qwen2 --eps cpu,webgpu --objective goodput --concurrency 4 --slo ttft=200ms,tpot=50ms"
)
#: tune's flags that only a serving race (--objective goodput) reads, and those it has no use for.
SERVING_FLAGS = ("--concurrency", "--requests", "--slo")
SINGLE_STREAM_FLAGS = ("--iterations", "--warmup", "--max-ttft-ms", "--screen-rounds")
DEFAULT_ITERATIONS, DEFAULT_WARMUP = 5, 1
DEFAULT_CONCURRENCY, DEFAULT_REQUESTS, DEFAULT_SLO = 4, 16, "ttft=200ms,tpot=50ms"
TUNE_REPORTS = Path("results") / "tune"


def _serving_load(concurrency: int | None, requests: int | None, slo: str | None) -> dict[str, Any]:
    """--concurrency, --requests and --slo checked (exit 2 naming the flag), as TuneRequest fields."""
    from winml_perf.model import flag_bounds
    from winml_perf.model.serving import Slo, check_in_flight

    n = DEFAULT_CONCURRENCY if concurrency is None else concurrency
    count = DEFAULT_REQUESTS if requests is None else requests
    flag_bounds.check("--concurrency", n)
    flag_bounds.check("--requests", count)
    check_in_flight(n, count)
    return {"concurrency": n, "requests": count, "slo": Slo.parse(DEFAULT_SLO if slo is None else slo)}


def _ep_options(items: list[str]) -> dict[str, dict[str, str]]:
    """--ep-option EP:KEY=VALUE (repeatable) -> {EP: {KEY: VALUE}}."""
    from winml_perf.ep.options import parse_options

    out: dict[str, dict[str, str]] = {}
    for item in items:
        ep, sep, pair = item.partition(":")
        if not sep or not ep.strip():
            raise UsageError(f"--ep-option {item!r} is not EP:KEY=VALUE", "e.g. --ep-option qnn:soc_model=60")
        out.setdefault(ep.strip(), {}).update(parse_options([pair], f"--ep-option {ep.strip()}:"))
    return out


def check_objective_flags(objective: str, given: dict[str, object]) -> None:
    """Exit 2 naming a flag the objective does not read: the serving flags without --objective
    goodput; --iterations, --warmup and --max-ttft-ms with it (a serving round has no iterations;
    its SLO states the TTFT a request must meet)."""
    from winml_perf.tune.goal import objective_metric

    objective_metric(objective)  # exit 2 on an unknown objective
    used = [flag for flag, value in given.items() if value is not None]
    if objective == "goodput":
        for flag in (f for f in used if f in SINGLE_STREAM_FLAGS):
            fix = "state it in --slo ttft=MS" if flag == "--max-ttft-ms" else "set --requests N (requests per round)"
            raise UsageError(f"{flag} does not apply to --objective goodput (rounds serve a closed loop)", fix)
        return
    for flag in (f for f in used if f in SERVING_FLAGS):
        raise UsageError(f"{flag} is read by --objective goodput only", f"add --objective goodput, or drop {flag}")


@option_groups
def tune_command(
    bundle: Annotated[Path, typer.Argument(metavar="BUNDLE", help="A genai bundle folder (genai_config.json).")],
    search: SearchFlags,
    candidates: CandidateFlags,
    rounds: RoundFlags,
    out: TuneOutputFlags,
) -> None:
    """Search per-stage EP assignments of a bundle, race them with 95 % intervals, name the winner."""
    from winml_perf.tune.goal import objective_metric
    from winml_perf.tune.session import run_tune

    request = tune_request(bundle, search, candidates, rounds, out)
    outcome = run_tune(request, argv=sys.argv[1:])
    _report_outcome(outcome, request, objective_metric(search.objective), out.fmt)


def tune_request(
    bundle: Path, search: SearchFlags, candidates: CandidateFlags, rounds: RoundFlags, out: TuneOutputFlags
) -> TuneRequest:
    """The flags as a TuneRequest, every one checked (exit 2 naming the flag) before any work."""
    from winml_perf.tune.goal import parse_budget
    from winml_perf.tune.session import TuneRequest

    load_flags = {"--concurrency": rounds.concurrency, "--requests": rounds.requests, "--slo": rounds.slo}
    single = {
        "--iterations": rounds.iterations,
        "--warmup": rounds.warmup,
        "--max-ttft-ms": search.max_ttft_ms,
        "--screen-rounds": rounds.screen_rounds,
    }
    check_objective_flags(search.objective, {**load_flags, **single})
    serving = _serving_load(rounds.concurrency, rounds.requests, rounds.slo) if search.objective == "goodput" else {}
    _check_inputs(bundle, out.store, out.no_store, not candidates.no_equivalence, out.fmt)
    return TuneRequest(
        bundle=bundle,
        budget=parse_budget(search.budget),
        eps=_words(search.eps),
        stages=_words(search.stages),
        ep_options=_ep_options(search.ep_option or []),
        objective=search.objective,
        max_ttft_ms=search.max_ttft_ms,
        min_placement=candidates.min_placement,
        max_crossings=candidates.max_device_crossings,
        compile=candidates.compile,
        ep_libraries=tuple(candidates.ep_library or ()),
        equivalence=not candidates.no_equivalence,
        equivalence_cache=not candidates.no_equivalence_cache,
        seed=rounds.seed,
        prompt_tokens=rounds.prompt_tokens,
        max_new_tokens=rounds.max_new_tokens,
        iterations=DEFAULT_ITERATIONS if rounds.iterations is None else rounds.iterations,
        warmup=DEFAULT_WARMUP if rounds.warmup is None else rounds.warmup,
        max_rounds=rounds.max_rounds,
        screen_rounds=TuneRequest.screen_rounds if rounds.screen_rounds is None else rounds.screen_rounds,
        store=out.store,
        no_store=out.no_store,
        emit=_emit_path(out.emit),
        report=_report_path(out.report, out.no_store, rounds.seed),
        **serving,
    )


def _words(text: str | None) -> tuple[str, ...]:
    """A comma list's words, blanks dropped."""
    return tuple(w.strip() for w in (text or "").split(",") if w.strip())


def _check_inputs(bundle: Path, store: str | None, no_store: bool, equivalence: bool, fmt: str) -> None:
    """Exit 2 before any work: an unknown --format, both store flags, a bundle that is not one, onnx
    missing for the check."""
    check_format(Offer.SUMMARY, fmt)
    if store and no_store:
        raise UsageError("--store and --no-store both given", "pass one of them")
    from winml_perf.bundle.config import load_config_dict

    load_config_dict(bundle)  # exit 2 naming the path (and the bundles inside a folder of bundles)
    if equivalence:
        from winml_perf.support.optional import require

        require("winml tune's equivalence pruning (--no-equivalence turns it off)", "onnx")


def _emit_path(emit: Path | None) -> Path | None:
    """--emit DIR: a folder, never ``-``."""
    from winml_perf.support.output import refuse_stdout_folder

    refuse_stdout_folder(emit, "--emit")
    return emit


def _report_path(report: Path | None, no_store: bool, seed: int) -> Path | None:
    """--report, or the default under results/tune/ (none with --no-store); checked writable."""
    if report is None and not no_store:
        TUNE_REPORTS.mkdir(parents=True, exist_ok=True)
        report = TUNE_REPORTS / f"tune-{datetime.now(UTC).strftime('%Y%m%dT%H%M%S')}-seed{seed}.json"
    if report is not None:
        from winml_perf.support.output import check_output

        check_output(report, "--report", instead="--format json puts the tune report on stdout")
    return report


def _report_outcome(outcome: TuneOutcome, request: TuneRequest, metric: str, fmt: str) -> None:
    """The standings and verdict (or the JSON), where things were written, then the exit it calls for."""
    from winml_perf.tune.standings import NO_VERDICT, table_text

    if format_named(fmt).holds_document:
        print(json.dumps(outcome.to_dict(request), indent=2))
    else:
        race = outcome.race
        print(table_text(outcome.standings, metric), end="")
        print()
        print(
            fill(
                f"{race.rounds} round(s){f' ({race.screened} short, screening)' if race.screened else ''},"
                f" {race.tokens} tokens, {race.elapsed_s():.0f} s"
                f" of {request.budget.describe()} (after {outcome.preparation_s:.0f} s of preparation and checks);"
                f" stopped: {race.stopped}"
            )
        )
        assert outcome.verdict is not None  # judged once the race ends (tune/session.py run_tune)
        print(fill(f"verdict: {outcome.verdict.text}"))
    sys.stdout.flush()
    if outcome.emitted and outcome.verdict is not None:
        say(f"emitted {outcome.verdict.winner} as a bundle in {request.emit} ({len(outcome.emitted)} files)")
    if request.report is not None:
        say(f"tune report: {request.report}")
    if outcome.store is not None:
        say(f"cells stored in {outcome.store} (runs {', '.join(outcome.run_ids) or 'none'})")
    if outcome.interrupted is not None:
        raise RunInterrupted(outcome.interrupted, f"kept {outcome.race.rounds} finished round(s); standings above")
    if outcome.store_errors:
        raise BenchmarkFailure(f"{len(outcome.store_errors)} cell(s) could not be stored: {outcome.store_errors[0]}")
    if outcome.verdict is not None and outcome.verdict.kind == NO_VERDICT:
        raise BenchmarkFailure(outcome.verdict.text)
