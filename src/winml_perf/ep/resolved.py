"""One route, resolved once: what ``--ep/--device/--stages`` or one ``--route`` spec asks, settled on this
machine into a frozen ResolvedRoute that preparing and the record's route.target read instead of resolving again.

``resolve_route`` is the only place a perf route's request becomes a target: the EP name is normalised
there (once), ``--ep-option`` is merged with the route's own options there (``route_options``, the one
merge), and whether the route is forced is a property of the value it returns.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, NamedTuple

from winml_perf.ep.devices import Target, target_for
from winml_perf.ep.effective import device_from_options
from winml_perf.ep.plugins import PluginsHere
from winml_perf.ep.route_flags import FLAGS, ROUTE_SPEC, RouteFlags
from winml_perf.ep.route_request import RouteRequest
from winml_perf.ep.table import ep_alias, is_known_ep, normalize_ep_name, valid_names_text
from winml_perf.model.runtime import Runtime
from winml_perf.support.errors import UsageError

Pairs = tuple[tuple[str, str], ...]
EP_OPTION = "--ep-option"


class Option(NamedTuple):
    """One provider option a route hands its EP, and where it came from."""

    ep: str | None  # canonical EP of a per-stage route's option; None: the route's one EP
    key: str
    value: str
    source: str  # '--ep-option' or "--route 'LABEL'"


@dataclass(frozen=True)
class ResolvedRoute:
    """A route settled on this machine: one target (``target``) or, for a per-stage route, one target a
    stage (``stage_targets``); the provider options asked of it, each with where it came from."""

    label: str
    target: Target | None  # None: a per-stage route (see stage_targets)
    stages: tuple[str, ...] = ()  # the stages a forced route moves; () = all
    asked: tuple[Option, ...] = ()  # --ep-option under the route's own options (route_options)
    stage_targets: tuple[tuple[str, Target], ...] = ()  # per-stage route: stage -> its Target
    own_options: Pairs = ()  # the route's own options, as written (what tells two routes apart)
    compile: bool = False
    flags: RouteFlags = FLAGS  # which flags asked (a --route spec: its parts are named in messages too)

    @property
    def per_stage(self) -> bool:
        return bool(self.stage_targets)

    @property
    def forced(self) -> bool:
        """Whether the route moves a stage off the bundle's config (it then runs from a derived folder)."""
        return self.per_stage or (self.target is not None and self.target.kind != "config")

    @property
    def ep(self) -> str | None:
        return self.target.ep if self.target is not None else None

    @cached_property
    def options_dict(self) -> dict[str, str]:
        """The route's options for its one EP."""
        return {o.key: o.value for o in self.asked if o.ep is None}

    @cached_property
    def per_ep_options(self) -> dict[str, dict[str, str]]:
        """A per-stage route's options, by canonical EP."""
        out: dict[str, dict[str, str]] = {}
        for o in self.asked:
            if o.ep is not None:
                out.setdefault(o.ep, {})[o.key] = o.value
        return out

    @cached_property
    def targets(self) -> dict[str, Target]:
        """A per-stage route's stage -> its Target."""
        return dict(self.stage_targets)

    @property
    def key(self) -> tuple[Any, ...]:
        """What makes two routes the same placement (``ep=cpu`` and ``ep=CPU`` are one route)."""
        if self.per_stage:
            ran = tuple(sorted((stage, t.ep or "") for stage, t in self.stage_targets))
            return ("stages", ran, tuple(sorted(self.own_options)))
        assert self.target is not None
        if self.target.kind == "config":
            return ("config",)
        return (self.target.ep, self.target.device, tuple(sorted(self.stages)), tuple(sorted(self.own_options)))

    @cached_property
    def target_dict(self) -> dict[str, Any]:
        """What the record's route.target holds of the request (the prepared route adds its own facts)."""
        if self.per_stage:
            return {
                "kind": "stages",
                "label": self.label,
                "stages": {stage: t.ep for stage, t in self.stage_targets},
                "ep_options": {ep_alias(ep): o for ep, o in self.per_ep_options.items()},
            }
        assert self.target is not None
        return {**self.target.to_dict(), "ep_options": dict(self.options_dict)}


def route_options(
    route: RouteRequest, shared: Sequence[tuple[str, str]], route_eps: set[str] | None = None
) -> tuple[Option, ...]:
    """The one ``--ep-option`` merge: ``shared`` (``--ep-option``) under the route's own options.

    A per-stage route (``route_eps``: the canonical EPs its stages take) takes ``EP:KEY=VALUE`` pairs:
    one without ``EP:`` cannot say which EP it is for (exit 2), and a shared one for an EP the route
    does not take stays with the run's other routes."""
    merged: dict[tuple[str | None, str], Option] = {}
    for where, pairs in ((EP_OPTION, shared), (f"--route {route.label!r}", route.options)):
        for key, value in pairs:
            if route_eps is None:
                merged[(None, key)] = Option(None, key, value, where)
                continue
            ep = _option_ep(route, where, key, value)
            if where != EP_OPTION or ep in route_eps:
                name = key.partition(":")[2]
                merged[(ep, name)] = Option(ep, name, value, where)
    return tuple(merged.values())


def _option_ep(route: RouteRequest, where: str, key: str, value: str) -> str:
    """The canonical EP of a per-stage route's ``EP:KEY`` option; exit 2 when it names none or no known one."""
    ep, sep, name = key.partition(":")
    if not sep or not name:
        raise UsageError(
            f"{where} {key}={value}: route {route.label} is a per-stage route, so an option must say its EP",
            f"write it EP:KEY=VALUE, e.g. qnn:{key}={value}",
        )
    if not is_known_ep(ep):
        raise UsageError(f"{where} {key}={value}: {ep!r} is not a known EP", f"use one of {valid_names_text()}")
    return normalize_ep_name(ep)


def per_stage_options(
    route: RouteRequest, ep_options: Sequence[tuple[str, str]], route_eps: set[str]
) -> dict[str, dict[str, str]]:
    """A per-stage route's options by canonical EP (``route_options`` decides them)."""
    return ResolvedRoute(route.label, None, asked=route_options(route, ep_options, route_eps)).per_ep_options


def per_stage_eps(route: RouteRequest) -> dict[str, str]:
    """Stage -> the canonical EP it takes (named once here); an EP name that is not one exits 2 naming the route."""
    for stage, ep in route.assign:
        if not is_known_ep(ep):
            raise UsageError(
                f"--route {route.label!r}: {ep!r} (stage {stage}) is not a known execution provider",
                f"use one of {valid_names_text()}",
            )
    return {stage: normalize_ep_name(ep) for stage, ep in route.assign}


def per_stage_targets(route: RouteRequest, runtime: Runtime, stage_eps: dict[str, str]) -> dict[str, Target]:
    """Stage -> its Target (EPUnavailableError naming what is here when a stage's EP is not);
    ``stage_eps``: each stage's canonical EP (``per_stage_eps``)."""
    return {stage: target_for(ep, None, runtime, canonical=stage_eps[stage]) for stage, ep in route.assign}


def resolve_route(
    route: RouteRequest, rt: Runtime, ep_options: Sequence[tuple[str, str]] = (), compile: bool = False
) -> ResolvedRoute:
    """``route`` settled here, once: its provider options (``ep_options``, ``--ep-option``, under its
    own), then its target (EPUnavailableError naming what is here when its EP is not) and its stages."""
    if (route.assign or route.stages) and not rt.token_based:
        raise UsageError("--stages applies to genai bundles only", "drop --stages with --runtime winml")
    stage_eps = per_stage_eps(route) if route.assign else None
    asked = route_options(route, ep_options, set(stage_eps.values()) if stage_eps is not None else None)
    if stage_eps is not None:
        return ResolvedRoute(
            route.label,
            None,
            asked=asked,
            stage_targets=tuple(per_stage_targets(route, rt, stage_eps).items()),
            own_options=route.options,
            compile=compile,
        )
    options = {o.key: o.value for o in asked}
    canonical = normalize_ep_name(route.ep, route.flag("ep")) if route.ep else None  # the one normalisation
    device = route.device
    if rt.token_based and route.ep:  # device_type=CPU in the options pins the cpu device
        device = device_from_options(canonical or route.ep, route.device, options)
    flags = ROUTE_SPEC if route.spec is not None else FLAGS
    target = target_for(route.ep, device, rt, canonical=canonical, flags=flags)
    if route.stages and target.kind == "config":
        raise UsageError("--stages needs a forced route", "add --ep NAME or --device CLASS")
    return ResolvedRoute(
        route.label,
        target,
        stages=route.stages,
        asked=asked,
        own_options=route.options,
        compile=compile,
        flags=flags,
    )


def resolve_routes(
    routes: Sequence[RouteRequest],
    runtime: Runtime,
    ep_options: Sequence[tuple[str, str]] = (),
    compile: bool = False,
) -> tuple[ResolvedRoute, ...]:
    """Every route of a run, resolved once each; two that are the same placement exit 2 naming both."""
    resolved = tuple(resolve_route(r, runtime, ep_options, compile) for r in routes)
    seen: dict[tuple[Any, ...], ResolvedRoute] = {}
    for r in resolved:
        if r.key in seen:
            raise UsageError(
                f"--route {seen[r.key].label} and --route {r.label} are the same route", "list each route once"
            )
        seen[r.key] = r
    return resolved


@dataclass(frozen=True)
class ResolvedRequest:
    """A run's routes, each resolved once, with the plugin EPs registered for them (ep/plugins.py
    PluginsHere: ``EP=LIBRARY`` each, what registering took, what each library is) and the runtime
    they run on."""

    routes: tuple[ResolvedRoute, ...]
    runtime: Runtime
    plugins: PluginsHere = PluginsHere()


def resolve_request(
    routes: Sequence[RouteRequest],
    runtime: Runtime,
    ep_options: Sequence[tuple[str, str]] = (),
    compile: bool = False,
    ep_libraries: Sequence[str] = (),
) -> ResolvedRequest:
    """Register the ``--ep-library`` plugins and say what each is (ep/plugins.py ``plugins_here``),
    then resolve every route once (exit 2 for two that are one route, an EP that is not here, options
    that do not fit)."""
    from winml_perf.ep.plugins import plugins_here

    plugins = plugins_here(ep_libraries)
    return ResolvedRequest(resolve_routes(routes, runtime, ep_options, compile), runtime, plugins)
