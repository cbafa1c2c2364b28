"""Open sessions from a SessionSpec, in this process or in a child (top-level, picklable functions).

The session class comes from the runtime value (``Runtime.session``, "module:Class"), imported here
on first use, so adding a runtime needs no change in this module.
"""

from __future__ import annotations

import importlib
from typing import Any

from winml_perf.model.runtime import Runtime, runtime_named
from winml_perf.model.spec import SessionSpec
from winml_perf.support.errors import UsageError


def register_plugins(spec: SessionSpec) -> float | None:
    """Make sure the spec's plugin EP libraries ('NAME=PATH') are registered in this process (a child
    had them registered at its start, child.py); the ms their registration took here, or None when
    there is nothing to register."""
    if not spec.plugin_libraries:
        return None
    from winml_perf.ep.plugins import register_plugin_eps

    # the spec's libraries are what the parent registered (its env's included): a child reads no env of its own
    registrations = register_plugin_eps(list(spec.plugin_libraries), env={}, discover=False)
    return sum(r.registration_ms for r in registrations)


def session_class(runtime: Runtime) -> Any:
    """The class ``runtime.session`` names; a UsageError with the runtime's remedy when its module is missing."""
    module_name, _, class_name = runtime.session.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        if not runtime.missing_remedy:
            raise
        raise UsageError(
            f"runtime '{runtime.name}' needs {module_name}, which this install lacks ({exc})", runtime.missing_remedy
        ) from exc
    return getattr(module, class_name)


def open_session(spec: SessionSpec) -> Any:
    """Build (not load) the session for ``spec``: its runtime's session class over ``spec.path`` with the
    spec's options (GenaiSession for 'winml-genai', OnnxSession for 'winml'): through the class's
    ``from_options`` where it has one (it sorts the flat options into its groups). The runner calls
    ``load()`` on it, timed."""
    cls = session_class(runtime_named(spec.runtime))
    return getattr(cls, "from_options", cls)(spec.path, **dict(spec.options))
