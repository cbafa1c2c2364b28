"""`winml perf --duration`: a sustained run's length ("90s", "10m", "1.5m", or seconds), and the
iteration policy it becomes (one invocation, generating until that much measured time has passed)."""

from __future__ import annotations

import re

from winml_perf.model import flag_bounds
from winml_perf.model.spec import IterationPolicy
from winml_perf.support.errors import UsageError

_DURATION = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([sm]?)\s*$")


def parse_duration(text: str, flag: str = "--duration") -> float:
    """Seconds of ``text``: a number with the unit s (seconds, the default) or m (minutes)."""
    match = _DURATION.match(text)
    if match is None:
        raise UsageError(
            f"{flag} {text!r} is not a duration", f"pass seconds or minutes, e.g. {flag} 90s or {flag} 10m"
        )
    seconds = float(match.group(1)) * (60.0 if match.group(2) == "m" else 1.0)
    if not seconds > 0:
        raise UsageError(f"{flag} must be longer than 0 s, got {text!r}", f"e.g. {flag} 10m")
    return flag_bounds.check("--duration", seconds, text.strip())  # a week at most: never "run until killed"


def sustained_policy(text: str, target_ci: str | None, invocations: int | None) -> IterationPolicy:
    """The policy of `--duration TEXT`: refused beside an adaptive target or several invocations."""
    seconds = parse_duration(text)
    if target_ci is not None:
        raise UsageError("--duration and --target-ci both given", "a sustained run stops at its duration: drop one")
    if invocations not in (None, 1):
        raise UsageError(
            f"--duration runs one invocation, got --invocations {invocations}", "drop --invocations, or pass 1"
        )
    return IterationPolicy(iterations=1, invocations=1, duration_s=seconds)
