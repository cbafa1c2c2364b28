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
from typing import Annotated

import typer

from winml_perf.model import flag_bounds
from winml_perf.support.errors import BenchmarkFailure, StoreError, UsageError
from winml_perf.support.output import check_output, write_output

ROUTING = "Routing"
LOAD = "Load"
OUTPUT = "Output"

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


def _routes(route: list[str], ep: str | None, device: str | None):
    from winml_perf.measure.orchestrate import RouteRequest, parse_route

    if route:
        if ep or device:
            raise UsageError("--route cannot be combined with --ep/--device", "put each route in its own --route")
        return tuple(parse_route(r) for r in route)
    return (RouteRequest(ep=ep, device=device),)


def serve_command(  # noqa: PLR0913
    bundle: Annotated[Path, typer.Argument(metavar="BUNDLE", show_default=False, help="A bundle folder.")],
    route: Annotated[
        list[str] | None,
        typer.Option(metavar="ROUTE", rich_help_panel=ROUTING, help="config, ep=NAME, device=CLASS (repeatable)."),
    ] = None,
    ep: Annotated[
        str | None, typer.Option(metavar="NAME", rich_help_panel=ROUTING, help="Force every stage onto this EP.")
    ] = None,
    device: Annotated[
        str | None, typer.Option(metavar="CLASS", rich_help_panel=ROUTING, help="config, auto, cpu, gpu or npu.")
    ] = None,
    ep_option: Annotated[
        list[str] | None, typer.Option(metavar="KEY=VALUE", rich_help_panel=ROUTING, help="EP provider option.")
    ] = None,
    ep_library: Annotated[
        list[str] | None, typer.Option(metavar="NAME=PATH", rich_help_panel=ROUTING, help="Register a plugin EP.")
    ] = None,
    fallback: Annotated[
        str | None,
        typer.Option(
            metavar="batch1",
            rich_help_panel=ROUTING,
            help="Where the Engine refuses a route, serve it with batch-1 generators stepped in turn (labelled).",
        ),
    ] = None,
    concurrency: Annotated[
        list[str] | None, typer.Option(metavar="N[,N]", rich_help_panel=LOAD, help="Closed loop: requests in flight.")
    ] = None,
    request_rate: Annotated[
        list[str] | None,
        typer.Option(metavar="R[,R]/s", rich_help_panel=LOAD, help="Open loop: Poisson arrivals per second."),
    ] = None,
    requests: Annotated[int, typer.Option(metavar="N", rich_help_panel=LOAD, help="Requests per load point.")] = 16,
    prompt_tokens: Annotated[
        str | None,
        typer.Option(
            metavar="N|LOW-HIGH",
            rich_help_panel=LOAD,
            help="Prompt length, fixed or uniform (default 128, or a static pipeline's length).",
        ),
    ] = None,
    max_new_tokens: Annotated[
        str, typer.Option(metavar="N|LOW-HIGH", rich_help_panel=LOAD, help="Output length, fixed or uniform.")
    ] = "32",
    slo: Annotated[
        str, typer.Option(metavar="ttft=MS,tpot=MS", rich_help_panel=LOAD, help="Goodput's objectives.")
    ] = "ttft=200ms,tpot=50ms",
    baseline: Annotated[
        bool,
        typer.Option(
            "--baseline/--no-baseline",
            rich_help_panel=LOAD,
            help="Also serve the requests one after another in batch-1 generators (the batching gain's base).",
        ),
    ] = True,
    invocations: Annotated[
        int, typer.Option(metavar="N", rich_help_panel=LOAD, help="Fresh processes per route (intervals over them).")
    ] = 3,
    seed: Annotated[int, typer.Option(metavar="N", rich_help_panel=LOAD, help="Seed of arrivals, lengths, order.")] = 0,
    reference: Annotated[
        str | None, typer.Option(metavar="ROUTE", rich_help_panel=OUTPUT, help="Route the others are judged against.")
    ] = None,
    fmt: Annotated[
        str, typer.Option("--format", metavar="FMT", rich_help_panel=OUTPUT, help="table or json.")
    ] = "table",
    output: Annotated[
        Path | None,
        typer.Option("-o", "--output", metavar="FILE", rich_help_panel=OUTPUT, help="Write the run record."),
    ] = None,
    store: Annotated[
        str | None, typer.Option(metavar="PATH|URL", rich_help_panel=OUTPUT, help="Results store.")
    ] = None,
    no_store: Annotated[
        bool, typer.Option("--no-store", rich_help_panel=OUTPUT, help="Do not store the cells.")
    ] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", rich_help_panel=OUTPUT, help="No progress lines.")] = False,
) -> None:
    """Serve many requests at once (onnxruntime-genai's Engine) per route and load: TTFT/TPOT/ITL
    percentiles, throughput, goodput, queueing, batch occupancy, saturation."""
    from winml_perf.compare.serving import batching_gains, route_verdicts
    from winml_perf.ep.options import parse_options
    from winml_perf.measure.serving.run import ServeRequest, run_serving
    from winml_perf.model.serving import Lengths, Slo
    from winml_perf.publish.render import run_text
    from winml_perf.publish.serving_table import serving_text

    if fmt not in ("table", "json"):
        raise UsageError(f"--format {fmt!r} is not offered by serve", "use --format table or --format json")
    if fallback not in (None, "batch1"):
        raise UsageError(f"--fallback {fallback!r} is not understood", "the one fallback is --fallback batch1")
    if store and no_store:
        raise UsageError("--store and --no-store both given", "pass one of them")
    flag_bounds.check("--requests", requests)
    flag_bounds.check("--invocations", invocations)
    prompt = None if prompt_tokens is None else Lengths.parse(prompt_tokens, "--prompt-tokens")
    new = Lengths.parse(max_new_tokens, "--max-new-tokens")
    for flag, lengths in (("--prompt-tokens", prompt), ("--max-new-tokens", new)):
        if lengths is not None:
            flag_bounds.check(flag, lengths.high, lengths.text)
    if output is not None:
        check_output(output)
    req = ServeRequest(
        path=bundle,
        routes=_routes(route or [], ep, device),
        ep_libraries=tuple(ep_library or ()),
        ep_options=tuple(sorted(parse_options(ep_option or ()).items())),
        concurrency=_ints(concurrency or [], "--concurrency"),
        rates=_rates(request_rate or []),
        requests=requests,
        prompt_tokens=prompt,
        max_new_tokens=new,
        slo=Slo.parse(slo),
        invocations=invocations,
        seed=seed,
        sequential_baseline=baseline,
        fallback=fallback == "batch1",
        quiet=quiet or fmt == "json",
        store=store,
        no_store=no_store,
    )
    req.loads()  # no load given: exit 2 before preparing anything
    labels = [r.label for r in req.routes]
    if reference is not None and reference not in labels:
        raise UsageError(
            f"--reference {reference!r} is not one of the routes ({', '.join(labels)})", "name one of them"
        )
    outcome = run_serving(req, argv=sys.argv[1:])
    run = outcome.run
    if output is not None:
        write_output(output, run_text(run, "json"))
    cells = list(run.cells)
    text = serving_text(cells, batching_gains(cells), route_verdicts(cells, reference))
    if fmt == "json":
        sys.stdout.write(run_text(run, "json"))
        print(text, file=sys.stderr, end="")
    else:
        print(text, end="")
    sys.stdout.flush()
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
