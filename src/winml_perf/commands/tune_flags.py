"""`winml tune`'s flags, in groups: each group a frozen dataclass whose fields declare its flags.

commands/option_groups.py lays the fields out for typer in the order written here, which is the
order of `winml tune --help`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

from winml_perf.publish.formats import Offer, format_help

OBJECTIVE_HELP = "decode (tok/s), ttft, e2e or request_ttft (ms); goodput (requests/s meeting --slo under load)."
BUDGET_HELP = "Wall time or tokens the race may spend (preparing and checking the routes come before it)."
SCREEN_HELP = "Short rounds of every route before the full ones, dropping the clearly slower (default 2; 0: none)."


@dataclass(frozen=True)
class SearchFlags:
    """What is searched and what wins: the EPs and stages assigned, their options, the objective, the budget."""

    eps: Annotated[
        str | None,
        typer.Option(metavar="EP[,EP]", help="EPs to assign to the stages (default: every EP with a device here)."),
    ] = None
    stages: Annotated[
        str | None,
        typer.Option(metavar="NAME[,NAME]", help="Search only these stages; the others stay as config has them."),
    ] = None
    ep_option: Annotated[
        list[str] | None,
        typer.Option(metavar="EP:KEY=VALUE", help="An option of an EP's forced routes (repeatable)."),
    ] = None
    objective: Annotated[str, typer.Option(metavar="WHAT", help=OBJECTIVE_HELP)] = "decode"
    max_ttft_ms: Annotated[
        float | None, typer.Option(metavar="MS", help="Constraint: a route's TTFT median at most this.")
    ] = None
    budget: Annotated[str, typer.Option(metavar="300s|20000tok", help=BUDGET_HELP)] = "300s"


@dataclass(frozen=True)
class CandidateFlags:
    """How the candidate routes are made and which are pruned before the race."""

    min_placement: Annotated[
        float,
        typer.Option(metavar="SHARE", help="Prune a route whose forced stage keeps fewer of its nodes on its EP."),
    ] = 0.5
    max_device_crossings: Annotated[
        int | None, typer.Option(metavar="N", help="Prune assignments whose data crosses devices more often.")
    ] = None
    compile: Annotated[bool, typer.Option("--compile", metavar="", help="EPContext-compile forced stages.")] = False
    ep_library: Annotated[
        list[str] | None, typer.Option(metavar="NAME=PATH", help="A plugin EP library (repeatable).")
    ] = None
    no_equivalence: Annotated[
        bool, typer.Option("--no-equivalence", metavar="", help="Do not prune routes not equivalent to config.")
    ] = False
    no_equivalence_cache: Annotated[
        bool, typer.Option("--no-equivalence-cache", metavar="", help="Judge afresh; reuse no verdict.")
    ] = False


@dataclass(frozen=True)
class RoundFlags:
    """What each race round measures: lengths, iterations (single stream) or a closed loop (goodput), rounds, seed."""

    prompt_tokens: Annotated[
        int | None, typer.Option(metavar="N", help="Prompt length (default 16, or the bundle's static one).")
    ] = None
    max_new_tokens: Annotated[int, typer.Option(metavar="N", help="Tokens generated per iteration.")] = 32
    iterations: Annotated[
        int | None, typer.Option(metavar="N", help="Measured iterations in each invocation (default 5).")
    ] = None
    warmup: Annotated[
        int | None, typer.Option(metavar="N", help="Warmup iterations in each invocation (default 1).")
    ] = None
    concurrency: Annotated[
        int | None, typer.Option(metavar="N", help="--objective goodput: requests in flight (default 4).")
    ] = None
    requests: Annotated[
        int | None, typer.Option(metavar="N", help="--objective goodput: requests per route per round (default 16).")
    ] = None
    slo: Annotated[
        str | None,
        typer.Option(
            metavar="ttft=MS,tpot=MS", help="--objective goodput: what a request meets to count (ttft=200ms,tpot=50ms)."
        ),
    ] = None
    max_rounds: Annotated[int, typer.Option(metavar="N", help="At most this many race rounds.")] = 30
    screen_rounds: Annotated[int | None, typer.Option(metavar="N", help=SCREEN_HELP)] = None
    seed: Annotated[int, typer.Option(metavar="N", help="Seeds the prompt and each round's order.")] = 0


@dataclass(frozen=True)
class TuneOutputFlags:
    """Where the outcome goes: the store, the emitted winner, the tune report, stdout's format."""

    store: Annotated[str | None, typer.Option(metavar="PATH|URL", help="Results store (as winml perf).")] = None
    no_store: Annotated[bool, typer.Option("--no-store", metavar="", help="Store nothing.")] = False
    emit: Annotated[Path | None, typer.Option(metavar="DIR", help="Write the winner as a bundle in DIR (new).")] = None
    report: Annotated[
        Path | None,
        typer.Option(
            metavar="FILE", help="The tune report (JSON); by default in results/tune/, named by time and seed."
        ),
    ] = None
    fmt: Annotated[str, typer.Option("--format", metavar="FORMAT", help=format_help(Offer.SUMMARY, "on stdout"))] = (
        "table"
    )
