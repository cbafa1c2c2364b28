"""`winml perf`'s flags, in groups: each group a frozen dataclass whose fields declare its flags.

commands/option_groups.py lays the fields out for typer in the order written here, which is the
order of `winml perf --help` (a new flag joins a group with ``rich_help_panel=PANEL``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

from winml_perf.model.defaults import DEFAULTS
from winml_perf.model.spec import MAX_SWEEP_CELLS
from winml_perf.publish.formats import Offer, format_help

# Help panels: a new option joins one with `rich_help_panel=PANEL`.
ROUTING = "Routing"
WORKLOAD = "Workload"
MEASUREMENT = "Measurement"
OUTPUT = "Output"
ONNX = "Plain ONNX models"


@dataclass(frozen=True)
class RoutingFlags:
    """Where each route runs: runtime, EP or device, --route specs, plugin libraries, EP options, compile."""

    runtime: Annotated[
        str | None,
        typer.Option(
            metavar="NAME",
            rich_help_panel=ROUTING,
            help="winml-genai (bundles) or winml (plain ONNX); default from the path.",
        ),
    ] = None
    ep: Annotated[
        str | None,
        typer.Option(
            metavar="NAME",
            rich_help_panel=ROUTING,
            help="Force every stage onto this EP (name or alias); wins over --device.",
        ),
    ] = None
    device: Annotated[
        str | None,
        typer.Option(metavar="CLASS", rich_help_panel=ROUTING, help="config (genai default), auto, cpu, gpu or npu."),
    ] = None
    route: Annotated[
        list[str] | None,
        typer.Option(
            metavar="ROUTE", rich_help_panel=ROUTING, help="A route to measure (repeatable, interleaved); syntax below."
        ),
    ] = None
    stages: Annotated[
        str | None, typer.Option(metavar="A,B", rich_help_panel=ROUTING, help="Limit a forced route to these stages.")
    ] = None
    ep_library: Annotated[
        list[str] | None,
        typer.Option(metavar="NAME=PATH", rich_help_panel=ROUTING, help="Plugin EP library (repeatable)."),
    ] = None
    ep_option: Annotated[
        list[str] | None,
        typer.Option(
            metavar="KEY=VALUE",
            rich_help_panel=ROUTING,
            help="EP provider option of forced routes (repeatable), e.g. soc_model=60.",
        ),
    ] = None
    compile: Annotated[
        bool,
        typer.Option(
            "--compile",
            metavar="",
            rich_help_panel=ROUTING,
            help="Compile stages to EPContext where the EP supports it.",
        ),
    ] = False
    compile_timeout: Annotated[
        float, typer.Option(metavar="S", rich_help_panel=ROUTING, help="Seconds allowed for each compile.")
    ] = DEFAULTS.compile_timeout_s
    verify_sources: Annotated[
        bool,
        typer.Option(
            "--verify-sources",
            metavar="",
            rich_help_panel=ROUTING,
            help="Hash source files' contents for the cache key.",
        ),
    ] = False
    strict: Annotated[
        bool,
        typer.Option(
            "--strict",
            metavar="",
            rich_help_panel=ROUTING,
            help="Fail a forced route when any node of a forced stage would run on CPU.",
        ),
    ] = False
    allow_uncompiled: Annotated[
        bool,
        typer.Option(
            "--allow-uncompiled",
            metavar="",
            rich_help_panel=ROUTING,
            help="With --compile: measure a route whose compile failed, labelled (uncompiled), instead of failing it.",
        ),
    ] = False
    no_recompile: Annotated[
        bool,
        typer.Option(
            "--no-recompile",
            metavar="",
            rich_help_panel=ROUTING,
            help="With --compile (or --prepare, an .onnx model): use what winml bundle prepare made, or refuse "
            "saying why; never compile here.",
        ),
    ] = False


@dataclass(frozen=True)
class WorkloadFlags:
    """What each cell generates: the prompt (text or synthetic lengths) and the new-token counts."""

    prompt: Annotated[
        str | None,
        typer.Option(metavar="TEXT", rich_help_panel=WORKLOAD, help="Prompt text (default: synthetic tokens)."),
    ] = None
    apply_template: Annotated[
        bool,
        typer.Option(
            "--apply-template",
            metavar="",
            rich_help_panel=WORKLOAD,
            help="Wrap --prompt in the bundle's chat template.",
        ),
    ] = False
    prompt_tokens: Annotated[
        list[str] | None,
        typer.Option(
            metavar="N",
            rich_help_panel=WORKLOAD,
            help=f"Prompt length(s) in tokens; a sweep (syntax below). Default {DEFAULTS.prompt_tokens}.",
        ),
    ] = None
    max_new_tokens: Annotated[
        list[str] | None,
        typer.Option(
            metavar="N",
            rich_help_panel=WORKLOAD,
            help=f"Tokens generated per iteration; a sweep. Default {DEFAULTS.max_new_tokens}.",
        ),
    ] = None
    seed: Annotated[
        int, typer.Option(metavar="N", rich_help_panel=WORKLOAD, help="Seed for synthetic prompts and the route order.")
    ] = DEFAULTS.seed


@dataclass(frozen=True)
class JudgeFlags:
    """Whether routes compute the same thing: equivalence, its reference, perplexity, output checks."""

    equivalence: Annotated[
        bool | None,
        typer.Option(
            "--equivalence/--no-equivalence",
            rich_help_panel=WORKLOAD,
            help="Judge each route's teacher-forced logits against the reference before measuring "
            "(default: on with 2+ routes or --reference-bundle; docs/equivalence.md).",
        ),
    ] = None
    no_equivalence_cache: Annotated[
        bool,
        typer.Option(
            "--no-equivalence-cache",
            metavar="",
            rich_help_panel=WORKLOAD,
            help="Judge equivalence afresh instead of reusing a verdict judged before on the same bundles' "
            "content (docs/equivalence.md).",
        ),
    ] = False
    reference_bundle: Annotated[
        Path | None,
        typer.Option(
            "--reference-bundle",
            metavar="PATH",
            rich_help_panel=WORKLOAD,
            help="Judge every route against this bundle (same tokenizer), e.g. the fp32 build.",
        ),
    ] = None
    reference: Annotated[
        str | None,
        typer.Option(
            "--reference",
            metavar="ROUTE",
            rich_help_panel=WORKLOAD,
            help="Judge every other route against this one of the run's routes (e.g. ep=cpu); default config.",
        ),
    ] = None
    perplexity: Annotated[
        bool,
        typer.Option(
            "--perplexity",
            metavar="",
            rich_help_panel=WORKLOAD,
            help="Each route's perplexity over a fixed English text (Coriolanus Act 1, packaged) and its ratio "
            "to the reference's, with 95 % intervals, before measuring (docs/equivalence.md).",
        ),
    ] = False
    perplexity_text: Annotated[
        Path | None,
        typer.Option(
            "--perplexity-text",
            metavar="FILE",
            rich_help_panel=WORKLOAD,
            help="Score this UTF-8 text instead of the packaged one (implies --perplexity).",
        ),
    ] = None
    perplexity_chunk: Annotated[
        int,
        typer.Option(
            "--perplexity-chunk",
            metavar="N",
            rich_help_panel=WORKLOAD,
            help="Tokens per --perplexity chunk (the second half of each is scored; at most the model's context_length).",
        ),
    ] = 512
    check_outputs: Annotated[
        bool,
        typer.Option(
            "--check-outputs",
            metavar="",
            rich_help_panel=WORKLOAD,
            help="Compare forced routes' greedy tokens with the config route.",
        ),
    ] = False


@dataclass(frozen=True)
class MeasurementFlags:
    """How each cell is measured: warmup, iterations and invocations (fixed, adaptive or sustained), isolation."""

    warmup: Annotated[
        str,
        typer.Option(
            metavar="N|auto", rich_help_panel=MEASUREMENT, help="Warmup iterations, or auto (until times settle)."
        ),
    ] = str(DEFAULTS.warmup)
    iterations: Annotated[
        int,
        typer.Option(metavar="N", rich_help_panel=MEASUREMENT, help="Measured iterations in each invocation (fixed)."),
    ] = DEFAULTS.iterations
    invocations: Annotated[
        int | None,
        typer.Option(
            metavar="N",
            rich_help_panel=MEASUREMENT,
            help=f"Invocations per route: a fresh process and model load each, interleaved across routes (default {DEFAULTS.invocations}; adaptive: at least {DEFAULTS.adaptive_min_invocations}). 1: one process, its interval covers that process only.",
        ),
    ] = None
    max_invocations: Annotated[
        int,
        typer.Option(
            metavar="N", rich_help_panel=MEASUREMENT, help="Adaptive: at most this many invocations per route."
        ),
    ] = DEFAULTS.max_invocations
    target_ci: Annotated[
        str | None,
        typer.Option(
            metavar="PCT",
            rich_help_panel=MEASUREMENT,
            help="Adaptive: run until the 95% CI of the median is within ±PCT (e.g. 1%).",
        ),
    ] = None
    min_iterations: Annotated[
        int,
        typer.Option(
            metavar="N", rich_help_panel=MEASUREMENT, help="Adaptive: at least this many iterations in each invocation."
        ),
    ] = DEFAULTS.min_iterations
    max_iterations: Annotated[
        int,
        typer.Option(
            metavar="N",
            rich_help_panel=MEASUREMENT,
            help="Adaptive: at most this many iterations per cell, all invocations together.",
        ),
    ] = DEFAULTS.max_iterations
    max_time: Annotated[
        float,
        typer.Option(
            metavar="S",
            rich_help_panel=MEASUREMENT,
            help="Adaptive: at most this many seconds per cell (loads, warmups and iterations).",
        ),
    ] = DEFAULTS.max_time_s
    duration: Annotated[
        str | None,
        typer.Option(
            metavar="TIME",
            rich_help_panel=MEASUREMENT,
            help="Sustained run: generate for TIME (90s, 10m) and record tokens/s, energy and memory over time.",
        ),
    ] = None
    rounds: Annotated[
        int | None,
        typer.Option(
            metavar="N", rich_help_panel=MEASUREMENT, help="Interleaved rounds per cell group (several routes)."
        ),
    ] = None
    isolate: Annotated[
        bool | None,
        typer.Option(
            "--isolate/--no-isolate",
            metavar="",
            show_default=False,
            rich_help_panel=MEASUREMENT,
            help="Each route in its own child process (default with several routes).",
        ),
    ] = None
    cell_timeout: Annotated[
        float | None,
        typer.Option(
            metavar="S", rich_help_panel=MEASUREMENT, help="Seconds before an isolated cell is killed as hung."
        ),
    ] = None
    explain: Annotated[
        bool,
        typer.Option(
            "--explain",
            metavar="",
            rich_help_panel=MEASUREMENT,
            help="After each cell, profile its route apart: per-stage and per-operator time, and the difference between routes.",
        ),
    ] = False


@dataclass(frozen=True)
class OutputFlags:
    """Where the results go: the store, the series name, files (-o, --export-FORMAT) and stdout's format."""

    store: Annotated[
        str | None,
        typer.Option(
            metavar="PATH|URL",
            rich_help_panel=OUTPUT,
            help="Results store: SQLite path or postgresql:// URL (default results/winml-perf.db, or $WINML_PERF_STORE).",
        ),
    ] = None
    no_store: Annotated[
        bool, typer.Option("--no-store", metavar="", rich_help_panel=OUTPUT, help="Do not store the results.")
    ] = False
    series: Annotated[
        str | None,
        typer.Option(
            "--series",
            metavar="NAME",
            rich_help_panel=OUTPUT,
            help="Store the results as series NAME (with route, shape, testbed) in place of the bundle's path: a bundle built into a new folder each night stays one series.",
        ),
    ] = None
    large_sweep: Annotated[
        bool,
        typer.Option(
            "--large-sweep",
            metavar="",
            help=f"Allow a sweep of more than {MAX_SWEEP_CELLS} cells (routes x prompt lengths x new-token counts).",
        ),
    ] = False
    output: Annotated[
        Path | None,
        typer.Option(
            "-o", "--output", metavar="FILE", rich_help_panel=OUTPUT, help="Also write the run record (JSON) to FILE."
        ),
    ] = None
    export_json: Annotated[
        Path | None,
        typer.Option(
            "--export-json", metavar="FILE", rich_help_panel=OUTPUT, help="Write the run record (JSON) to FILE."
        ),
    ] = None
    export_jsonl: Annotated[
        Path | None,
        typer.Option(
            "--export-jsonl", metavar="FILE", rich_help_panel=OUTPUT, help="Write one cell record per line to FILE."
        ),
    ] = None
    export_csv: Annotated[
        Path | None,
        typer.Option(
            "--export-csv",
            metavar="FILE",
            rich_help_panel=OUTPUT,
            help="Write the result table (raw numbers) as CSV to FILE.",
        ),
    ] = None
    export_markdown: Annotated[
        Path | None,
        typer.Option(
            "--export-markdown",
            metavar="FILE",
            rich_help_panel=OUTPUT,
            help="Write the result table as markdown to FILE.",
        ),
    ] = None
    fmt: Annotated[
        str,
        typer.Option(
            "--format",
            metavar="FORMAT",
            rich_help_panel=OUTPUT,
            help=format_help(Offer.ROWS, "on stdout (other text on stderr)"),
        ),
    ] = "table"
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", metavar="", rich_help_panel=OUTPUT, help="No progress bar.")
    ] = False
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", metavar="", rich_help_panel=OUTPUT, help="Tracebacks on errors.")
    ] = False


@dataclass(frozen=True)
class OnnxFlags:
    """Plain ONNX models only (--runtime winml): input shapes and data, I/O binding, session options."""

    shape: Annotated[
        list[str] | None,
        typer.Option(
            metavar="NAME=DIMS",
            rich_help_panel=ONNX,
            help="NAME=1x3x224x224, or DIM=N for a dynamic dimension (repeatable).",
        ),
    ] = None
    input: Annotated[
        list[str] | None,
        typer.Option(metavar="NAME=FILE", rich_help_panel=ONNX, help="NAME=file.npy real input data (repeatable)."),
    ] = None
    io_binding: Annotated[
        bool,
        typer.Option(
            "--io-binding",
            metavar="",
            rich_help_panel=ONNX,
            help="Bind inputs/outputs once, on the EP's device where possible.",
        ),
    ] = False
    prepare: Annotated[
        bool,
        typer.Option(
            "--prepare",
            metavar="",
            rich_help_panel=ONNX,
            help="Load an ahead-of-time prepared model (`winml bundle prepare`).",
        ),
    ] = False
    intra_op_threads: Annotated[
        int | None, typer.Option(metavar="N", rich_help_panel=ONNX, help="Session intra-op threads.")
    ] = None
    inter_op_threads: Annotated[
        int | None, typer.Option(metavar="N", rich_help_panel=ONNX, help="Session inter-op threads.")
    ] = None
    graph_optimization_level: Annotated[
        str | None, typer.Option(metavar="LEVEL", rich_help_panel=ONNX, help="disable, basic, extended, layout or all.")
    ] = None
    session_config: Annotated[
        list[str] | None,
        typer.Option(metavar="KEY=VALUE", rich_help_panel=ONNX, help="Session config entry (repeatable)."),
    ] = None
