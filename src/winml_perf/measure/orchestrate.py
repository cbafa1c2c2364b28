"""run_benchmark(request): wires plugins -> resolve -> prepare -> sweep -> store. Nothing else.

Every route of one invocation is resolved and prepared before anything is measured, so a bad
route is an exit-2 error before minutes of measuring, and the routes then run interleaved.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from winml_perf.bundle import cache
from winml_perf.ep.route_request import RouteRequest as RouteRequest
from winml_perf.ep.route_request import parse_route as parse_route
from winml_perf.measure.validate import validate_request
from winml_perf.model.defaults import DEFAULTS
from winml_perf.model.route import MODEL, Route, StageRoute
from winml_perf.model.runtime import GENAI, ONNX, runtime_named
from winml_perf.model.spec import IterationPolicy, PromptSpec, RouteSpec, WarmupPolicy, expand_sweep
from winml_perf.support.errors import StoreError, UsageError
from winml_perf.support.text_table import say

if TYPE_CHECKING:
    from winml_perf.bundle.config import ConfigBook
    from winml_perf.ep.resolved import ResolvedRoute

DEFAULT_PROMPT_TOKENS = DEFAULTS.prompt_tokens


@dataclass(frozen=True)
class PerfRequest:
    path: Path
    runtime: str = GENAI.name
    routes: tuple[RouteRequest, ...] = (RouteRequest(),)
    ep_libraries: tuple[str, ...] = ()
    ep_options: tuple[tuple[str, str], ...] = ()  # --ep-option, under each route's own options
    compile: bool = False
    compile_timeout_s: float = DEFAULTS.compile_timeout_s
    verify_sources: bool = False
    prompt: str | None = None
    apply_template: bool = False
    prompt_tokens: tuple[int, ...] | None = None
    max_new_tokens: tuple[int, ...] = (32,)
    warmup: WarmupPolicy = WarmupPolicy()
    iterations: IterationPolicy = IterationPolicy(iterations=5)
    rounds: int | None = None
    isolate: bool | None = None
    cell_timeout_s: float | None = None
    seed: int = 0
    quiet: bool = False
    store: str | None = None
    no_store: bool = False
    check_outputs: bool = False
    equivalence: bool | None = None  # teacher-forced equivalence; None: on with 2+ routes or a reference bundle
    equivalence_cache: bool = True  # reuse verdicts judged before on the same content (equivalence/verdict_cache.py)
    reference_bundle: Path | None = None  # --reference-bundle: judge every route against this bundle
    reference_route: str | None = None  # --reference ROUTE: judge every other route against this one of the run's
    perplexity: Path | None = None  # --perplexity: each route's perplexity over this text (equivalence/perplexity.py)
    perplexity_chunk: int = 512  # --perplexity-chunk N: tokens per chunk
    strict: bool = False
    allow_uncompiled: bool = False  # --compile: measure a failed compile's route, labelled (uncompiled)
    no_recompile: bool = False  # --compile / --prepare: use what was prepared or refuse (exit 2); never compile here
    onnx_options: dict = field(default_factory=dict)
    prepare_model: bool = False
    explain: bool = False
    series: str | None = None  # --series NAME: the series the records belong to, in place of the bundle's path

    @cached_property
    def token_based(self) -> bool:
        """A genai bundle (token-based), not a plain ONNX model: the runtime named once a request."""
        return runtime_named(self.runtime).token_based


def _plugin_specs(registrations) -> tuple[str, ...]:
    return tuple(f"{r.ep_name}={r.library_path}" for r in registrations)


def _genai_route(
    req: PerfRequest,
    route: ResolvedRoute,
    plugin_specs: tuple[str, ...],
    plugin_ms: float,
    configs: ConfigBook | None = None,
) -> RouteSpec:
    """A bundle's route, prepared from its resolved value (``configs``: the run's genai configs, each read once)."""
    from winml_perf.bundle.prepare import Compiling, PerStage, prepare_route

    per_stage = PerStage(route.label, route.targets(), route.per_ep_options()) if route.per_stage else None
    prepared = prepare_route(
        req.path,
        route.target,
        list(route.stages) or None,
        compile=Compiling(req.compile_timeout_s, no_recompile=req.no_recompile) if req.compile else None,
        verify_sources=req.verify_sources,
        label=route.label,
        ep_options=None if route.per_stage else route.options_dict(),
        per_stage=per_stage,
        configs=configs,
    )
    if req.compile:
        from winml_perf.bundle.epcontext.gate import settle_compile

        prepared = settle_compile(prepared, req.allow_uncompiled)
    if req.strict:
        from winml_perf.bundle.placement import enforce_strict

        enforce_strict(prepared)
    prepared = replace(
        prepared,
        target={**route.target_dict(), **(prepared.target or {})},  # + the decided options
        plugin_registration_ms=plugin_ms,
        emulated=_emulated(s.ep_after for s in prepared.stages),
    )
    return RouteSpec.from_route(prepared, str(req.path), GENAI.name, plugin_specs)


def _onnx_route(req: PerfRequest, route: ResolvedRoute, plugin_specs: tuple[str, ...], plugin_ms: float) -> RouteSpec:
    from winml_perf.bundle.onnx_placement import model_placement
    from winml_perf.bundle.onnx_prepare import EpSettings, OnnxBuild, prepare_onnx
    from winml_perf.ep.effective import plain_provider_options
    from winml_perf.model.spec import SessionSpec
    from winml_perf.session.onnx_session import preflight

    target = route.target
    assert target is not None and target.ep is not None  # runtime winml has no config route nor per-stage one
    decided, provider_options = plain_provider_options(target, route.options_dict())
    options = {
        **req.onnx_options,
        "ep": target.requested_ep,
        "device": target.requested_device,
        "provider_options": provider_options,
    }
    preflight(req.path, options)
    path, prepared, prepare_ms = req.path, None, None
    if req.prepare_model:
        prepared = prepare_onnx(
            req.path,
            target,
            options["graph_optimization_level"],
            ep_settings=EpSettings(provider_options, options.get("session_config") or {}),
            build=OnnxBuild(no_recompile=req.no_recompile),
            plugin_libraries=list(plugin_specs),
        )
        options |= prepared.session_options()
        path, prepare_ms = prepared.path, prepared.prepare_ms
    placement = model_placement(
        req.path,
        target.ep,
        provider_options,
        options.get("session_config") or {},
        options.get("graph_optimization_level"),
    )
    stage = StageRoute("model", (req.path.name,), None, target.ep, forced=True, placement=placement)
    recorded = Route(
        route.label,
        route.label,
        target.label,
        (stage,),
        MODEL,
        target={**target.to_dict(), "ep_options": provider_options, "options": decided.to_dict()},
        plugin_registration_ms=plugin_ms,
        prepared=prepared.to_dict() if prepared else None,
        emulated=_emulated([target.ep]),
    )
    if req.strict:
        from winml_perf.bundle.placement import enforce_strict

        enforce_strict(recorded)
    return RouteSpec(
        route.label, SessionSpec(ONNX.name, str(path), plugin_specs, options), recorded, str(req.path), prepare_ms, None
    )


def _emulated(route_eps) -> tuple[str, ...]:
    """The route's EPs that offer only an emulator here (QNN's HTP emulator on x86)."""
    from winml_perf.ep.devices import emulated_eps
    from winml_perf.ep.table import CPU_EP

    wanted = {e for e in route_eps if e}
    if not wanted - {CPU_EP}:
        return ()
    return tuple(e for e in emulated_eps() if e in wanted)


@dataclass(frozen=True)
class ResolvedRequest:
    """A run's routes, each resolved once (ep/resolved.py), with the plugin EPs registered for them."""

    routes: tuple[ResolvedRoute, ...]
    plugin_specs: tuple[str, ...] = ()
    plugin_ms: float = 0.0


def resolve_request(req: PerfRequest) -> ResolvedRequest:
    """Register ``--ep-library`` plugins, then resolve every route of ``req`` once (exit 2 for two that
    are one route, an EP that is not here, options that do not fit)."""
    from winml_perf.ep.plugins import register_plugin_eps
    from winml_perf.ep.resolved import resolve_routes

    t0 = time.perf_counter()
    registrations = register_plugin_eps(list(req.ep_libraries))
    plugin_ms = round((time.perf_counter() - t0) * 1000.0, 3)
    routes = resolve_routes(req.routes, req.runtime, req.ep_options, req.compile)
    return ResolvedRequest(routes, _plugin_specs(registrations), plugin_ms)


def prepare_routes(
    req: PerfRequest, configs: ConfigBook | None = None, resolved: ResolvedRequest | None = None
) -> list[RouteSpec]:
    """Every route of ``req`` prepared from its resolved value (``resolved``, else resolved here);
    ``configs``: the genai configs the run has read (the bundle's, then each derived one's, read once)."""
    resolved = resolved if resolved is not None else resolve_request(req)
    specs, plugin_ms = resolved.plugin_specs, resolved.plugin_ms
    if not req.token_based:
        return measured_once([_onnx_route(req, r, specs, plugin_ms) for r in resolved.routes])
    if configs is None:
        from winml_perf.bundle.config import ConfigBook

        configs = ConfigBook()
    return measured_once([_genai_route(req, r, specs, plugin_ms, configs) for r in resolved.routes])


def measured_once(routes: list[RouteSpec]) -> list[RouteSpec]:
    """Routes that run exactly the config (the config route, and forced routes that moved no stage,
    changed no option and compiled nothing) are measured once: as the config route when it was asked
    (else as the first of them), which records the other labels as its aliases; a note says so."""

    same = [r for r in routes if r.recorded_route.runs_as_config]
    if len(same) < 2:
        return routes
    kept = next((r for r in same if r.recorded_route.requested == "config"), same[0])
    aliases = tuple(r.label for r in same if r is not kept)
    for alias in aliases:
        say(f"note: {alias} is the {kept.label} route on this bundle: measured once, shown as {kept.label}")
    merged = replace(kept, route=replace(kept.recorded_route, aliases=aliases))
    dropped = {id(r) for r in same if r is not kept}
    return [merged if r is kept else r for r in routes if id(r) not in dropped]


def _cells(req: PerfRequest, routes: Sequence[RouteSpec]):
    if not req.token_based:
        return expand_sweep(
            routes, None, None, warmup=req.warmup, iterations=req.iterations, cell_timeout_s=req.cell_timeout_s
        )
    prompt_tokens = req.prompt_tokens
    if req.prompt is None and prompt_tokens is None:
        prompt_tokens = (DEFAULT_PROMPT_TOKENS,)
    prompt = PromptSpec(req.prompt, req.apply_template, req.seed)
    return expand_sweep(
        routes,
        prompt_tokens,
        req.max_new_tokens,
        prompt=prompt,
        warmup=req.warmup,
        iterations=req.iterations,
        cell_timeout_s=req.cell_timeout_s,
    )


@dataclass
class BenchmarkOutcome:
    run: Any  # RunRecord (of the finished cells only when interrupted)
    store: str | None = None  # where the records went (None with --no-store)
    store_errors: list = field(default_factory=list)  # cells that could not be stored, with why
    interrupted: int | None = None  # the signal that stopped the sweep
    unstored_path: Path | None = None  # where the run record goes when cells could not be stored


def run_benchmark(
    req: PerfRequest, argv: Sequence[str] | None = None, on_cell: Callable[[Any], None] | None = None
) -> BenchmarkOutcome:
    """Resolve and prepare every route, measure the sweep, store each cell as it finishes.

    A cell that cannot be stored (a dropped database connection, say) does not stop the sweep: the
    error is kept in the outcome and the caller reports it once the run record is safe elsewhere.
    While a route measures from a derived folder the cache root is held (shared): `bundle clean`
    waits for the run instead of removing the folder under it."""
    from winml_perf.bundle.config import ConfigBook

    configs = ConfigBook()  # every genai config the run reads, read once and handed down
    if req.token_based:
        req = at_static_prompt(configs.of(req.path), req)  # bundle errors (exit 2) before anything else happens
    validate_request(req, (DEFAULT_PROMPT_TOKENS,))  # flag values the bundle or machine cannot take: exit 2 now
    _require_modules(req)
    resolved = resolve_request(req)  # every route resolved once, before anything is prepared
    source = derived_from(req, resolved.routes)
    with (
        cache.holding(source) if source is not None else contextlib.nullcontext(),  # no `bundle clean` under the run
        configs.reading(),  # equivalence and perplexity read the configs the run has read
    ):
        return _prepare_and_measure(req, argv, on_cell, configs, resolved)


def derived_from(req: PerfRequest, routes: Sequence[ResolvedRoute]) -> Path | None:
    """The folder whose artifact cache some route of ``req`` loads from (a forced genai route, a
    prepared ONNX model); None when every route loads the source itself."""
    if req.token_based:
        return Path(req.path) if any(r.forced for r in routes) else None
    return Path(req.path).resolve().parent if req.prepare_model else None


def _prepare_and_measure(
    req: PerfRequest,
    argv: Sequence[str] | None,
    on_cell: Callable[[Any], None] | None,
    configs: ConfigBook,
    resolved: ResolvedRequest,
) -> BenchmarkOutcome:
    from winml_perf.measure.progress import make_progress
    from winml_perf.measure.sweep import CellExtras, RunFacts, SweepInterrupted, run_sweep
    from winml_perf.results.location import unstored_path
    from winml_perf.results.locking import StoreLockTimeout

    routes = prepare_routes(req, configs, resolved)
    routes = _judged(req, routes)
    cells = _cells(req, routes)
    store = None
    if not req.no_store:
        from winml_perf.record.validation import prepare_checks
        from winml_perf.results.store import open_store

        store = open_store(req.store)
        prepare_checks()  # before measuring: a fixed cost the records' check would pay after the last iteration

    outcome = BenchmarkOutcome(
        run=None,
        store=store.display if store is not None else None,
        unstored_path=unstored_path(store.location) if store is not None else None,
    )
    lock_timed_out: list[str] = []

    def on_cell_done(record) -> None:
        if store is not None and lock_timed_out:  # one wait to the deadline is enough
            outcome.store_errors.append(f"{record.cell_key}: not tried ({lock_timed_out[0]})")
        elif store is not None:
            try:
                store.write_record(record)
            except StoreError as exc:
                outcome.store_errors.append(f"{record.cell_key}: {exc}")
                if isinstance(exc, StoreLockTimeout):
                    lock_timed_out.append(str(exc))
        if on_cell is not None:
            on_cell(record)

    try:
        outcome.run = run_sweep(
            cells,
            rounds=req.rounds,
            seed=req.seed,
            isolate=req.isolate,
            on_cell_done=on_cell_done,
            progress=make_progress(req.quiet),
            facts=RunFacts(argv=argv, series_label=req.series),
            extras=CellExtras(explain=req.explain, configs=configs),
        )
    except SweepInterrupted as exc:
        outcome.run, outcome.interrupted = exc.run, exc.signum
    finally:
        if store is not None:
            store.close()
    return outcome


def _judged(req: PerfRequest, routes: list[RouteSpec]) -> list[RouteSpec]:
    """The prepared routes with what judges them before the sweep: output checks, equivalence and
    perplexity (a bundle), or every route's outputs against the reference route's (a plain model)."""
    if req.check_outputs and req.token_based:
        routes = _with_output_checks(req, routes)
    if req.token_based:
        from winml_perf.equivalence.attach import attach_equivalence, wants_equivalence

        if wants_equivalence(req.equivalence, len(routes), req.reference_bundle or req.reference_route):
            ref = str(req.reference_bundle) if req.reference_bundle else None
            routes = attach_equivalence(
                str(req.path), routes, req.seed, ref, req.reference_route, req.equivalence_cache
            )
        if req.perplexity is not None:
            from winml_perf.equivalence.attach import attach_perplexity

            ref = str(req.reference_bundle) if req.reference_bundle else None
            routes = attach_perplexity(
                str(req.path), routes, req.perplexity, req.perplexity_chunk, ref, req.reference_route
            )
    else:  # a plain ONNX model: every route's outputs against the reference route's (equivalence/onnx_outputs.py)
        from winml_perf.equivalence.attach import attach_outputs, wants_equivalence

        if wants_equivalence(req.equivalence, len(routes), None):
            routes = attach_outputs(routes, str(req.path), req.onnx_options)
    return routes


def at_static_prompt(config, req: PerfRequest) -> PerfRequest:
    """A bundle with a static prompt length S is measured at S when no --prompt-tokens is given
    (a note on stderr says so), and takes only --prompt-tokens S when one is."""
    static = config.static_prompt_length()
    if static is None or req.prompt is not None:
        return req
    stage, length = static
    if req.prompt_tokens is None:
        say(
            f"note: stage `{stage}` of {req.path} has a static prompt length of {length} tokens: measuring at"
            f" --prompt-tokens {length}"
        )
        return replace(req, prompt_tokens=(length,))
    wrong = [n for n in req.prompt_tokens if n != length]
    if wrong:
        raise UsageError(
            f"--prompt-tokens {','.join(map(str, wrong))}: stage `{stage}` of {req.path} has a static prompt length of {length} tokens",
            f"pass --prompt-tokens {length}, or leave it out",
        )
    return req


def _require_modules(req: PerfRequest) -> None:
    """Before anything is prepared: the optional modules this run's features import (exit 2 naming pip)."""
    from winml_perf.equivalence.attach import wants_equivalence
    from winml_perf.support.optional import require

    if req.token_based and wants_equivalence(
        req.equivalence, len(req.routes), req.reference_bundle or req.reference_route
    ):
        require("the equivalence check (on with 2+ routes or a reference; --no-equivalence turns it off)", "onnx")


def _with_output_checks(req: PerfRequest, routes: list[RouteSpec]) -> list[RouteSpec]:
    from winml_perf.equivalence.greedy import check_routes

    checks = check_routes(str(req.path), routes, seed=req.seed)
    return [
        replace(r, route=replace(r.recorded_route, output_check=checks[r.label])) if r.label in checks else r
        for r in routes
    ]
