"""A bundle's routes, each prepared from its resolved value (ep/resolved.py) as a RouteSpec: its derived
bundle, compile and placement by bundle/prepare.py, the compile's gate (``--compile``), ``--strict``, and
what the record's route.target holds. Routes that run exactly the bundle's config are then measured
once (``measured_once``)."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from winml_perf.ep.devices import emulated_among
from winml_perf.model.runtime import GENAI
from winml_perf.model.spec import RouteSpec
from winml_perf.support.text_table import say

if TYPE_CHECKING:
    from winml_perf.bundle.prepare import RunHoldings
    from winml_perf.ep.resolved import ResolvedRequest, ResolvedRoute
    from winml_perf.measure.request import PerfRequest


def genai_routes(req: PerfRequest, resolved: ResolvedRequest, holdings: RunHoldings) -> list[RouteSpec]:
    """Every route of ``resolved`` prepared for ``req``'s bundle (``holdings``: the run's genai configs,
    each read once, and its plugin EPs' identities) under the caller's hold on its artifact cache, those
    that run as the config measured once."""
    specs, plugin_ms = resolved.plugins.specs, resolved.plugins.ms
    return measured_once([genai_route(req, r, specs, plugin_ms, holdings) for r in resolved.routes])


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


def genai_route(
    req: PerfRequest,
    route: ResolvedRoute,
    plugin_specs: tuple[str, ...],
    plugin_ms: float,
    holdings: RunHoldings | None = None,
) -> RouteSpec:
    """A bundle's route, prepared from its resolved value (``holdings``: the run's genai configs, each
    read once, and its plugin EPs' identities) under the caller's hold on its artifact cache (measure/prepare.py)."""
    from winml_perf.bundle.prepare import Compiling, PerStage, RunHoldings, prepare_route

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
        holdings=replace(holdings or RunHoldings(), flags=route.flags),
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
        emulated=emulated_among(s.ep_after for s in prepared.stages),
    )
    return RouteSpec.from_route(prepared, str(req.path), GENAI.name, plugin_specs)
