"""The judge phase of `winml perf`: what judges the prepared routes before the sweep. A bundle's routes:
their outputs checked (``--check-outputs``, equivalence/greedy.py), each judged against a reference
(equivalence, on with 2+ routes or a reference) and its perplexity (``--perplexity``); a plain ONNX
model's: every route's outputs against the reference route's (equivalence/onnx_outputs.py)."""

from __future__ import annotations

import sys
from dataclasses import replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from winml_perf.measure.request import PerfRequest
    from winml_perf.model.spec import RouteSpec


def judged_routes(req: PerfRequest, routes: list[RouteSpec]) -> list[RouteSpec]:
    """The prepared routes with what judges them before the sweep: output checks, equivalence and
    perplexity (a bundle), or every route's outputs against the reference route's (a plain model)."""
    if req.token_based:
        return _bundle_checks(req, routes)
    # a plain ONNX model: every route's outputs against the reference route's (equivalence/onnx_outputs.py)
    from winml_perf.equivalence.attach import attach_outputs, wants_equivalence

    if wants_equivalence(req.equivalence, len(routes), None):
        routes = attach_outputs(routes, str(req.path), req.onnx_options)
    return routes


def _bundle_checks(req: PerfRequest, routes: list[RouteSpec]) -> list[RouteSpec]:
    """A bundle's routes with their output checks, equivalence and perplexity, each asked for; the
    source bundle's config, session and check prompt, and the reference, made once for all of them
    (equivalence/check.py)."""
    from winml_perf.equivalence.attach import attach_equivalence, attach_perplexity, wants_equivalence
    from winml_perf.equivalence.check import check_source

    equivalence = wants_equivalence(req.equivalence, len(routes), req.reference_bundle or req.reference_route)
    if not (req.check_outputs or equivalence or req.perplexity is not None):
        return routes
    ref = str(req.reference_bundle) if req.reference_bundle else None
    source = check_source(req.path, req.seed, routes=routes, reference_bundle=ref, reference_route=req.reference_route)
    if req.check_outputs:
        from winml_perf.equivalence.greedy import check_routes

        checks = check_routes(source, routes)
        if not checks:  # asked for, so not passed over in silence
            print(
                "note: --check-outputs: every route runs the bundle's own files (the config route, or a forced "
                "route that moved nothing, such as ep=cpu on a CPU bundle), so there was nothing to check; "
                "force a stage onto another EP to check its outputs, e.g. --route ep=NAME",
                file=sys.stderr,
            )
        routes = [
            replace(r, route=replace(r.recorded_route, output_check=checks[r.label])) if r.label in checks else r
            for r in routes
        ]
    if equivalence:
        routes = attach_equivalence(source, routes, cache=req.equivalence_cache)
    if req.perplexity is not None:
        routes = attach_perplexity(source, routes, req.perplexity, req.perplexity_chunk)
    return routes
