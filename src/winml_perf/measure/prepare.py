"""The prepare phase of `winml perf`: every resolved route (ep/resolved.py) made ready to load, as a RouteSpec.

``prepared_routes`` holds the artifact cache the run loads from (bundle/cache.py, shared: `bundle clean`
waits for the run), once, prepares every route under that hold and keeps it until the run is done.
A bundle's routes are prepared by measure/genai_route.py (each by bundle/prepare.py: its derived
bundle, compile and placement; those that run exactly the bundle's config measured once); a plain
ONNX model's inputs are checked once here, then its routes prepared by measure/onnx_route.py.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from winml_perf.bundle import cache
from winml_perf.model.spec import RouteSpec

if TYPE_CHECKING:
    from winml_perf.bundle.config import ConfigBook
    from winml_perf.ep.resolved import ResolvedRequest
    from winml_perf.measure.request import PerfRequest


@contextlib.contextmanager
def prepared_routes(
    req: PerfRequest, resolved: ResolvedRequest, configs: ConfigBook | None = None
) -> Iterator[list[RouteSpec]]:
    """Every route of ``resolved`` prepared for ``req``'s bundle or model while the artifact cache some
    route loads from is held, and held until the caller's block ends (its measuring): one hold a run.
    ``configs``: the genai configs the run has read (the bundle's, then each derived one's, read once);
    each derived bundle is keyed under the plugin identities the resolution took (``resolved.plugins``)."""
    source = _loaded_from(req, resolved)
    with cache.holding(source) if source is not None else contextlib.nullcontext():
        if not resolved.runtime.token_based:
            from winml_perf.measure.onnx_route import onnx_routes
            from winml_perf.session.onnx_session import preflight

            preflight(req.path, req.onnx_options)  # --input, --shape, session options: checked once for every route
            yield onnx_routes(req, resolved)
            return
        from winml_perf.bundle.config import ConfigBook
        from winml_perf.bundle.prepare import RunHoldings
        from winml_perf.measure.genai_route import genai_routes

        # the routes are prepared under this hold: bundle/prepare.py takes none of its own
        book = configs if configs is not None else ConfigBook()
        yield genai_routes(req, resolved, RunHoldings(book, resolved.plugins.identities))


def _loaded_from(req: PerfRequest, resolved: ResolvedRequest) -> Path | None:
    """The folder whose artifact cache some route loads from (a forced genai route, or any with
    ``--compile``: the bundle; a prepared ONNX model, ``--prepare``: its folder); None when every route
    loads the source itself."""
    if resolved.runtime.token_based:
        return Path(req.path) if req.compile or any(r.forced for r in resolved.routes) else None
    return Path(req.path).resolve().parent if req.prepare_model else None


def prepare_request(req: PerfRequest, configs: ConfigBook | None = None) -> list[RouteSpec]:
    """``req``'s routes resolved (ep/resolved.py), then prepared (``prepared_routes``): for a caller
    that prepares without measuring (tune/prune.py)."""
    from winml_perf.ep.resolved import resolve_request

    resolved = resolve_request(req.routes, req.runtime_value, req.ep_options, req.compile, req.ep_libraries)
    with prepared_routes(req, resolved, configs) as routes:
        return routes
