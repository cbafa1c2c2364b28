"""Prepared routes that travel: ``--no-recompile`` (use what was prepared, or say why not).

A derived bundle's key holds the route's options, the plugin EP's identity, the runtime versions and
the identities of the bundle's source files. ``require_fresh`` looks the key up without building:
when no fit derived bundle exists (none was prepared, or the run's options, EP version or sources
differ from what was prepared, or the compiled stage no longer fits the EP here) it refuses with the
cache's own reason, naming ``--no-recompile``, instead of compiling.
"""

from __future__ import annotations

import json

from winml_perf.bundle import cache
from winml_perf.support.errors import UsageError


def require_fresh(request: cache.Request, check: cache.Check | None) -> None:
    """Nothing when a fresh, fit derived bundle exists for ``request``; else UsageError (exit 2) saying why."""
    components = request.components
    key = cache.text_sha256(json.dumps(components, sort_keys=True))
    root = cache.root_for(request.source_dir)
    final = root / f"{request.prefix}-{key[:12]}"
    manifest, stale = cache.check_folder(final, key, request.shape, check) if root.is_dir() else (None, "absent")
    if manifest is not None:
        return
    reason = cache.miss_reason(root, request, components, stale or "absent")
    raise UsageError(
        f"--no-recompile: no prepared route fits this run ({reason}); nothing was compiled",
        "prepare it for these options (winml bundle prepare BUNDLE|MODEL.onnx --ep X --compile [--device-free] with the "
        "same --ep-option), or drop --no-recompile to compile here",
    )
