"""A plain ONNX model's routes, each prepared from its resolved value (ep/resolved.py) as a RouteSpec:
the provider options decided (ep/effective.py), the prepared model with ``--prepare``
(bundle/onnx_prepare.py), the placement (bundle/onnx_placement.py) and ``--strict``. The model's
inputs are checked once a run before (measure/prepare.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from winml_perf.ep.devices import emulated_among
from winml_perf.model.route import MODEL, Route, StageRoute
from winml_perf.model.runtime import ONNX
from winml_perf.model.spec import RouteSpec, SessionSpec

if TYPE_CHECKING:
    from winml_perf.ep.resolved import ResolvedRequest, ResolvedRoute
    from winml_perf.measure.request import PerfRequest


def onnx_routes(req: PerfRequest, resolved: ResolvedRequest) -> list[RouteSpec]:
    """Every route of ``resolved`` prepared for ``req``'s model (none runs a config: each is measured)."""
    return [onnx_route(req, r, resolved.plugins.specs, resolved.plugins.ms) for r in resolved.routes]


def onnx_route(req: PerfRequest, route: ResolvedRoute, plugin_specs: tuple[str, ...], plugin_ms: float) -> RouteSpec:
    from winml_perf.bundle.onnx_placement import model_placement
    from winml_perf.bundle.onnx_prepare import EpSettings, OnnxBuild, prepare_onnx
    from winml_perf.ep.effective import plain_provider_options

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
        emulated=emulated_among([target.ep]),
    )
    if req.strict:
        from winml_perf.bundle.placement import enforce_strict

        enforce_strict(recorded)
    return RouteSpec(
        route.label, SessionSpec(ONNX.name, str(path), plugin_specs, options), recorded, str(req.path), prepare_ms, None
    )
