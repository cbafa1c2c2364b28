"""`winml serve`: many requests at once through onnxruntime-genai's Engine, per route and load point.

A command of its own rather than a load axis on `winml perf`: a serving cell measures a different
thing (a population of requests over a makespan, not repeated single generations), its figures
and verdicts differ (goodput, saturation, batching gain), and none of perf's iteration, warmup or
stopping flags would apply. It shares perf's route flags and machinery (docs/serving.md).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from winml_perf.commands.option_groups import option_groups
from winml_perf.commands.serve_flags import LoadFlags, ServeOutputFlags, ServeRoutingFlags
from winml_perf.model import flag_bounds
from winml_perf.publish.formats import Offer, check_format, format_named
from winml_perf.support.errors import BenchmarkFailure, RunInterrupted, StoreError, UsageError
from winml_perf.support.output import check_output, write_output
from winml_perf.support.text_table import say

if TYPE_CHECKING:
    from winml_perf.ep.route_request import RouteRequest
    from winml_perf.measure.serving.run import ServeOutcome, ServeRequest

EPILOG = """\
[bold]Loads[/bold]:
  --concurrency 1,4        closed loop: N requests in flight, the next begun as one ends
  --request-rate 2,8/s     open loop: Poisson arrivals at each rate (drawn with --seed)
  --prompt-tokens 16-64    lengths fixed (N) or uniform over LOW-HIGH (drawn with --seed)

[bold]Examples[/bold]:
  winml serve bundles/tiny-qwen2 --concurrency 1,4
  winml serve bundles/tiny-qwen2 --concurrency 1,4 --route config --route ep=webgpu --slo ttft=200ms,tpot=50ms
  winml serve bundles/tiny-qwen2 --request-rate 5000/s --requests 48
"""


def _ints(values: list[str], flag: str) -> tuple[int, ...]:
    out: list[int] = []
    for item in (p.strip() for v in values for p in v.split(",")):
        if not item:
            continue
        if not item.isdigit():
            raise UsageError(f"{flag} {item!r} is not a whole number", f"e.g. {flag} 1,2,4,8")
        flag_bounds.check(flag, int(item), item)
        if int(item) not in out:
            out.append(int(item))
    return tuple(out)


def _rates(values: list[str]) -> tuple[float, ...]:
    out: list[float] = []
    for item in (p.strip() for v in values for p in v.split(",")):
        if not item:
            continue
        m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*(?:/s)?", item)
        if not m:
            raise UsageError(f"--request-rate {item!r} is not a rate in requests/s", "e.g. --request-rate 2,8/s")
        rate = float(flag_bounds.check("--request-rate", float(m.group(1)), item))
        if rate not in out:
            out.append(rate)
    return tuple(out)


def _routes(route: list[str], ep: str | None, device: str | None) -> tuple[RouteRequest, ...]:
    from winml_perf.measure.orchestrate import RouteRequest, parse_route

    if route:
        if ep or device:
            raise UsageError("--route cannot be combined with --ep/--device", "put each route in its own --route")
        return tuple(parse_route(r) for r in route)
    return (RouteRequest(ep=ep, device=device),)


@option_groups
def serve_command(
    bundle: Annotated[Path, typer.Argument(metavar="BUNDLE", show_default=False, help="A bundle folder.")],
    routing: ServeRoutingFlags,
    load: LoadFlags,
    out: ServeOutputFlags,
) -> None:
    """Serve many requests at once (onnxruntime-genai's Engine) per route and load: TTFT/TPOT/ITL
    percentiles, throughput, goodput, queueing, batch occupancy, saturation."""
    from winml_perf.measure.serving.run import run_serving

    req = serve_request(bundle, routing, load, out)
    outcome = run_serving(req, argv=sys.argv[1:])
    report(outcome, out)


def _check_flags(routing: ServeRoutingFlags, load: LoadFlags, out: ServeOutputFlags) -> None:
    """Exit 2 before any work: a format, fallback or store choice serve does not offer, a count out of bounds."""
    check_format(Offer.SUMMARY, out.fmt)
    if routing.fallback not in (None, "batch1"):
        raise UsageError(f"--fallback {routing.fallback!r} is not understood", "the one fallback is --fallback batch1")
    if out.store and out.no_store:
        raise UsageError("--store and --no-store both given", "pass one of them")
    flag_bounds.check("--requests", load.requests)
    flag_bounds.check("--invocations", load.invocations)


def serve_request(bundle: Path, routing: ServeRoutingFlags, load: LoadFlags, out: ServeOutputFlags) -> ServeRequest:
    """The flags as a ServeRequest, every one checked (exit 2 naming the flag) before anything is prepared."""
    from winml_perf.ep.options import parse_options
    from winml_perf.measure.serving.run import ServeRequest
    from winml_perf.model.serving import Lengths, Slo

    _check_flags(routing, load, out)
    prompt = None if load.prompt_tokens is None else Lengths.parse(load.prompt_tokens, "--prompt-tokens")
    new = Lengths.parse(load.max_new_tokens, "--max-new-tokens")
    for flag, lengths in (("--prompt-tokens", prompt), ("--max-new-tokens", new)):
        if lengths is not None:
            flag_bounds.check(flag, lengths.high, lengths.text)
    if out.output is not None:
        check_output(out.output, instead="--format json puts the run record on stdout")
    req = ServeRequest(
        path=bundle,
        routes=_routes(routing.route or [], routing.ep, routing.device),
        ep_libraries=tuple(routing.ep_library or ()),
        ep_options=tuple(sorted(parse_options(routing.ep_option or ()).items())),
        concurrency=_ints(load.concurrency or [], "--concurrency"),
        rates=_rates(load.request_rate or []),
        requests=load.requests,
        prompt_tokens=prompt,
        max_new_tokens=new,
        slo=Slo.parse(load.slo),
        invocations=load.invocations,
        seed=load.seed,
        sequential_baseline=load.baseline,
        fallback=routing.fallback == "batch1",
        quiet=out.quiet or not format_named(out.fmt).terminal,
        store=out.store,
        no_store=out.no_store,
    )
    req.loads()  # no load given: exit 2 before preparing anything
    labels = [r.label for r in req.routes]
    if out.reference is not None and out.reference not in labels:
        raise UsageError(
            f"--reference {out.reference!r} is not one of the routes ({', '.join(labels)})", "name one of them"
        )
    return req


def _kept(outcome: ServeOutcome, out: ServeOutputFlags) -> str:
    """Where an interrupted run's cells (its finished invocations') went, in one clause."""
    run = outcome.run
    places = [f"stored in {outcome.store}"] if outcome.store and not outcome.store_errors else []
    places += [f"written to {out.output}"] if out.output is not None else []
    if outcome.store_errors:  # asked to store, and the store refused
        places += [f"not stored in {outcome.store} ({'; '.join(outcome.store_errors)})"]
    where = " and ".join(places) or "not kept (--no-store, no -o)"
    asked = run.sweep.get("invocations")
    served = ", ".join(f"{label}: {n} of {asked}" for label, n in outcome.served.items())
    return f"{len(run.cells)} cell(s) of the finished invocations ({served}) {where} (run {run.run_id})"


def _say_route_caveats(outcome: ServeOutcome) -> None:
    """What the table cannot say of a route, on stderr once a route: an EP that ran on an emulator, a
    forced stage that runs partly on CPU (each cell's record keeps the warning)."""
    from winml_perf.record.serving import route_warnings

    for route in outcome.routes:
        emulated = route.recorded_route.emulated
        if emulated:
            say(
                f"note: route {route.label}: {', '.join(emulated)} ran on an emulator on the CPU here; these timings are not NPU speed"
            )
        for w in route_warnings(route):
            say(f"warning: {w.message}; {w.remedy}")


def report(outcome: ServeOutcome, out: ServeOutputFlags) -> None:
    """The run record (-o, --format json), the serving table with its gains and verdicts (compare/serving.py),
    where the cells were stored; then the exit the run calls for."""
    from winml_perf.compare.serving import batching_gains, route_verdicts
    from winml_perf.publish.render import run_text
    from winml_perf.publish.serving_table import serving_text

    run = outcome.run
    if out.output is not None:
        write_output(out.output, run_text(run, "json"))
    cells = list(run.cells)
    if outcome.interrupted is not None:
        raise RunInterrupted(outcome.interrupted, _kept(outcome, out))
    text = serving_text(cells, batching_gains(cells), route_verdicts(cells, out.reference))
    if format_named(out.fmt).terminal:
        print(text, end="")
    else:
        sys.stdout.write(run_text(run, out.fmt))
        print(text, file=sys.stderr, end="")
    sys.stdout.flush()
    _say_route_caveats(outcome)
    if outcome.store is not None and not outcome.store_errors:
        print(f"stored {len(cells)} record(s) in {outcome.store} (run {run.run_id})", file=sys.stderr)
    if outcome.store_errors:
        raise StoreError(
            f"{len(outcome.store_errors)} record(s) could not be stored in {outcome.store}: "
            + "; ".join(outcome.store_errors[:3]),
            "rerun with -o FILE to keep the run record",
        )
    if not cells:
        raise BenchmarkFailure("no cell was served")
