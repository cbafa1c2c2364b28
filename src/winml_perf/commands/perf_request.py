"""`winml perf`'s flag groups -> one PerfRequest, every refusal (exit 2) before any work.

The checks run in the order the flags' messages have always come in: format, runtime, flags of
the other runtime, plain-ONNX options, the sweep's size, routes, policies, the equivalence
reference, the series name, then the combinations that only the whole request shows.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from winml_perf.commands.perf_flags import (
    JudgeFlags,
    MeasurementFlags,
    OnnxFlags,
    OutputFlags,
    RoutingFlags,
    WorkloadFlags,
)
from winml_perf.ep.options import parse_options
from winml_perf.model.defaults import DEFAULTS
from winml_perf.model.policy_flags import iteration_policy, positive, warmup_policy
from winml_perf.model.runtime import Runtime, check_runtime_flags, runtime_for_path, runtime_named
from winml_perf.model.spec import IterationPolicy, WarmupPolicy, check_sweep_size
from winml_perf.support.errors import UsageError

if TYPE_CHECKING:
    from winml_perf.ep.route_request import RouteRequest
    from winml_perf.measure.orchestrate import PerfRequest


def perf_request(
    bundle: Path,
    routing: RoutingFlags,
    workload: WorkloadFlags,
    judge: JudgeFlags,
    measurement: MeasurementFlags,
    out: OutputFlags,
    onnx: OnnxFlags,
    typed: Callable[[str], bool] = lambda _name: False,
) -> PerfRequest:
    """The request the flags ask for; exit 2 at the first flag (or pair of flags) that cannot be.
    ``typed``: whether a flag parameter was written on the command line (not left at its default)."""
    from winml_perf.commands.sweep_values import sweep_values
    from winml_perf.ep.route_request import route_requests
    from winml_perf.measure.orchestrate import PerfRequest
    from winml_perf.publish.formats import Offer, check_format

    check_format(Offer.ROWS, out.fmt)
    chosen = runtime_named(routing.runtime) if routing.runtime else runtime_for_path(bundle)
    check_runtime_flags(chosen, _given(routing, workload, measurement, onnx))
    if routing.no_recompile and not (routing.compile or onnx.prepare):
        raise UsageError(
            "--no-recompile applies with --compile (a bundle) or --prepare (an .onnx model)",
            "add --compile or --prepare, or drop --no-recompile",
        )
    onnx_options = _onnx_options(bundle, chosen, routing, workload.seed, onnx)
    prompts = sweep_values(workload.prompt_tokens, "--prompt-tokens") if workload.prompt_tokens else ()
    news = sweep_values(workload.max_new_tokens, "--max-new-tokens") if workload.max_new_tokens else ()
    check_sweep_size(len(routing.route or ()) or 1, prompts, news, out.large_sweep)
    routes = route_requests(routing.route or [], routing.ep, routing.device, routing.stages)
    ep_options = tuple(sorted(parse_options(routing.ep_option or ()).items()))
    warmup, iterations = _policies(measurement, typed)
    request = PerfRequest(
        path=bundle,
        runtime=chosen.name,
        routes=routes,
        ep_libraries=tuple(routing.ep_library or ()),
        ep_options=ep_options,
        compile=routing.compile,
        compile_timeout_s=routing.compile_timeout,
        verify_sources=routing.verify_sources,
        prompt=workload.prompt,
        apply_template=workload.apply_template,
        prompt_tokens=prompts if workload.prompt_tokens else None,
        max_new_tokens=news or sweep_values([str(DEFAULTS.max_new_tokens)], "--max-new-tokens"),
        warmup=warmup,
        iterations=iterations,
        rounds=positive(measurement.rounds, "--rounds") if measurement.rounds is not None else None,
        # RSS over time: the session's alone
        isolate=True if measurement.isolate is None and measurement.duration is not None else measurement.isolate,
        cell_timeout_s=measurement.cell_timeout,
        seed=workload.seed,
        quiet=out.quiet or not sys.stderr.isatty(),
        store=out.store,
        no_store=out.no_store,
        check_outputs=judge.check_outputs,
        strict=routing.strict,
        allow_uncompiled=routing.allow_uncompiled,
        no_recompile=routing.no_recompile,
        onnx_options=onnx_options,
        prepare_model=onnx.prepare,
        explain=measurement.explain,
        **_judging(judge, bundle, chosen, routes),
        series=series_label(out.series),
    )
    _check_whole(request, measurement, out)
    return request


def _given(
    routing: RoutingFlags, workload: WorkloadFlags, measurement: MeasurementFlags, onnx: OnnxFlags
) -> dict[str, bool]:
    """Which of the flags that belong to one runtime were given."""
    return {
        "--stages": bool(routing.stages),
        "--ep-option": bool(routing.ep_option),
        "--compile": routing.compile,
        "--prompt": workload.prompt is not None,
        "--prompt-tokens": bool(workload.prompt_tokens),
        "--max-new-tokens": bool(workload.max_new_tokens),
        "--apply-template": workload.apply_template,
        "--duration": measurement.duration is not None,
        "--shape": bool(onnx.shape),
        "--input": bool(onnx.input),
        "--io-binding": onnx.io_binding,
        "--prepare": onnx.prepare,
    }


def _onnx_options(bundle: Path, chosen: Runtime, routing: RoutingFlags, seed: int, onnx: OnnxFlags) -> dict[str, Any]:
    """A plain ONNX model's session options; a bundle's are its genai_config.json's (exit 2 if given)."""
    session_flags = (onnx.intra_op_threads, onnx.inter_op_threads, onnx.graph_optimization_level)
    if chosen.token_based:
        if any(v is not None for v in session_flags) or onnx.session_config:
            raise UsageError(
                "--intra-op-threads/--inter-op-threads/--graph-optimization-level/--session-config apply to --runtime winml",
                "for bundles, set session_options in genai_config.json",
            )
        return {}
    if not bundle.exists():
        raise UsageError(f"model {bundle} does not exist", "pass the path of an .onnx file")
    from winml_perf.session.onnx_options import options_from_flags

    return options_from_flags(
        ep=routing.ep,
        device=routing.device,
        shape=onnx.shape,
        input=onnx.input,
        io_binding=onnx.io_binding,
        intra_op_threads=onnx.intra_op_threads,
        inter_op_threads=onnx.inter_op_threads,
        graph_optimization_level=onnx.graph_optimization_level,
        session_config=onnx.session_config,
        seed=seed,
    )


#: Flags an adaptive run (--target-ci) reads and no other: given without it they would be ignored.
ADAPTIVE_ONLY = {
    "--min-iterations": "min_iterations",
    "--max-iterations": "max_iterations",
    "--max-time": "max_time",
    "--max-invocations": "max_invocations",
}


def _refuse_ignored(m: MeasurementFlags, typed: Callable[[str], bool]) -> None:
    """Exit 2 for a measurement flag the chosen policy would not read: --iterations (a fixed count)
    beside --duration or --target-ci, an adaptive run's bound without --target-ci. ``typed``: whether
    a flag parameter was written on the command line rather than left at its default."""
    if m.duration is not None and typed("iterations"):
        raise UsageError(
            "--iterations sets a fixed count, which --duration replaces (it generates until its duration has passed)",
            "drop --iterations",
        )
    if m.target_ci is not None and typed("iterations"):
        raise UsageError(
            "--iterations sets a fixed count, which --target-ci replaces (it measures until its interval is reached)",
            "drop --iterations, or bound the adaptive run with --min-iterations / --max-iterations",
        )
    unread = [flag for flag, name in ADAPTIVE_ONLY.items() if typed(name)]
    if m.target_ci is None and unread:
        raise UsageError(
            f"{', '.join(unread)} given without --target-ci: they bound only an adaptive run, which --target-ci starts",
            "drop them (a --duration run stops at its duration)"
            if m.duration is not None
            else "add --target-ci PCT (e.g. --target-ci 2%), or drop them",
        )


def _policies(m: MeasurementFlags, typed: Callable[[str], bool]) -> tuple[WarmupPolicy, IterationPolicy]:
    """--warmup, and the iterations: fixed, adaptive (--target-ci) or sustained (--duration)."""
    from winml_perf.commands.duration_flag import sustained_policy

    _refuse_ignored(m, typed)
    warmup = warmup_policy(m.warmup)
    if m.duration is not None:
        return warmup, sustained_policy(m.duration, m.target_ci, m.invocations)
    iterations = iteration_policy(
        m.iterations, m.target_ci, m.min_iterations, m.max_iterations, m.max_time, m.invocations, m.max_invocations
    )
    return warmup, iterations


def _judging(judge: JudgeFlags, bundle: Path, chosen: Runtime, routes: tuple[RouteRequest, ...]) -> dict[str, Any]:
    """The request's equivalence and perplexity fields: what each route is judged against, and on what text."""
    from winml_perf.equivalence.perplexity import text_to_score
    from winml_perf.measure.validate import reference_bundle

    return {
        "equivalence": judge.equivalence,
        "equivalence_cache": not judge.no_equivalence_cache,
        "reference_bundle": reference_bundle(judge.reference_bundle, judge.equivalence, chosen.token_based, bundle),
        "perplexity": text_to_score(
            judge.perplexity, judge.perplexity_text, judge.perplexity_chunk, chosen.token_based
        ),
        "perplexity_chunk": judge.perplexity_chunk,
        "reference_route": _reference_route(judge, routes, chosen.token_based),
    }


def _reference_route(judge: JudgeFlags, routes: tuple[RouteRequest, ...], token_based: bool) -> str | None:
    """--reference ROUTE: one of the run's --route labels (the check on); else exit 2 naming them."""
    from winml_perf.ep.route_request import reference_label

    if judge.reference is None:
        return None
    if judge.reference_bundle is not None or judge.equivalence is False or not token_based:
        raise UsageError(
            "--reference cannot be combined with --reference-bundle, --no-equivalence or --runtime winml",
            "keep --reference alone, with a genai bundle",
        )
    return reference_label(judge.reference, routes)


def series_label(name: str | None) -> str | None:
    """--series NAME: a readable name of 1-200 characters, not blank and on one line."""
    if name is None:
        return None
    text = name.strip()
    if not text or len(text) > 200 or any(ch in text for ch in "\r\n\t"):
        raise UsageError(
            f"--series {name!r} is not a series name", "give a short name on one line, e.g. --series qwen2.5-0.5b-int4"
        )
    return text


def _check_whole(request: PerfRequest, measurement: MeasurementFlags, out: OutputFlags) -> None:
    """The pairs of flags that only the built request shows to clash."""
    if request.iterations.multi_invocation and measurement.isolate is False:
        raise UsageError(
            "--no-isolate cannot run several invocations: each invocation is a fresh process",
            "drop --no-isolate, or pass --invocations 1",
        )
    if out.store and out.no_store:
        raise UsageError("--store and --no-store both given", "pass one of them")
