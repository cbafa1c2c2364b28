"""The judge phase of `winml perf`: what judges the prepared routes before the sweep. A bundle's routes:
their outputs checked (``--check-outputs``, equivalence/greedy.py), each judged against a reference
(equivalence, on with 2+ routes or a reference) and its perplexity (``--perplexity``); a plain ONNX
model's: every route's outputs against the reference route's (equivalence/onnx_outputs.py)."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from winml_perf.measure.request import PerfRequest
    from winml_perf.model.spec import RouteSpec


def judged_routes(req: PerfRequest, routes: list[RouteSpec]) -> list[RouteSpec]:
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


def _with_output_checks(req: PerfRequest, routes: list[RouteSpec]) -> list[RouteSpec]:
    from winml_perf.equivalence.greedy import check_routes

    checks = check_routes(str(req.path), routes, seed=req.seed)
    return [
        replace(r, route=replace(r.recorded_route, output_check=checks[r.label])) if r.label in checks else r
        for r in routes
    ]
