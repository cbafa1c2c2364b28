"""`winml perf`: parse flags into a PerfRequest, run it, render the run record."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from winml_perf.ep.options import parse_options
from winml_perf.model.defaults import DEFAULTS
from winml_perf.model.runtime import RUNTIMES, Runtime, runtime_for_path, runtime_named
from winml_perf.model.spec import MAX_SWEEP_CELLS
from winml_perf.support.errors import BenchmarkFailure, RunInterrupted, StoreError, UsageError
from winml_perf.support.output import check_output, write_output
from winml_perf.support.text_table import fill

if TYPE_CHECKING:
    from winml_perf.model.record import RunRecord

GENAI_ONLY = ("--stages", "--compile", "--prompt", "--prompt-tokens", "--apply-template", "--duration")
ONNX_ONLY = ("--shape", "--input", "--io-binding", "--prepare")


def _positive(value: int, flag: str) -> int:
    if value <= 0:
        raise UsageError(f"{flag} must be a positive integer, got {value}", f"pass {flag} 1 or more")
    return value


def _percent(text: str, flag: str) -> float:
    try:
        value = float(text.strip().rstrip("%"))
    except ValueError:
        raise UsageError(f"{flag} {text!r} is not a percentage", f"e.g. {flag} 1%") from None
    if not value > 0:
        raise UsageError(f"{flag} must be above 0%, got {text}", f"e.g. {flag} 1%")
    return value


def _save_unstored(outcome, run: RunRecord) -> Path | None:
    """The run record next to the store, for cells the store did not take; None when that fails too."""
    if outcome.unstored_path is None:
        return None
    path = outcome.unstored_path / f"{run.run_id}.json"
    try:
        check_output(path)
        write_output(path, run_text(run, "json"))
    except UsageError:
        return None
    return path


def _kept(outcome, run: RunRecord, written: list[str]) -> str:
    """Where an interrupted run's finished cells are, said in one clause."""
    n = len(run.cells)
    if outcome.store_errors:
        saved = _save_unstored(outcome, run)
        places = written + ([str(saved)] if saved else [])
        where = ("kept in " + " and ".join(places)) if places else "not kept (the store refused them)"
    else:
        parts = ([f"stored in {outcome.store}"] if outcome.store else []) + (
            [f"written to {' and '.join(written)}"] if written else []
        )
        where = " and ".join(parts) or "not kept (--no-store, no -o)"
    return f"{n} finished cell(s) {where} (run {run.run_id})"


def _warmup(text: str):
    from winml_perf.model.spec import WarmupPolicy

    if text == "auto":
        return WarmupPolicy(mode="settle", count=DEFAULTS.warmup)
    try:
        n = int(text)
    except ValueError:
        raise UsageError(
            f"--warmup {text!r} is neither a count nor 'auto'", "e.g. --warmup 2 or --warmup auto"
        ) from None
    if n < 0:
        raise UsageError(f"--warmup must be 0 or more, got {n}", "pass --warmup 0 or more")
    return WarmupPolicy(mode="count", count=n, max_count=max(n, DEFAULTS.warmup_max))


#: Invocations (fresh processes) by default; the why is at model/defaults.py.
DEFAULT_INVOCATIONS = DEFAULTS.invocations
#: Least invocations of an adaptive run before it may stop at its target (model/defaults.py).
ADAPTIVE_MIN_INVOCATIONS = DEFAULTS.adaptive_min_invocations


def _iterations(
    iterations: int,
    target_ci: str | None,
    min_iterations: int,
    max_iterations: int,
    max_time: float,
    invocations: int | None = None,
    max_invocations: int = DEFAULTS.max_invocations,
):
    from winml_perf.model.spec import IterationPolicy

    _positive(iterations, "--iterations")
    if invocations is not None:
        _positive(invocations, "--invocations")
    if target_ci is None:
        return IterationPolicy(
            iterations=iterations, invocations=DEFAULT_INVOCATIONS if invocations is None else invocations
        )
    least = ADAPTIVE_MIN_INVOCATIONS if invocations is None else invocations
    cap = 1 if least == 1 else _positive(max_invocations, "--max-invocations")
    return IterationPolicy.until_ci(
        _percent(target_ci, "--target-ci"),
        _positive(min_iterations, "--min-iterations"),
        _positive(max_iterations, "--max-iterations"),
        max_time,
        least,
        cap,
    )


def _routes(route: list[str], ep: str | None, device: str | None, stages: str | None):
    from winml_perf.measure.orchestrate import RouteRequest, parse_route

    stage_list = tuple(s.strip() for s in stages.split(",") if s.strip()) if stages else ()
    if route:
        if ep or device or stages:
            raise UsageError(
                "--route cannot be combined with --ep/--device/--stages",
                "put each route in its own --route, e.g. --route 'ep=webgpu;stages=context'",
            )
        return tuple(parse_route(r) for r in route)
    return (RouteRequest(ep=ep, device=device, stages=stage_list),)


def _check_sweep_size(routes: int, prompts: tuple[int, ...], news: tuple[int, ...], allowed: bool) -> None:
    """A sweep over MAX_SWEEP_CELLS cells is a typo until --large-sweep says otherwise (exit 2, before any work)."""
    cells = routes * max(1, len(prompts)) * max(1, len(news))
    if cells > MAX_SWEEP_CELLS and not allowed:
        raise UsageError(
            f"the sweep has {cells:,} cells ({routes} route(s) x {max(1, len(prompts))} prompt length(s) x "
            f"{max(1, len(news))} new-token count(s)), over the limit of {MAX_SWEEP_CELLS:,}",
            "sweep fewer values, or pass --large-sweep to run it anyway",
        )


def _check_runtime_flags(runtime: Runtime, given: dict[str, bool]) -> None:
    wrong = ONNX_ONLY if runtime.token_based else GENAI_ONLY
    bad = [flag for flag in wrong if given.get(flag)]
    if bad:
        other = next(r for r in RUNTIMES.values() if r is not runtime)
        raise UsageError(
            f"{', '.join(bad)} do not apply to --runtime {runtime}",
            f"they belong to --runtime {other.name} ({other.what})",
        )


# Help panels: a new option joins one with `rich_help_panel=PANEL`.
ROUTING = "Routing"
WORKLOAD = "Workload"
MEASUREMENT = "Measurement"
OUTPUT = "Output"
ONNX = "Plain ONNX models"

EPILOG = """\
[bold]Routes[/bold] (--route, repeatable; one run measures its routes interleaved):
  config              the bundle as its genai_config.json places it
  ep=NAME             every stage on EP NAME (cpu, webgpu, qnn, openvino, ...)
  device=CLASS        every stage on a device class: cpu, gpu, npu or auto
  ep=NAME;stages=A,B  only stages A and B forced (device=CLASS;stages=A too)
  ep=NAME;options=K=V,K=V   with EP provider options (over --ep-option), e.g. ep=qnn;options=soc_model=60
  stages=A:EP,B:EP    each named stage on its own EP, the rest as config (options=EP:K=V, e.g. options=qnn:soc_model=60)

[bold]Sweeps[/bold] (--prompt-tokens, --max-new-tokens; repeating a flag adds values):
  N                   one value, or a comma list: 16,64
  FIRST-LAST+STEP     16-64+16 = 16,32,48,64
  FIRST-LAST*FACTOR   128-1024*2 = 128,256,512,1024

[bold]Examples[/bold]:
  winml perf bundles/tiny-qwen2
  winml perf bundles/tiny-qwen2 --route config --route ep=webgpu
  winml perf bundles/tiny-qwen2 --prompt-tokens 128-1024*2 --export-csv t.csv
  winml perf model.onnx --ep cpu --shape N=8 --iterations 50
"""


def perf(
    bundle: Annotated[
        Path,
        typer.Argument(
            metavar="BUNDLE", show_default=False, help="A bundle folder (genai_config.json) or an .onnx model."
        ),
    ],
    runtime: Annotated[
        str | None,
        typer.Option(
            metavar="NAME",
            rich_help_panel=ROUTING,
            help="winml-genai (bundles) or winml (plain ONNX); default from the path.",
        ),
    ] = None,
    ep: Annotated[
        str | None,
        typer.Option(
            metavar="NAME",
            rich_help_panel=ROUTING,
            help="Force every stage onto this EP (name or alias); wins over --device.",
        ),
    ] = None,
    device: Annotated[
        str | None,
        typer.Option(metavar="CLASS", rich_help_panel=ROUTING, help="config (genai default), auto, cpu, gpu or npu."),
    ] = None,
    route: Annotated[
        list[str] | None,
        typer.Option(
            metavar="ROUTE", rich_help_panel=ROUTING, help="A route to measure (repeatable, interleaved); syntax below."
        ),
    ] = None,
    stages: Annotated[
        str | None, typer.Option(metavar="A,B", rich_help_panel=ROUTING, help="Limit a forced route to these stages.")
    ] = None,
    ep_library: Annotated[
        list[str] | None,
        typer.Option(metavar="NAME=PATH", rich_help_panel=ROUTING, help="Plugin EP library (repeatable)."),
    ] = None,
    ep_option: Annotated[
        list[str] | None,
        typer.Option(
            metavar="KEY=VALUE",
            rich_help_panel=ROUTING,
            help="EP provider option of forced routes (repeatable), e.g. soc_model=60.",
        ),
    ] = None,
    compile: Annotated[
        bool,
        typer.Option(
            "--compile",
            metavar="",
            rich_help_panel=ROUTING,
            help="Compile stages to EPContext where the EP supports it.",
        ),
    ] = False,
    compile_timeout: Annotated[
        float, typer.Option(metavar="S", rich_help_panel=ROUTING, help="Seconds allowed for each compile.")
    ] = DEFAULTS.compile_timeout_s,
    verify_sources: Annotated[
        bool,
        typer.Option(
            "--verify-sources",
            metavar="",
            rich_help_panel=ROUTING,
            help="Hash source files' contents for the cache key.",
        ),
    ] = False,
    strict: Annotated[
        bool,
        typer.Option(
            "--strict",
            metavar="",
            rich_help_panel=ROUTING,
            help="Fail a forced route when any node of a forced stage would run on CPU.",
        ),
    ] = False,
    allow_uncompiled: Annotated[
        bool,
        typer.Option(
            "--allow-uncompiled",
            metavar="",
            rich_help_panel=ROUTING,
            help="With --compile: measure a route whose compile failed, labelled (uncompiled), instead of failing it.",
        ),
    ] = False,
    no_recompile: Annotated[
        bool,
        typer.Option(
            "--no-recompile",
            metavar="",
            rich_help_panel=ROUTING,
            help="With --compile (or --prepare, an .onnx model): use what winml bundle prepare made, or refuse "
            "saying why; never compile here.",
        ),
    ] = False,
    prompt: Annotated[
        str | None,
        typer.Option(metavar="TEXT", rich_help_panel=WORKLOAD, help="Prompt text (default: synthetic tokens)."),
    ] = None,
    apply_template: Annotated[
        bool,
        typer.Option(
            "--apply-template",
            metavar="",
            rich_help_panel=WORKLOAD,
            help="Wrap --prompt in the bundle's chat template.",
        ),
    ] = False,
    prompt_tokens: Annotated[
        list[str] | None,
        typer.Option(
            metavar="N",
            rich_help_panel=WORKLOAD,
            help=f"Prompt length(s) in tokens; a sweep (syntax below). Default {DEFAULTS.prompt_tokens}.",
        ),
    ] = None,
    max_new_tokens: Annotated[
        list[str] | None,
        typer.Option(
            metavar="N",
            rich_help_panel=WORKLOAD,
            help=f"Tokens generated per iteration; a sweep. Default {DEFAULTS.max_new_tokens}.",
        ),
    ] = None,
    seed: Annotated[
        int, typer.Option(metavar="N", rich_help_panel=WORKLOAD, help="Seed for synthetic prompts and the route order.")
    ] = DEFAULTS.seed,
    equivalence: Annotated[
        bool | None,
        typer.Option(
            "--equivalence/--no-equivalence",
            rich_help_panel=WORKLOAD,
            help="Judge each route's teacher-forced logits against the reference before measuring "
            "(default: on with 2+ routes or --reference-bundle; docs/equivalence.md).",
        ),
    ] = None,
    reference_bundle: Annotated[
        Path | None,
        typer.Option(
            "--reference-bundle",
            metavar="PATH",
            rich_help_panel=WORKLOAD,
            help="Judge every route against this bundle (same tokenizer), e.g. the fp32 build.",
        ),
    ] = None,
    reference: Annotated[
        str | None,
        typer.Option(
            "--reference",
            metavar="ROUTE",
            rich_help_panel=WORKLOAD,
            help="Judge every other route against this one of the run's routes (e.g. ep=cpu); default config.",
        ),
    ] = None,
    perplexity: Annotated[
        bool,
        typer.Option(
            "--perplexity",
            metavar="",
            rich_help_panel=WORKLOAD,
            help="Each route's perplexity over a fixed English text (Coriolanus Act 1, packaged) and its ratio "
            "to the reference's, with 95 % intervals, before measuring (docs/equivalence.md).",
        ),
    ] = False,
    perplexity_text: Annotated[
        Path | None,
        typer.Option(
            "--perplexity-text",
            metavar="FILE",
            rich_help_panel=WORKLOAD,
            help="Score this UTF-8 text instead of the packaged one (implies --perplexity).",
        ),
    ] = None,
    perplexity_chunk: Annotated[
        int,
        typer.Option(
            "--perplexity-chunk",
            metavar="N",
            rich_help_panel=WORKLOAD,
            help="Tokens per --perplexity chunk (the second half of each is scored; at most the model's context_length).",
        ),
    ] = 512,
    check_outputs: Annotated[
        bool,
        typer.Option(
            "--check-outputs",
            metavar="",
            rich_help_panel=WORKLOAD,
            help="Compare forced routes' greedy tokens with the config route.",
        ),
    ] = False,
    warmup: Annotated[
        str,
        typer.Option(
            metavar="N|auto", rich_help_panel=MEASUREMENT, help="Warmup iterations, or auto (until times settle)."
        ),
    ] = str(DEFAULTS.warmup),
    iterations: Annotated[
        int,
        typer.Option(metavar="N", rich_help_panel=MEASUREMENT, help="Measured iterations in each invocation (fixed)."),
    ] = DEFAULTS.iterations,
    invocations: Annotated[
        int | None,
        typer.Option(
            metavar="N",
            rich_help_panel=MEASUREMENT,
            help=f"Invocations per route: a fresh process and model load each, interleaved across routes (default {DEFAULTS.invocations}; adaptive: at least {DEFAULTS.adaptive_min_invocations}). 1: one process, its interval covers that process only.",
        ),
    ] = None,
    max_invocations: Annotated[
        int,
        typer.Option(
            metavar="N", rich_help_panel=MEASUREMENT, help="Adaptive: at most this many invocations per route."
        ),
    ] = DEFAULTS.max_invocations,
    target_ci: Annotated[
        str | None,
        typer.Option(
            metavar="PCT",
            rich_help_panel=MEASUREMENT,
            help="Adaptive: run until the 95% CI of the median is within ±PCT (e.g. 1%).",
        ),
    ] = None,
    min_iterations: Annotated[
        int,
        typer.Option(
            metavar="N", rich_help_panel=MEASUREMENT, help="Adaptive: at least this many iterations in each invocation."
        ),
    ] = DEFAULTS.min_iterations,
    max_iterations: Annotated[
        int,
        typer.Option(
            metavar="N",
            rich_help_panel=MEASUREMENT,
            help="Adaptive: at most this many iterations per cell, all invocations together.",
        ),
    ] = DEFAULTS.max_iterations,
    max_time: Annotated[
        float,
        typer.Option(
            metavar="S",
            rich_help_panel=MEASUREMENT,
            help="Adaptive: at most this many seconds per cell (loads, warmups and iterations).",
        ),
    ] = DEFAULTS.max_time_s,
    duration: Annotated[
        str | None,
        typer.Option(
            metavar="TIME",
            rich_help_panel=MEASUREMENT,
            help="Sustained run: generate for TIME (90s, 10m) and record tokens/s, energy and memory over time.",
        ),
    ] = None,
    rounds: Annotated[
        int | None,
        typer.Option(
            metavar="N", rich_help_panel=MEASUREMENT, help="Interleaved rounds per cell group (several routes)."
        ),
    ] = None,
    isolate: Annotated[
        bool | None,
        typer.Option(
            "--isolate/--no-isolate",
            metavar="",
            show_default=False,
            rich_help_panel=MEASUREMENT,
            help="Each route in its own child process (default with several routes).",
        ),
    ] = None,
    cell_timeout: Annotated[
        float | None,
        typer.Option(
            metavar="S", rich_help_panel=MEASUREMENT, help="Seconds before an isolated cell is killed as hung."
        ),
    ] = None,
    explain: Annotated[
        bool,
        typer.Option(
            "--explain",
            metavar="",
            rich_help_panel=MEASUREMENT,
            help="After each cell, profile its route apart: per-stage and per-operator time, and the difference between routes.",
        ),
    ] = False,
    store: Annotated[
        str | None,
        typer.Option(
            metavar="PATH|URL",
            rich_help_panel=OUTPUT,
            help="Results store: SQLite path or postgresql:// URL (default results/winml-perf.db, or $WINML_PERF_STORE).",
        ),
    ] = None,
    no_store: Annotated[
        bool, typer.Option("--no-store", metavar="", rich_help_panel=OUTPUT, help="Do not store the results.")
    ] = False,
    series: Annotated[
        str | None,
        typer.Option(
            "--series",
            metavar="NAME",
            rich_help_panel=OUTPUT,
            help="Store the results as series NAME (with route, shape, testbed) in place of the bundle's path: a bundle built into a new folder each night stays one series.",
        ),
    ] = None,
    large_sweep: Annotated[
        bool,
        typer.Option(
            "--large-sweep",
            metavar="",
            help=f"Allow a sweep of more than {MAX_SWEEP_CELLS} cells (routes x prompt lengths x new-token counts).",
        ),
    ] = False,
    output: Annotated[
        Path | None,
        typer.Option(
            "-o", "--output", metavar="FILE", rich_help_panel=OUTPUT, help="Also write the run record (JSON) to FILE."
        ),
    ] = None,
    export_json: Annotated[
        Path | None,
        typer.Option(
            "--export-json", metavar="FILE", rich_help_panel=OUTPUT, help="Write the run record (JSON) to FILE."
        ),
    ] = None,
    export_jsonl: Annotated[
        Path | None,
        typer.Option(
            "--export-jsonl", metavar="FILE", rich_help_panel=OUTPUT, help="Write one cell record per line to FILE."
        ),
    ] = None,
    export_csv: Annotated[
        Path | None,
        typer.Option(
            "--export-csv",
            metavar="FILE",
            rich_help_panel=OUTPUT,
            help="Write the result table (raw numbers) as CSV to FILE.",
        ),
    ] = None,
    export_markdown: Annotated[
        Path | None,
        typer.Option(
            "--export-markdown",
            metavar="FILE",
            rich_help_panel=OUTPUT,
            help="Write the result table as markdown to FILE.",
        ),
    ] = None,
    fmt: Annotated[
        str,
        typer.Option(
            "--format",
            metavar="FORMAT",
            rich_help_panel=OUTPUT,
            help="table, json, jsonl, csv or markdown on stdout (other text on stderr).",
        ),
    ] = "table",
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", metavar="", rich_help_panel=OUTPUT, help="No progress bar.")
    ] = False,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", metavar="", rich_help_panel=OUTPUT, help="Tracebacks on errors.")
    ] = False,
    shape: Annotated[
        list[str] | None,
        typer.Option(
            metavar="NAME=DIMS",
            rich_help_panel=ONNX,
            help="NAME=1x3x224x224, or DIM=N for a dynamic dimension (repeatable).",
        ),
    ] = None,
    input: Annotated[
        list[str] | None,
        typer.Option(metavar="NAME=FILE", rich_help_panel=ONNX, help="NAME=file.npy real input data (repeatable)."),
    ] = None,
    io_binding: Annotated[
        bool,
        typer.Option(
            "--io-binding",
            metavar="",
            rich_help_panel=ONNX,
            help="Bind inputs/outputs once, on the EP's device where possible.",
        ),
    ] = False,
    prepare: Annotated[
        bool,
        typer.Option(
            "--prepare",
            metavar="",
            rich_help_panel=ONNX,
            help="Load an ahead-of-time prepared model (`winml bundle prepare`).",
        ),
    ] = False,
    intra_op_threads: Annotated[
        int | None, typer.Option(metavar="N", rich_help_panel=ONNX, help="Session intra-op threads.")
    ] = None,
    inter_op_threads: Annotated[
        int | None, typer.Option(metavar="N", rich_help_panel=ONNX, help="Session inter-op threads.")
    ] = None,
    graph_optimization_level: Annotated[
        str | None, typer.Option(metavar="LEVEL", rich_help_panel=ONNX, help="disable, basic, extended, layout or all.")
    ] = None,
    session_config: Annotated[
        list[str] | None,
        typer.Option(metavar="KEY=VALUE", rich_help_panel=ONNX, help="Session config entry (repeatable)."),
    ] = None,
) -> None:
    """Benchmark token throughput and latency of a bundle (or the latency of an ONNX model)."""
    from winml_perf.commands.duration_flag import sustained_policy
    from winml_perf.commands.sweep_values import sweep_values
    from winml_perf.measure.orchestrate import PerfRequest, run_benchmark
    from winml_perf.publish.formats import check_format

    check_format(fmt)
    chosen = runtime_named(runtime) if runtime else runtime_for_path(bundle)
    _check_runtime_flags(
        chosen,
        {
            "--stages": bool(stages),
            "--ep-option": bool(ep_option),
            "--compile": compile,
            "--prompt": prompt is not None,
            "--prompt-tokens": bool(prompt_tokens),
            "--apply-template": apply_template,
            "--duration": duration is not None,
            "--shape": bool(shape),
            "--input": bool(input),
            "--io-binding": io_binding,
            "--prepare": prepare,
        },
    )
    if no_recompile and not (compile or prepare):
        raise UsageError(
            "--no-recompile applies with --compile (a bundle) or --prepare (an .onnx model)",
            "add --compile or --prepare, or drop --no-recompile",
        )
    onnx_options = {}
    if not chosen.token_based:
        if not bundle.exists():
            raise UsageError(f"model {bundle} does not exist", "pass the path of an .onnx file")
        from winml_perf.session.onnx_options import options_from_flags

        onnx_options = options_from_flags(
            ep=ep,
            device=device,
            shape=shape,
            input=input,
            io_binding=io_binding,
            intra_op_threads=intra_op_threads,
            inter_op_threads=inter_op_threads,
            graph_optimization_level=graph_optimization_level,
            session_config=session_config,
            seed=seed,
        )
    elif any(v is not None for v in (intra_op_threads, inter_op_threads, graph_optimization_level)) or session_config:
        raise UsageError(
            "--intra-op-threads/--inter-op-threads/--graph-optimization-level/--session-config apply to --runtime winml",
            "for bundles, set session_options in genai_config.json",
        )
    _check_sweep_size(
        len(route or ()) or 1,
        sweep_values(prompt_tokens, "--prompt-tokens") if prompt_tokens else (),
        sweep_values(max_new_tokens, "--max-new-tokens") if max_new_tokens else (),
        large_sweep,
    )
    request = PerfRequest(
        path=bundle,
        runtime=chosen.name,
        routes=_routes(route or [], ep, device, stages),
        ep_libraries=tuple(ep_library or ()),
        ep_options=tuple(sorted(parse_options(ep_option or ()).items())),
        compile=compile,
        compile_timeout_s=compile_timeout,
        verify_sources=verify_sources,
        prompt=prompt,
        apply_template=apply_template,
        prompt_tokens=sweep_values(prompt_tokens, "--prompt-tokens") if prompt_tokens else None,
        max_new_tokens=sweep_values(max_new_tokens or [str(DEFAULTS.max_new_tokens)], "--max-new-tokens"),
        warmup=_warmup(warmup),
        iterations=_iterations(
            iterations, target_ci, min_iterations, max_iterations, max_time, invocations, max_invocations
        )
        if duration is None
        else sustained_policy(duration, target_ci, invocations),
        rounds=_positive(rounds, "--rounds") if rounds is not None else None,
        isolate=True if isolate is None and duration is not None else isolate,  # RSS over time: the session's alone
        cell_timeout_s=cell_timeout,
        seed=seed,
        quiet=quiet or not sys.stderr.isatty(),
        store=store,
        no_store=no_store,
        check_outputs=check_outputs,
        equivalence=equivalence,
        reference_bundle=_reference_bundle(reference_bundle, equivalence, chosen.token_based, bundle),
        perplexity=_perplexity_text(perplexity, perplexity_text, perplexity_chunk, chosen.token_based),
        perplexity_chunk=perplexity_chunk,
        reference_route=_reference_route(
            reference, _routes(route or [], ep, device, stages), reference_bundle, equivalence, chosen.token_based
        ),
        strict=strict,
        allow_uncompiled=allow_uncompiled,
        no_recompile=no_recompile,
        onnx_options=onnx_options,
        prepare_model=prepare,
        explain=explain,
        series=_series_label(series),
    )
    if request.iterations.multi_invocation and isolate is False:
        raise UsageError(
            "--no-isolate cannot run several invocations: each invocation is a fresh process",
            "drop --no-isolate, or pass --invocations 1",
        )
    if store and no_store:
        raise UsageError("--store and --no-store both given", "pass one of them")
    exports = _exports(output, export_json, export_jsonl, export_csv, export_markdown)
    for flag, (path, _) in exports.items():
        check_output(path, flag)  # before minutes of measuring, not after
    outcome = run_benchmark(request, argv=sys.argv[1:])
    run: RunRecord = outcome.run
    for flag, (path, export_fmt) in exports.items():
        write_output(path, run_export(run, export_fmt), flag)
    if outcome.interrupted is not None:
        raise RunInterrupted(outcome.interrupted, _kept(outcome, run, [str(p) for p, _ in exports.values()]))
    doc = run.to_dict()  # the closing summary and --explain read the record's JSON document
    _print_run(run, doc, fmt)
    if verbose or check_outputs:
        _print_texts(doc, sys.stdout if fmt == "table" else sys.stderr)
    if explain:
        from winml_perf.explain.text import run_explain_text

        print(run_explain_text(doc), end="", file=sys.stdout if fmt == "table" else sys.stderr)
    sys.stdout.flush()  # the results first: a block-buffered stdout would put the next line inside them
    if outcome.store is not None and not outcome.store_errors:
        print(fill(f"stored {len(run.cells)} record(s) in {outcome.store} (run {run.run_id})"), file=sys.stderr)
    if outcome.store_errors:
        kept = [str(p) for p, f in exports.values() if f == "json"]
        kept += [str(p) for p in [_save_unstored(outcome, run)] if p]
        raise StoreError(
            f"{len(outcome.store_errors)} record(s) could not be stored in {outcome.store}: "
            + "; ".join(outcome.store_errors[:3]),
            f"the run record is kept in {' and '.join(kept)} (`winml results import` reads it)"
            if kept
            else "the run record is complete in the output above; rerun with -o FILE to keep it",
        )
    failed = [c for c in run.cells if not c.ok]
    if failed:
        raise BenchmarkFailure(
            f"{len(failed)} of {len(run.cells)} cells failed: "
            + "; ".join(f"{c.cell_key}: {c.failure.message if c.failure else '?'}" for c in failed[:3])
        )


def _exports(
    output: Path | None, json_: Path | None, jsonl: Path | None, csv: Path | None, markdown: Path | None
) -> dict[str, tuple[Path, str]]:
    """Every file to write, by its flag, with its exporter (publish/exporters): -o takes the run
    record (json), --export-FORMAT the exporter FORMAT."""
    from winml_perf.publish.exporters import run_formats
    from winml_perf.publish.formats import check_format

    flags = {"--export-json": json_, "--export-jsonl": jsonl, "--export-csv": csv, "--export-markdown": markdown}
    given = {"-o": (output, "json")}
    for flag, path in flags.items():
        given[flag] = (path, check_format(flag.removeprefix("--export-"), run_formats(), flag))
    out = {flag: (path, f) for flag, (path, f) in given.items() if path is not None}
    paths = [str(path) for path, _ in out.values()]
    dup = sorted({p for p in paths if paths.count(p) > 1})
    if dup:
        raise UsageError(f"{', '.join(dup)} is named by several of {', '.join(out)}", "give each export its own file")
    return out


def _print_run(run: RunRecord, doc: dict, fmt: str) -> None:
    """The run on stdout in ``fmt``; for formats other than table, warnings and the summary go to
    stderr so stdout stays machine-readable. ``doc``: the run's JSON document (the summary's input)."""
    from winml_perf.compare.run_summary import route_verdicts, summarize_routes, summary_lines
    from winml_perf.publish.render import render_run

    report = summarize_routes(doc)
    summary = summary_lines(report, route_verdicts(doc)) if report is not None and report.rows else []
    if fmt == "table":
        print(render_run(run))
        if summary:
            print("\n".join(["", *(fill(line) for line in summary)]))
        return
    sys.stdout.write(run_text(run, fmt))
    sys.stdout.flush()
    print(fill(render_run(run, warnings_only=True)), file=sys.stderr, end="")
    for line in summary:
        print(fill(line), file=sys.stderr)


def _printable(text: str) -> str:
    """Generated text without terminal control codes (a model can emit ESC or BEL): shown escaped."""
    return "".join(c if c in "\n\t" or (c.isprintable() and c != "\x1b") else repr(c)[1:-1] for c in text)


def _print_texts(doc: dict, stream) -> None:
    """What each route generated from a text prompt (--verbose, --check-outputs), one block per cell."""
    for cell in doc.get("cells", []):
        text = (cell.get("output") or {}).get("text")
        if text:
            label = f"{cell['route']['label']} p{cell['shape']['prompt_tokens']} n{cell['shape']['max_new_tokens']}"
            print(f"\n{label} generated:\n  " + _printable(text).replace("\n", "\n  "), file=stream)


def run_export(run: RunRecord, fmt: str) -> str:
    """The run as exporter ``fmt`` writes it (`--export-FORMAT`, -o)."""
    from winml_perf.publish.exporters import get

    write = get(fmt).run_text
    assert write is not None, f"exporter {fmt} has no run text"  # _exports takes run formats only
    return write(run)


def run_text(run: RunRecord, fmt: str) -> str:
    from winml_perf.publish.render import run_text as text

    return text(run, fmt)


def _reference_route(
    label: str | None, routes, reference_bundle: Path | None, equivalence: bool | None, token_based: bool
) -> str | None:
    """--reference ROUTE: one of the run's --route labels (the check on); else exit 2 naming them."""
    from winml_perf.measure.orchestrate import parse_route

    if label is None:
        return None
    if reference_bundle is not None or equivalence is False or not token_based:
        raise UsageError(
            "--reference cannot be combined with --reference-bundle, --no-equivalence or --runtime winml",
            "keep --reference alone, with a genai bundle",
        )
    labels = [r.label for r in routes]
    wanted = parse_route(label).label if label.strip() else label
    if wanted not in labels:
        raise UsageError(
            f"--reference {label}: not one of this run's routes ({', '.join(labels)})",
            "pass one of them, e.g. --route config --route ep=cpu --reference ep=cpu",
        )
    return wanted


def _series_label(name: str | None) -> str | None:
    """--series NAME: a readable name of 1-200 characters, not blank and on one line."""
    if name is None:
        return None
    text = name.strip()
    if not text or len(text) > 200 or any(ch in text for ch in "\r\n\t"):
        raise UsageError(
            f"--series {name!r} is not a series name", "give a short name on one line, e.g. --series qwen2.5-0.5b-int4"
        )
    return text


def _perplexity_text(asked: bool, text: Path | None, chunk: int, token_based: bool) -> Path | None:
    """--perplexity / --perplexity-text FILE: the text to score (the packaged one without FILE), readable
    UTF-8; None when neither was given; else exit 2."""
    from winml_perf.measure.perplexity import DEFAULT_CHUNK, DEFAULT_TEXT

    if not asked and text is None:
        if chunk != DEFAULT_CHUNK:
            raise UsageError("--perplexity-chunk needs --perplexity", "add --perplexity, or drop --perplexity-chunk")
        return None
    if not token_based:
        raise UsageError("--perplexity needs a genai bundle (its tokenizer)", "drop --perplexity, or --runtime winml")
    path = text if text is not None else DEFAULT_TEXT
    try:
        content = path.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(
            f"--perplexity-text {path}: cannot read it as UTF-8 text: {exc}", "pass a UTF-8 text file"
        ) from exc
    if not content.strip():
        raise UsageError(f"--perplexity-text {path}: the file is empty", "pass a text of a few thousand tokens")
    return path


def _reference_bundle(path: Path | None, equivalence: bool | None, token_based: bool, bundle: Path) -> Path | None:
    """--reference-bundle: a genai bundle folder, with the equivalence check on; else exit 2."""
    if path is None:
        return None
    if equivalence is False or not token_based:
        raise UsageError(
            "--reference-bundle needs the equivalence check of a genai bundle",
            "drop --no-equivalence (or --runtime winml), or drop --reference-bundle",
        )
    if not (path / "genai_config.json").is_file():
        raise UsageError(
            f"--reference-bundle {path}: no genai_config.json there", "pass a bundle folder with the same tokenizer"
        )
    _check_same_vocabulary(bundle, path)
    return path


def _check_same_vocabulary(bundle: Path, reference: Path | None) -> None:
    """--reference-bundle must speak the bundle's language: the same vocabulary size and tokenizer,
    else its token ids mean other words and no comparison of logits is a judgement (exit 2, naming both)."""
    if reference is None or not (bundle / "genai_config.json").is_file():
        return
    from winml_perf.support.json_input import read_json

    def vocab(folder: Path) -> object:
        config = read_json(folder / "genai_config.json", UsageError)
        return ((config or {}).get("model") or {}).get("vocab_size") if isinstance(config, dict) else None

    def tokenizer(folder: Path) -> object:
        path = folder / "tokenizer.json"
        if not path.is_file():
            return None
        doc = read_json(path, UsageError)
        return (doc.get("model"), doc.get("added_tokens")) if isinstance(doc, dict) else doc

    mine, theirs = vocab(bundle), vocab(reference)
    if mine != theirs:
        raise UsageError(
            f"--reference-bundle {reference} has vocab_size {theirs}, but {bundle} has {mine}: "
            "their token ids mean different words",
            "pass a reference bundle of the same model family (same tokenizer and vocabulary)",
        )
    if tokenizer(bundle) != tokenizer(reference):
        raise UsageError(
            f"--reference-bundle {reference} has another tokenizer than {bundle} (tokenizer.json differs)",
            "pass a reference bundle with the same tokenizer",
        )
