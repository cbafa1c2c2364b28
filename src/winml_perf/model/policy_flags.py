"""The measurement policies that `winml perf`'s flags ask for: warmup and iterations, read from the
flags' values, refused with the flag's name (exit 2) before any work."""

from __future__ import annotations

from winml_perf.model.defaults import DEFAULTS
from winml_perf.model.spec import IterationPolicy, WarmupPolicy
from winml_perf.support.errors import UsageError

#: Invocations (fresh processes) by default; the why is at model/defaults.py.
DEFAULT_INVOCATIONS = DEFAULTS.invocations
#: Least invocations of an adaptive run before it may stop at its target (model/defaults.py).
ADAPTIVE_MIN_INVOCATIONS = DEFAULTS.adaptive_min_invocations


def positive(value: int, flag: str) -> int:
    """``value`` when above 0; else exit 2 naming ``flag``."""
    if value <= 0:
        raise UsageError(f"{flag} must be a positive integer, got {value}", f"pass {flag} 1 or more")
    return value


def percent(text: str, flag: str) -> float:
    """``text`` (``1%`` or ``1``) as a percentage above 0; else exit 2 naming ``flag``."""
    try:
        value = float(text.strip().rstrip("%"))
    except ValueError:
        raise UsageError(f"{flag} {text!r} is not a percentage", f"e.g. {flag} 1%") from None
    if not value > 0:
        raise UsageError(f"{flag} must be above 0%, got {text}", f"e.g. {flag} 1%")
    return value


def warmup_policy(text: str) -> WarmupPolicy:
    """``--warmup N|auto``: a count, or warm up until times settle."""
    if text == "auto":
        return WarmupPolicy(mode="settle", count=DEFAULTS.warmup)
    try:
        n = int(text)
    except ValueError:
        raise UsageError(
            f"--warmup {text!r} is neither a count nor 'auto'", "e.g. --warmup 2 or --warmup auto"
        ) from None
    if n < 0:
        raise UsageError(f"--warmup must be 0 or more, got {n}", "pass --warmup 0 or more")
    return WarmupPolicy(mode="count", count=n, max_count=max(n, DEFAULTS.warmup_max))


def iteration_policy(
    iterations: int,
    target_ci: str | None,
    min_iterations: int,
    max_iterations: int,
    max_time: float,
    invocations: int | None = None,
    max_invocations: int = DEFAULTS.max_invocations,
) -> IterationPolicy:
    """Fixed (``iterations`` x ``invocations``), or adaptive until ``target_ci`` (``--target-ci``)."""
    positive(iterations, "--iterations")
    if invocations is not None:
        positive(invocations, "--invocations")
    if target_ci is None:
        return IterationPolicy(
            iterations=iterations, invocations=DEFAULT_INVOCATIONS if invocations is None else invocations
        )
    least = ADAPTIVE_MIN_INVOCATIONS if invocations is None else invocations
    cap = 1 if least == 1 else positive(max_invocations, "--max-invocations")
    return IterationPolicy.until_ci(
        percent(target_ci, "--target-ci"),
        positive(min_iterations, "--min-iterations"),
        positive(max_iterations, "--max-iterations"),
        max_time,
        least,
        cap,
    )
