"""prepare_route: config + target -> the folder to load, wiring config, routing, derive and compile.

At route ``config`` nothing is written and ``path`` is the bundle itself; the stages' EPs are checked
against this machine first (``require_available``) so a missing EP is a clear error, not a genai
load failure. Every forced route is derived (and compiled with ``compile``) under ``_compiled/``, so its config
names every stage's EP explicitly; one that moves no stage is still reported as route ``config``,
with a warning, since it runs exactly what the bundle's config runs. A derived route also carries
where each stage's nodes are placed (bundle/placement.py, kept in the derived bundle's
placement.json, so a cache hit reads it instead of opening sessions).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from winml_perf.bundle import compile as compiler
from winml_perf.bundle.config import load_config
from winml_perf.bundle.derive import derive_bundle
from winml_perf.bundle.placement import derived_placement
from winml_perf.bundle.routing import CPU, RoutePlan, check_available, plan_route


@dataclass(frozen=True)
class PreparedRoute:
    path: Path  # folder to load
    route: str  # effective: "config" or e.g. "ep=cpu"
    stages: list = field(default_factory=list)  # dicts: stage, files, ep_before, ep_after (+ details)
    derived_path: Path | None = None
    cache: str | None = None  # "hit" | "miss" | None
    cache_reason: str | None = None
    prepare_ms: float = 0.0
    compile_ms: float = 0.0
    warnings: list = field(default_factory=list)
    requested: str = "config"
    compile: list = field(default_factory=list)  # per compile job / stage outcome dicts
    placement: tuple = ()  # placement.StagePlacement per stage (forced routes; see bundle/placement.py)
    placement_cache: str | None = None  # "hit" | "miss" | None
    placement_reason: str | None = None
    placement_ms: float | None = None

    def stage_dicts(self) -> list[dict]:
        """The stages, each with its ``placement`` (when measured) and ``ep_actual`` when every node
        ran on one EP other than ``ep_after``."""
        by_stage = {p.stage: p for p in self.placement}
        out = []
        for s in self.stages:
            d, p = dict(s), by_stage.get(s["stage"])
            if p is not None:
                d["placement"] = p.to_dict()
                if p.ep_actual:
                    d["ep_actual"] = p.ep_actual
            out.append(d)
        return out

    def to_dict(self) -> dict:
        return {
            "path": str(self.path),
            "route": self.route,
            "requested": self.requested,
            "stages": self.stage_dicts(),
            "derived_path": str(self.derived_path) if self.derived_path else None,
            "cache": self.cache,
            "cache_reason": self.cache_reason,
            "prepare_ms": self.prepare_ms,
            "compile_ms": self.compile_ms,
            "warnings": list(self.warnings),
            "compile": [dict(c) for c in self.compile],
            "placement_cache": self.placement_cache,
            "placement_reason": self.placement_reason,
            "placement_ms": self.placement_ms,
        }


def available_eps() -> set[str]:
    """Canonical names of the EPs this process can use (plugins registered first)."""
    from winml_perf import devices, plugins

    plugins.register_plugin_eps()
    return set(devices.available_eps())


def plan_for(bundle: Path, target, stages: list[str] | None = None) -> RoutePlan:
    """Load and validate the bundle's config, then plan the route (no writes, no EP checks)."""
    return plan_route(load_config(Path(bundle)), target, stages)


def prepare_route(
    bundle: Path,
    target,
    stages: list[str] | None = None,
    compile: bool = False,
    verify_sources: bool = False,
    *,
    require_available: bool = True,
    compile_timeout_s: float = 600.0,
) -> PreparedRoute:
    """The folder to load for ``target`` (a devices.Target); see the module doc.

    ``require_available=False`` (used by ``winml bundle prepare``) derives without checking that the
    stages' EPs exist here; the derived bundle can then be carried to a machine that has them.
    """
    t0 = time.perf_counter()
    bundle = Path(bundle)
    plan = plan_for(bundle, target, stages)
    if require_available and any(s.ep_after != CPU for s in plan.stages):  # CPU is always here: no device query
        check_available(plan, available_eps())
    stage_dicts = [s.to_dict() for s in plan.stages]
    if not plan.forced:
        return PreparedRoute(bundle, "config", stage_dicts, None, None, None, _ms(t0), 0.0, list(plan.warnings), plan.requested)
    jobs, notes = compiler.compile_jobs(plan) if compile else ([], [])
    result = derive_bundle(plan, verify_sources=verify_sources, compile=bool(jobs), compile_timeout_s=compile_timeout_s)
    placed = derived_placement(result.path, result.key)  # placement.json: a cache hit costs a file read
    return PreparedRoute(
        path=result.path,
        route=plan.requested if jobs else plan.route,
        stages=stage_dicts,
        derived_path=result.path,
        cache=result.cache,
        cache_reason=result.reason,
        prepare_ms=_ms(t0),
        compile_ms=result.compile_ms,
        warnings=list(plan.warnings) + list(result.warnings),
        requested=plan.requested,
        compile=list(result.compile) + [n.to_dict() for n in notes],
        placement=placed.stages,
        placement_cache=placed.cache,
        placement_reason=placed.reason,
        placement_ms=placed.placement_ms,
    )


def _ms(t0: float) -> float:
    return round((time.perf_counter() - t0) * 1000.0, 3)
