"""`winml serve`'s flags, in groups: each group a frozen dataclass whose fields declare its flags.

commands/option_groups.py lays the fields out for typer in the order written here, which is the
order of `winml serve --help` (a new flag joins a group with ``rich_help_panel=PANEL``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

from winml_perf.publish.formats import Offer, format_help

ROUTING = "Routing"
LOAD = "Load"
OUTPUT = "Output"


@dataclass(frozen=True)
class ServeRoutingFlags:
    """The routes served: --route specs or one --ep/--device route, EP options and plugins, the fallback."""

    route: Annotated[
        list[str] | None,
        typer.Option(metavar="ROUTE", rich_help_panel=ROUTING, help="config, ep=NAME, device=CLASS (repeatable)."),
    ] = None
    ep: Annotated[
        str | None, typer.Option(metavar="NAME", rich_help_panel=ROUTING, help="Force every stage onto this EP.")
    ] = None
    device: Annotated[
        str | None, typer.Option(metavar="CLASS", rich_help_panel=ROUTING, help="config, auto, cpu, gpu or npu.")
    ] = None
    ep_option: Annotated[
        list[str] | None, typer.Option(metavar="KEY=VALUE", rich_help_panel=ROUTING, help="EP provider option.")
    ] = None
    ep_library: Annotated[
        list[str] | None, typer.Option(metavar="NAME=PATH", rich_help_panel=ROUTING, help="Register a plugin EP.")
    ] = None
    fallback: Annotated[
        str | None,
        typer.Option(
            metavar="batch1",
            rich_help_panel=ROUTING,
            help="Where the Engine refuses a route, serve it with batch-1 generators stepped in turn (labelled).",
        ),
    ] = None


@dataclass(frozen=True)
class LoadFlags:
    """The load points and the requests each serves: loads, lengths, objectives, baseline, invocations, seed."""

    concurrency: Annotated[
        list[str] | None, typer.Option(metavar="N[,N]", rich_help_panel=LOAD, help="Closed loop: requests in flight.")
    ] = None
    request_rate: Annotated[
        list[str] | None,
        typer.Option(metavar="R[,R]/s", rich_help_panel=LOAD, help="Open loop: Poisson arrivals per second."),
    ] = None
    requests: Annotated[int, typer.Option(metavar="N", rich_help_panel=LOAD, help="Requests per load point.")] = 16
    prompt_tokens: Annotated[
        str | None,
        typer.Option(
            metavar="N|LOW-HIGH",
            rich_help_panel=LOAD,
            help="Prompt length, fixed or uniform (default 128, or a static pipeline's length).",
        ),
    ] = None
    max_new_tokens: Annotated[
        str, typer.Option(metavar="N|LOW-HIGH", rich_help_panel=LOAD, help="Output length, fixed or uniform.")
    ] = "32"
    slo: Annotated[str, typer.Option(metavar="ttft=MS,tpot=MS", rich_help_panel=LOAD, help="Goodput's objectives.")] = (
        "ttft=200ms,tpot=50ms"
    )
    baseline: Annotated[
        bool,
        typer.Option(
            "--baseline/--no-baseline",
            rich_help_panel=LOAD,
            help="Also serve the requests one after another in batch-1 generators (the batching gain's base).",
        ),
    ] = True
    invocations: Annotated[
        int, typer.Option(metavar="N", rich_help_panel=LOAD, help="Fresh processes per route (intervals over them).")
    ] = 3
    seed: Annotated[int, typer.Option(metavar="N", rich_help_panel=LOAD, help="Seed of arrivals, lengths, order.")] = 0


@dataclass(frozen=True)
class ServeOutputFlags:
    """What is judged against what, and where the run goes: the reference route, format, file, store, progress."""

    reference: Annotated[
        str | None, typer.Option(metavar="ROUTE", rich_help_panel=OUTPUT, help="Route the others are judged against.")
    ] = None
    fmt: Annotated[
        str, typer.Option("--format", metavar="FMT", rich_help_panel=OUTPUT, help=format_help(Offer.SUMMARY))
    ] = "table"
    output: Annotated[
        Path | None,
        typer.Option("-o", "--output", metavar="FILE", rich_help_panel=OUTPUT, help="Write the run record."),
    ] = None
    store: Annotated[str | None, typer.Option(metavar="PATH|URL", rich_help_panel=OUTPUT, help="Results store.")] = None
    no_store: Annotated[bool, typer.Option("--no-store", rich_help_panel=OUTPUT, help="Do not store the cells.")] = (
        False
    )
    quiet: Annotated[bool, typer.Option("--quiet", "-q", rich_help_panel=OUTPUT, help="No progress lines.")] = False
