"""What the race optimises (--objective), what it must respect (--max-ttft-ms) and what it may spend
(--budget: seconds of wall time or tokens processed). ``goodput`` is the one serving objective: its
rounds serve a closed loop through og.Engine (tune/serving_rounds.py) instead of single streams."""

from __future__ import annotations

import re
from dataclasses import dataclass

from winml_perf.model import flag_bounds
from winml_perf.support.errors import UsageError

#: --objective word -> the per-iteration metric it ranks by.
OBJECTIVES = {
    "decode": "decode_tokens_per_s",
    "ttft": "ttft_ms",
    "e2e": "e2e_ms",
    "request_ttft": "request_ttft_ms",
    "goodput": "goodput_requests_per_s",
}
TTFT_METRIC = "ttft_ms"
GOODPUT = "goodput"
INTERRUPTED = "interrupted"  # why a race a signal ended stopped (Race.stopped; tune/session.py)
#: One invocation's goodput (stats/serving.py invocation_figures): requests/s meeting the SLO.
GOODPUT_METRIC = OBJECTIVES[GOODPUT]


def objective_metric(word: str) -> str:
    try:
        return OBJECTIVES[word]
    except KeyError:
        raise UsageError(f"--objective {word!r} is not known", f"use one of {', '.join(OBJECTIVES)}") from None


@dataclass(frozen=True)
class Budget:
    """At most ``seconds`` of wall time (from the start of the tune) or ``tokens`` processed
    (prompt + generated tokens of every warmup and measured iteration)."""

    seconds: float | None = None
    tokens: int | None = None

    def describe(self) -> str:
        return f"{self.seconds:g} s" if self.seconds is not None else f"{self.tokens} tokens"


_BUDGET = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|sec|m|min|tok|tokens)\s*$", re.IGNORECASE)


def parse_budget(text: str) -> Budget:
    """'300s', '5m', '20000tok' -> Budget; anything else is a usage error naming --budget."""
    match = _BUDGET.match(text)
    if not match or float(match.group(1)) <= 0:
        raise UsageError(
            f"--budget {text!r} is not a positive duration or token count",
            "e.g. --budget 300s, --budget 5m or --budget 20000tok",
        )
    value, unit = float(match.group(1)), match.group(2).lower()
    if unit in ("tok", "tokens"):
        flag_bounds.check("--budget tokens", value, text.strip())
        if value != int(value):
            raise UsageError(f"--budget {text!r}: a token budget is a whole number", "e.g. --budget 20000tok")
        return Budget(tokens=int(value))
    seconds = value * 60.0 if unit in ("m", "min") else value
    return Budget(seconds=flag_bounds.check("--budget", seconds, text.strip()))
