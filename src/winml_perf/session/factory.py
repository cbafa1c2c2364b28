"""Open sessions from a SessionSpec, in this process or in a child (top-level, picklable functions)."""

from __future__ import annotations

from winml_perf.model.runtime import GENAI, ONNX, runtime_named
from winml_perf.model.spec import SessionSpec
from winml_perf.support.errors import UsageError


def register_plugins(spec: SessionSpec) -> float | None:
    """Make sure the spec's plugin EP libraries ('NAME=PATH') are registered in this process (a child
    had them registered at its start, child.py); the ms their registration took here, or None when
    there is nothing to register."""
    if not spec.plugin_libraries:
        return None
    from winml_perf.ep.plugins import register_plugin_eps

    registrations = register_plugin_eps(list(spec.plugin_libraries), discover=False)
    return sum(r.registration_ms for r in registrations)


def open_session(spec: SessionSpec):
    """Build (not load) the session for ``spec``: GenaiSession for 'winml-genai', the plain ONNX
    session for 'winml'. The runner calls ``load()`` on it, timed."""
    runtime = runtime_named(spec.runtime)
    if runtime is GENAI:
        from winml_perf.session.genai_session import GenaiSession

        return GenaiSession(spec.path)
    if runtime is ONNX:
        try:
            from winml_perf.session.onnx_session import OnnxSession
        except ImportError as exc:
            raise UsageError(
                f"runtime 'winml' needs winml_perf.session.onnx_session, which this install lacks ({exc})",
                "use a bundle folder with --runtime winml-genai",
            ) from exc
        return OnnxSession(spec.path, **dict(spec.options))
    raise UsageError(f"unknown runtime {spec.runtime!r}", "use winml-genai or winml")
