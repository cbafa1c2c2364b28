"""The prepare phase of `winml perf`: every resolved route (ep/resolved.py) made ready to load, as a RouteSpec.

``prepared_routes`` holds the artifact cache the run loads from (bundle/cache.py, shared: `bundle clean`
waits for the run), once, prepares every route under that hold and keeps it until the run is done.
A bundle's route is prepared by bundle/prepare.py (its derived bundle, compile and placement); a
plain ONNX model's here, from bundle/onnx_prepare.py and bundle/onnx_placement.py. Routes that run
exactly the bundle's config are then measured once (``measured_once``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from winml_perf.bundle import cache
from winml_perf.model.route import MODEL, Route, StageRoute
from winml_perf.model.runtime import GENAI, ONNX
from winml_perf.model.spec import RouteSpec
from winml_perf.support.text_table import say

if TYPE_CHECKING:
    from winml_perf.bundle.config import ConfigBook
    from winml_perf.bundle.prepare import RunHoldings
    from winml_perf.ep.resolved import ResolvedRequest, ResolvedRoute
    from winml_perf.measure.request import PerfRequest


@contextlib.contextmanager
def prepared_routes(req: PerfRequest, resolved: ResolvedRequest, configs: ConfigBook) -> Iterator[list[RouteSpec]]:
    """Every route of ``resolved`` prepared (``prepare_routes``) while the artifact cache some route
    loads from is held, and held until the caller's block ends (its measuring): one hold a run."""
    source = _loaded_from(req, resolved)
    with cache.holding(source) if source is not None else contextlib.nullcontext():
        yield prepare_routes(req, resolved, configs, cache_held=source is not None)


def _loaded_from(req: PerfRequest, resolved: ResolvedRequest) -> Path | None:
    """The folder whose artifact cache some route loads from (a forced genai route, or any with
    ``--compile``: the bundle; a prepared ONNX model, ``--prepare``: its folder); None when every route
    loads the source itself."""
    if resolved.runtime.token_based:
        return Path(req.path) if req.compile or any(r.forced for r in resolved.routes) else None
    return Path(req.path).resolve().parent if req.prepare_model else None


def prepare_routes(
    req: PerfRequest, resolved: ResolvedRequest, configs: ConfigBook | None = None, cache_held: bool = False
) -> list[RouteSpec]:
    """Every route of ``resolved`` prepared for ``req``'s bundle or model; ``configs``: the genai configs
    the run has read (the bundle's, then each derived one's, read once); ``cache_held``: the caller
    holds the bundle's artifact cache (``prepared_routes``), so no route holds it again."""
    specs, plugin_ms = resolved.plugin_specs, resolved.plugin_ms
    if not resolved.runtime.token_based:
        from winml_perf.session.onnx_session import preflight

        preflight(req.path, req.onnx_options)  # --input, --shape, session options: checked once for every route
        return measured_once([_onnx_route(req, r, specs, plugin_ms) for r in resolved.routes])
    from winml_perf.bundle.config import ConfigBook
    from winml_perf.bundle.prepare import RunHoldings

    holdings = RunHoldings(configs if configs is not None else ConfigBook(), cache_held)
    return measured_once([_genai_route(req, r, specs, plugin_ms, holdings) for r in resolved.routes])


def prepare_request(req: PerfRequest, configs: ConfigBook | None = None) -> list[RouteSpec]:
    """``req``'s routes resolved (ep/resolved.py), then prepared: for a caller that prepares without
    measuring (tune/prune.py)."""
    from winml_perf.ep.resolved import resolve_request

    resolved = resolve_request(req.routes, req.runtime_value, req.ep_options, req.compile, req.ep_libraries)
    return prepare_routes(req, resolved, configs)


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


def _genai_route(
    req: PerfRequest,
    route: ResolvedRoute,
    plugin_specs: tuple[str, ...],
    plugin_ms: float,
    holdings: RunHoldings | None = None,
) -> RouteSpec:
    """A bundle's route, prepared from its resolved value (``holdings``: the run's genai configs, each
    read once, and whether it holds the artifact cache)."""
    from winml_perf.bundle.prepare import Compiling, PerStage, prepare_route

    per_stage = PerStage(route.label, route.targets, route.per_ep_options) if route.per_stage else None
    prepared = prepare_route(
        req.path,
        route.target,
        list(route.stages) or None,
        compile=Compiling(req.compile_timeout_s, no_recompile=req.no_recompile) if req.compile else None,
        verify_sources=req.verify_sources,
        label=route.label,
        ep_options=None if route.per_stage else route.options_dict,
        per_stage=per_stage,
        holdings=holdings,
    )
    if req.compile:
        from winml_perf.bundle.epcontext.gate import settle_compile

        prepared = settle_compile(prepared, req.allow_uncompiled)
    if req.strict:
        from winml_perf.bundle.placement import enforce_strict

        enforce_strict(prepared)
    prepared = replace(
        prepared,
        target={**route.target_dict, **(prepared.target or {})},  # what was asked, + the decided options
        plugin_registration_ms=plugin_ms,
        emulated=_emulated(s.ep_after for s in prepared.stages),
    )
    return RouteSpec.from_route(prepared, str(req.path), GENAI.name, plugin_specs)


def _onnx_route(req: PerfRequest, route: ResolvedRoute, plugin_specs: tuple[str, ...], plugin_ms: float) -> RouteSpec:
    from winml_perf.bundle.onnx_placement import model_placement
    from winml_perf.bundle.onnx_prepare import EpSettings, OnnxBuild, prepare_onnx
    from winml_perf.ep.effective import plain_provider_options
    from winml_perf.model.spec import SessionSpec

    target = route.target
    assert target is not None and target.ep is not None  # runtime winml has no config route nor per-stage one
    decided, provider_options = plain_provider_options(target, route.options_dict)
    options = {
        **req.onnx_options,
        "ep": target.requested_ep,
        "device": target.requested_device,
        "provider_options": provider_options,
    }
    level = req.graph_optimization_level  # parsed once, where the request was made
    path, prepared, prepare_ms = req.path, None, None
    if req.prepare_model:
        prepared = prepare_onnx(
            req.path,
            target,
            level,
            ep_settings=EpSettings(provider_options, options.get("session_config") or {}),
            build=OnnxBuild(no_recompile=req.no_recompile),
            plugin_libraries=list(plugin_specs),
        )
        options |= prepared.session_options()
        path, prepare_ms = prepared.path, prepared.prepare_ms
    placement = model_placement(req.path, target.ep, provider_options, options.get("session_config") or {}, level)
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


def _emulated(route_eps: Iterable[str | None]) -> tuple[str, ...]:
    """The route's EPs that offer only an emulator here (QNN's HTP emulator on x86)."""
    from winml_perf.ep.devices import emulated_eps
    from winml_perf.ep.table import CPU_EP

    wanted = {e for e in route_eps if e}
    if not wanted - {CPU_EP}:
        return ()
    return tuple(e for e in emulated_eps() if e in wanted)
