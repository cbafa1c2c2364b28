"""`winml perf`: parse flags into a PerfRequest, run it, render the run record."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from winml_perf.model.runtime import RUNTIMES, Runtime, runtime_for_path, runtime_named
from winml_perf.errors import BenchmarkFailure, StoreError, UsageError

GENAI_ONLY = ("--stages", "--compile", "--prompt", "--prompt-tokens", "--apply-template")
ONNX_ONLY = ("--shape", "--input", "--io-binding", "--prepare")


def _positive(value: int, flag: str) -> int:
    if value <= 0:
        raise UsageError(f"{flag} must be a positive integer, got {value}", f"pass {flag} 1 or more")
    return value


def _int_list(text: str, flag: str) -> tuple[int, ...]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise UsageError(f"{flag} {text!r} is not a comma-separated list of integers", f"e.g. {flag} 16,128") from None
    if not values:
        raise UsageError(f"{flag} is empty", f"e.g. {flag} 16,128")
    return tuple(_positive(v, flag) for v in values)


def _percent(text: str, flag: str) -> float:
    try:
        value = float(text.strip().rstrip("%"))
    except ValueError:
        raise UsageError(f"{flag} {text!r} is not a percentage", f"e.g. {flag} 1%") from None
    if not value > 0:
        raise UsageError(f"{flag} must be above 0%, got {text}", f"e.g. {flag} 1%")
    return value


def _check_output(path: Path) -> None:
    """-o must name a file in a folder we can create and write, checked before measuring."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"-o {path}: cannot create its folder ({exc.strerror or exc})", "pass -o with a writable path") from None
    if path.is_dir() or not os.access(path.parent, os.W_OK):
        raise UsageError(f"-o {path}: " + ("is a folder" if path.is_dir() else "its folder is not writable"),
                         "pass -o with a writable file path")


def _write_output(path: Path, text: str) -> None:
    """Write the run record whole or not at all (a temporary file renamed over the target)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise UsageError(f"-o {path}: cannot write the run record ({exc.strerror or exc})",
                         "the records are in the results store unless --no-store; pass -o with a writable path") from None


def _warmup(text: str):
    from winml_perf.bench.spec import WarmupPolicy

    if text == "auto":
        return WarmupPolicy(mode="settle", count=1)
    try:
        n = int(text)
    except ValueError:
        raise UsageError(f"--warmup {text!r} is neither a count nor 'auto'", "e.g. --warmup 2 or --warmup auto") from None
    if n < 0:
        raise UsageError(f"--warmup must be 0 or more, got {n}", "pass --warmup 0 or more")
    return WarmupPolicy(mode="count", count=n, max_count=max(n, 20))


def _iterations(iterations: int, target_ci: str | None, min_iterations: int, max_iterations: int, max_time: float):
    from winml_perf.bench.spec import IterationPolicy

    _positive(iterations, "--iterations")
    if target_ci is None:
        return IterationPolicy(iterations=iterations)
    return IterationPolicy.until_ci(_percent(target_ci, "--target-ci"), _positive(min_iterations, "--min-iterations"),
                                    _positive(max_iterations, "--max-iterations"), max_time)


def _routes(route: list[str], ep: str | None, device: str | None, stages: str | None):
    from winml_perf.bench.orchestrate import RouteRequest, parse_route

    stage_list = tuple(s.strip() for s in stages.split(",") if s.strip()) if stages else ()
    if route:
        if ep or device or stages:
            raise UsageError("--route cannot be combined with --ep/--device/--stages", "put each route in its own --route, e.g. --route 'ep=webgpu;stages=context'")
        return tuple(parse_route(r) for r in route)
    return (RouteRequest(ep=ep, device=device, stages=stage_list),)


def _check_runtime_flags(runtime: Runtime, given: dict[str, bool]) -> None:
    wrong = ONNX_ONLY if runtime.token_based else GENAI_ONLY
    bad = [flag for flag in wrong if given.get(flag)]
    if bad:
        other = next(r for r in RUNTIMES.values() if r is not runtime)
        other = f"{other.name} ({other.what})"
        raise UsageError(f"{', '.join(bad)} do not apply to --runtime {runtime}", f"they belong to --runtime {other}")


def perf(
    bundle: Annotated[Path, typer.Argument(help="A bundle folder (genai_config.json) or an .onnx model.")],
    runtime: Annotated[Optional[str], typer.Option(help="winml-genai (bundles) or winml (plain ONNX); default from the path.")] = None,
    ep: Annotated[Optional[str], typer.Option(help="Force every stage onto this EP (name or alias); wins over --device.")] = None,
    device: Annotated[Optional[str], typer.Option(help="config (genai default) | auto | cpu | gpu | npu.")] = None,
    route: Annotated[Optional[list[str]], typer.Option(help="A route to measure (repeatable, interleaved): config, ep=NAME, device=CLASS[;stages=a,b].")] = None,
    stages: Annotated[Optional[str], typer.Option(help="Limit a forced route to these stages (comma list).")] = None,
    ep_library: Annotated[Optional[list[str]], typer.Option(help="Plugin EP library NAME=PATH (repeatable).")] = None,
    compile: Annotated[bool, typer.Option("--compile", help="Compile stages to EPContext where the EP supports it.")] = False,
    compile_timeout: Annotated[float, typer.Option(help="Seconds allowed for each compile.")] = 600.0,
    verify_sources: Annotated[bool, typer.Option("--verify-sources", help="Hash source files' contents for the cache key.")] = False,
    prompt: Annotated[Optional[str], typer.Option(help="Prompt text (default: synthetic tokens).")] = None,
    apply_template: Annotated[bool, typer.Option("--apply-template/--no-apply-template", help="Wrap --prompt in the bundle's chat template.")] = False,
    prompt_tokens: Annotated[Optional[str], typer.Option(help="Prompt length in tokens (comma list sweeps); default 128 synthetic tokens.")] = None,
    max_new_tokens: Annotated[str, typer.Option(help="Tokens generated per iteration (comma list sweeps).")] = "32",
    warmup: Annotated[str, typer.Option(help="Warmup iterations: a count, or 'auto' (until times settle).")] = "1",
    iterations: Annotated[int, typer.Option(help="Measured iterations (fixed).")] = 5,
    target_ci: Annotated[Optional[str], typer.Option(help="Adaptive: run until the 95% CI of the median is within ±X% (e.g. 1%).")] = None,
    min_iterations: Annotated[int, typer.Option(help="Adaptive: at least this many iterations.")] = 6,
    max_iterations: Annotated[int, typer.Option(help="Adaptive: at most this many iterations.")] = 1000,
    max_time: Annotated[float, typer.Option(help="Adaptive: at most this many seconds of measuring per cell.")] = 600.0,
    rounds: Annotated[Optional[int], typer.Option(help="Interleaved rounds per cell group (several routes).")] = None,
    isolate: Annotated[Optional[bool], typer.Option("--isolate/--no-isolate", help="Each route in its own child process (default with several routes).")] = None,
    cell_timeout: Annotated[Optional[float], typer.Option(help="Seconds before an isolated cell is killed as hung.")] = None,
    explain: Annotated[bool, typer.Option("--explain", help="After each cell, profile its route apart (onnxruntime profiler): per-stage and per-operator breakdown, and the difference between routes.")] = False,
    check_outputs: Annotated[bool, typer.Option("--check-outputs", help="Compare forced routes' greedy tokens with the config route.")] = False,
    strict: Annotated[bool, typer.Option("--strict", help="Fail a forced route when any node of a forced stage would run on CPU.")] = False,
    shape: Annotated[Optional[list[str]], typer.Option(help="winml: NAME=1x3x224x224 or DIM=N for dynamic dimensions (repeatable).")] = None,
    input: Annotated[Optional[list[str]], typer.Option(help="winml: NAME=file.npy real input data (repeatable).")] = None,
    io_binding: Annotated[bool, typer.Option("--io-binding", help="winml: bind inputs/outputs once, on the EP's device where possible.")] = False,
    prepare: Annotated[bool, typer.Option("--prepare", help="winml: load an ahead-of-time prepared model (see `winml bundle prepare`).")] = False,
    intra_op_threads: Annotated[Optional[int], typer.Option(help="Session intra-op threads.")] = None,
    inter_op_threads: Annotated[Optional[int], typer.Option(help="Session inter-op threads.")] = None,
    graph_optimization_level: Annotated[Optional[str], typer.Option(help="disable|basic|extended|layout|all.")] = None,
    session_config: Annotated[Optional[list[str]], typer.Option(help="Session config KEY=VALUE (repeatable).")] = None,
    seed: Annotated[int, typer.Option(help="Seed for synthetic prompts and the route order.")] = 0,
    store: Annotated[Optional[str], typer.Option(help="Results store: SQLite path or postgresql:// URL (default results/winml-perf.db, or $WINML_PERF_STORE).")] = None,
    no_store: Annotated[bool, typer.Option("--no-store", help="Do not store the results.")] = False,
    output: Annotated[Optional[Path], typer.Option("-o", "--output", help="Also write the run record (JSON) to this file.")] = None,
    fmt: Annotated[str, typer.Option("--format", help="table or json (JSON on stdout, human text on stderr).")] = "table",
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Tracebacks on errors.")] = False,
) -> None:
    """Benchmark token throughput and latency of a bundle (or the latency of an ONNX model)."""
    from winml_perf.bench.orchestrate import PerfRequest, run_benchmark
    from winml_perf.render import render_run

    if fmt not in ("table", "json"):
        raise UsageError(f"--format {fmt!r} is not one of table, json", "pass --format table or --format json")
    runtime = runtime_named(runtime) if runtime else runtime_for_path(bundle)
    _check_runtime_flags(runtime, {"--stages": bool(stages), "--compile": compile, "--prompt": prompt is not None,
                                   "--prompt-tokens": prompt_tokens is not None, "--apply-template": apply_template,
                                   "--shape": bool(shape), "--input": bool(input), "--io-binding": io_binding, "--prepare": prepare})
    onnx_options = {}
    if not runtime.token_based:
        if not bundle.exists():
            raise UsageError(f"model {bundle} does not exist", "pass the path of an .onnx file")
        from winml_perf.session.onnx_options import options_from_flags

        onnx_options = options_from_flags(ep=ep, device=device, shape=shape, input=input, io_binding=io_binding,
                                          intra_op_threads=intra_op_threads, inter_op_threads=inter_op_threads,
                                          graph_optimization_level=graph_optimization_level, session_config=session_config, seed=seed)
    elif any(v is not None for v in (intra_op_threads, inter_op_threads, graph_optimization_level)) or session_config:
        raise UsageError("--intra-op-threads/--inter-op-threads/--graph-optimization-level/--session-config apply to --runtime winml",
                         "for bundles, set session_options in genai_config.json")
    request = PerfRequest(
        path=bundle, runtime=runtime.name, routes=_routes(route or [], ep, device, stages), ep_libraries=tuple(ep_library or ()),
        compile=compile, compile_timeout_s=compile_timeout, verify_sources=verify_sources, prompt=prompt,
        apply_template=apply_template, prompt_tokens=_int_list(prompt_tokens, "--prompt-tokens") if prompt_tokens else None,
        max_new_tokens=_int_list(max_new_tokens, "--max-new-tokens"), warmup=_warmup(warmup),
        iterations=_iterations(iterations, target_ci, min_iterations, max_iterations, max_time),
        rounds=_positive(rounds, "--rounds") if rounds is not None else None, isolate=isolate, cell_timeout_s=cell_timeout,
        seed=seed, quiet=quiet or not sys.stderr.isatty(), store=store, no_store=no_store, check_outputs=check_outputs,
        strict=strict, onnx_options=onnx_options, prepare_model=prepare, explain=explain,
    )
    if store and no_store:
        raise UsageError("--store and --no-store both given", "pass one of them")
    if output is not None:
        _check_output(output)  # before minutes of measuring, not after
    outcome = run_benchmark(request, argv=sys.argv[1:])
    doc = outcome.run.to_dict()
    if output is not None:
        _write_output(output, json.dumps(doc, indent=2) + "\n")
    if fmt == "json":
        print(json.dumps(doc, indent=2))
        print(render_run(doc, warnings_only=True), file=sys.stderr, end="")
    else:
        print(render_run(doc))
    if explain:
        from winml_perf.explain.text import run_explain_text

        print(run_explain_text(doc), end="", file=sys.stderr if fmt == "json" else sys.stdout)
    if outcome.store is not None and not outcome.store_errors:
        print(f"stored {len(doc['cells'])} record(s) in {outcome.store} (run {doc['run_id']})", file=sys.stderr)
    if outcome.store_errors:
        raise StoreError(f"{len(outcome.store_errors)} record(s) could not be stored in {outcome.store}: "
                         + "; ".join(outcome.store_errors[:3]),
                         "the run record is complete in the output" + (f" and in {output}" if output else "; rerun with -o FILE to keep it"))
    failed = [c for c in doc["cells"] if c["status"] != "ok"]
    if failed:
        raise BenchmarkFailure(f"{len(failed)} of {len(doc['cells'])} cells failed: "
                               + "; ".join(f"{c['cell_key']}: {(c.get('failure') or {}).get('message', '?')}" for c in failed[:3]))
