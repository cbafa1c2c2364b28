"""A forced route with ``--compile`` is the compiled route only when every compile it asked for succeeded.

A compile that failed or timed out leaves its stages on their source models. Measuring that under the
route's own label would report an uncompiled run as the compiled one, so the route fails (exit 1),
naming each failed stage and the compiler's reason. ``--allow-uncompiled`` measures it anyway, and
then its label ends in `` (uncompiled)`` and a warning says which stages were not compiled.
"""

from __future__ import annotations

from dataclasses import replace

from winml_perf.model.route import COMPILE_FAILURES, CompileOutcome, Route
from winml_perf.support.errors import BenchmarkFailure

UNCOMPILED_MARK = " (uncompiled)"


def failed_compiles(route: Route) -> list[CompileOutcome]:
    return [c for c in route.compile if c.status in COMPILE_FAILURES]


def _what_failed(failed: list[CompileOutcome]) -> str:
    return "; ".join(f"{', '.join(c.stages)} ({c.source}): {c.status}: {c.reason}" for c in failed)


def settle_compile(route: Route, allow_uncompiled: bool) -> Route:
    """``route`` when nothing failed to compile; else BenchmarkFailure, or with ``allow_uncompiled``
    the route relabelled as uncompiled."""
    failed = failed_compiles(route)
    if not failed:
        return route
    if not allow_uncompiled:
        raise BenchmarkFailure(
            f"route {route.label}: --compile failed, so the route would run uncompiled stages: {_what_failed(failed)}",
            "fix the model or provider options the compiler names, or pass --allow-uncompiled to measure the "
            "source models under a label that says so",
        )
    stages = ", ".join(s for c in failed for s in c.stages)
    note = f"--allow-uncompiled: stage(s) {stages} failed to compile and run their source models"
    return replace(route, label=route.label + UNCOMPILED_MARK, warnings=(*route.warnings, note))
