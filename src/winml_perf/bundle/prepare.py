"""prepare_route: config + target -> the Route to load (model/route.py), wiring config, routing, derive and compile.

At route ``config`` nothing is written into the bundle and ``Route.path`` is the bundle itself (its
placement is a placement-only cache artifact; with ``compile`` and a stage to compile, the config
route is derived and compiled like a forced one); the stages' EPs are checked
against this machine first (``require_available``) so a missing EP is a clear error, not a genai
load failure. Every forced route is derived (and compiled with ``compile``) under ``_compiled/``, so its config
names every stage's EP explicitly; one that moves no stage is still reported as route ``config``,
with a warning, since it runs exactly what the bundle's config runs. A derived route also carries
where each stage's nodes are placed (bundle/placement.py, kept in the derived bundle's
placement.json, so a cache hit reads it instead of opening sessions).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from winml_perf.bundle.config import ConfigBook, GenaiConfig, load_config
from winml_perf.bundle.derive import DeriveResult, derive_bundle
from winml_perf.bundle.epcontext import compile as compiler
from winml_perf.bundle.placement import RoutePlacement, derived_placement
from winml_perf.bundle.routing import RoutePlan, check_available, plan_assignment, plan_route
from winml_perf.ep.effective import effective_options
from winml_perf.ep.route_flags import FLAGS, RouteFlags
from winml_perf.model.route import BUNDLE, CPU, CompileOutcome, Route, with_placements

if TYPE_CHECKING:
    from winml_perf.ep.devices import Target


def available_eps() -> set[str]:
    """Canonical names of the EPs this process can use (plugin EPs included: the registry registers them on first ask)."""
    from winml_perf.ep import devices

    return set(devices.available_eps())


def plan_for(
    bundle: Path,
    target: Target | None,
    stages: list[str] | None = None,
    ep_options: dict[str, Any] | None = None,
    per_stage: PerStage | None = None,
    config: GenaiConfig | None = None,
) -> RoutePlan:
    """Load and validate the bundle's config (unless the caller parsed it: ``config``), then plan the
    route over it (``plan_of``) as the plain flags asked it (`winml bundle show`, `export-prepared`)."""
    return plan_of(config if config is not None else load_config(Path(bundle)), target, stages, ep_options, per_stage)


def plan_of(
    config: GenaiConfig,
    target: Target | None,
    stages: list[str] | None = None,
    ep_options: dict[str, Any] | None = None,
    per_stage: PerStage | None = None,
    flags: RouteFlags = FLAGS,
) -> RoutePlan:
    """The route planned over the bundle's parsed ``config`` (no writes, no EP checks); the forced EP's
    options are decided by ep/effective.py against the installed EP version and its names here.
    ``per_stage`` plans a per-stage route instead (``target`` and ``stages`` then unused). ``flags``:
    which flags asked for the route, which its refusals name."""
    if per_stage is not None:
        return plan_assignment(config, per_stage.label, per_stage.targets, per_stage.ep_options, effective_options)
    return plan_route(config, target, stages, ep_options, effective_options, flags=flags)


@dataclass(frozen=True)
class PerStage:
    """A per-stage route as asked: its label, stage -> devices.Target (kind 'ep'), canonical EP -> its options."""

    label: str
    targets: Mapping[str, Any]
    ep_options: Mapping[str, Mapping[str, str]]


@dataclass(frozen=True)
class RunHoldings:
    """What a caller that prepares a run's routes holds and hands each route: the genai configs the run
    has read (`winml perf` reads each bundle's once a run: the bundle's is taken from there, the derived
    bundle's kept there), and what each plugin EP library it registered is, by EP name (ep/plugins.py
    ``plugins_here``: ep/resolved.py's ResolvedRequest.plugins in a run; empty: no plugin EP registered;
    None, for a caller that registered none of its own: derive.py asks each route's EPs), which a
    derived bundle's key holds."""

    configs: ConfigBook = field(default_factory=ConfigBook)
    plugins: Mapping[str, Mapping[str, Any]] | None = None
    flags: RouteFlags = FLAGS  # which flags asked for the route (a --route spec's parts: `winml perf`)


@dataclass(frozen=True)
class Compiling:
    """A route's stages compiled to EPContext (``--compile``), and how: ``timeout_s`` for each compile;
    ``runner`` compiles the jobs (device_free.runner: with no device, and then no placement sessions
    either: the compile's node placement is in prepared.json; default compile.run_jobs);
    ``no_recompile`` refuses to compile (bundle/epcontext/travel.py)."""

    timeout_s: float = 600.0
    runner: Any = None
    no_recompile: bool = False


def prepare_route(
    bundle: Path,
    target: Target | None,
    stages: list[str] | None = None,
    compile: Compiling | None = None,
    verify_sources: bool = False,
    *,
    require_available: bool = True,
    label: str | None = None,
    ep_options: dict[str, Any] | None = None,
    per_stage: PerStage | None = None,
    holdings: RunHoldings | None = None,
) -> Route:
    """The route for ``target`` (a devices.Target), ready to load from ``Route.path``; see the module doc.

    ``compile``: compile the stages that compile, as it says (None: compile nothing). ``label`` names
    the route (default: the target's label). ``require_available=False`` (used by ``winml bundle
    prepare``) derives without checking that the stages' EPs exist here; the derived bundle can then be
    carried to a machine that has them. ``per_stage``: a route that puts each of its stages on its own
    EP (routing.plan_assignment). ``holdings``: what the caller's run holds (its genai configs).

    The caller holds the bundle's artifact cache (bundle/cache.py ``holding``) around this call and for
    as long as it loads from the route, so no `bundle clean` runs between deriving and reading or saving
    the placement (`winml perf`: measure/prepare.py, once a run; `winml bundle prepare` and
    `import-prepared`: once a command).
    """
    t0 = time.perf_counter()
    bundle = Path(bundle)
    holdings = holdings or RunHoldings()
    book = holdings.configs
    plan = plan_of(book.of(bundle), target, stages, ep_options, per_stage, holdings.flags)
    if require_available and any(s.ep_after != CPU for s in plan.stages):  # CPU is always here: no device query
        check_available(plan, available_eps())
    label = label or plan.requested
    jobs, notes = compiler.compile_jobs(plan) if compile is not None else ([], [])
    how = compile or Compiling()  # no compile: no job, so only its runner (None) is read
    runner = how.runner
    result: DeriveResult | None = None  # None: the route runs the bundle itself, nothing derived
    outcomes: tuple[CompileOutcome, ...] = ()
    if not plan.forced and not jobs:
        from winml_perf.bundle.config_placement import config_placement

        placed = config_placement(plan.config)  # the source bundle is never written: a placement-only artifact
    else:
        result = derive_bundle(
            plan,
            plugins=holdings.plugins,
            verify_sources=verify_sources,
            jobs=jobs,
            compile_timeout_s=how.timeout_s,
            runner=runner,
            no_recompile=how.no_recompile,
        )
        if runner is not None:  # device-free: no session may open a device; prepared.json has the placement
            placed = RoutePlacement((), None, "device-free: the compile's node placement is in prepared.json", 0.0)
        else:  # placement.json (a hit costs a file read); the book keeps the derived config for the run
            placed = derived_placement(result.path, result.key, book.of(result.path))
        outcomes = result.compile + tuple(notes)  # each compiled stage's verdict as derive.py found it
    route = Route(
        label,
        plan.requested,
        "config",
        with_placements(plan.stages, placed.stages),
        BUNDLE,
        path=bundle,
        prepare_ms=_ms(t0),
        warnings=plan.warnings,
        placement_cache=placed.cache,
        placement_reason=placed.reason,
        placement_ms=placed.placement_ms,
    )
    if result is None:
        return route
    compiled = any(o.status == "compiled" for o in outcomes)  # a route that compiles its stages changes what runs
    return replace(
        route,
        effective=plan.requested if compiled else plan.route,
        target=_decided(plan),
        path=result.path,
        derived_path=result.path,
        cache=result.cache,
        cache_reason=result.reason,
        compile_ms=result.compile_ms,
        warnings=(() if compiled else plan.warnings) + tuple(result.warnings),
        compile=outcomes,
    )


def _decided(plan: RoutePlan) -> dict[str, Any] | None:
    """The decided options the record keeps: the forced EP's, or each EP's of a per-stage route."""
    if plan.options is not None:
        return {"options": plan.options.to_dict()}
    if plan.options_per_ep:
        return {"options_per_ep": {o.ep: o.to_dict() for o in plan.options_per_ep}}
    return None


def _ms(t0: float) -> float:
    return round((time.perf_counter() - t0) * 1000.0, 3)
