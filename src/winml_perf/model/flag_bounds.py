"""Every numeric flag's bounds, in one table, and the one check they all go through.

A number from the command line reaches onnxruntime, SQL, ``timedelta`` or a loop count; unbounded,
a typo asks for a million threads or overflows a C integer. Typed flags (``int``/``float``) are
checked for every command at once before it runs (commands/numeric_flags.py); flags whose text
holds a number (``--target-ci 1%``, ``--prompt-tokens 128-1024*2``, ``--older-than 7d``) call
``check`` from their parser. A numeric flag missing here gets ``FALLBACK_INT``/``FALLBACK_FLOAT``;
tests/unit/test_flag_bounds.py fails on one, so a new flag gets its own entry here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from winml_perf.support.errors import UsageError

WEEK_S = 7 * 24 * 3600.0
#: A prompt or generation length no model here comes near (tokens).
MAX_TOKENS = 1 << 20
#: Threads an onnxruntime session may be asked for: far above any machine's cores, far below what
#: exhausts memory (a million threads took 24 GB).
MAX_THREADS = 1024
#: Relative ages (--older-than 7d, --since 12h): a century, in each unit.
MAX_AGE_DAYS = 36_525
#: Days in each unit of a relative age (7d, 12w, 48h, 30m).
DAYS_PER_UNIT = {"d": 1.0, "h": 1 / 24, "m": 1 / 1440, "w": 7.0}
#: What a date/age flag takes (results/filters.parse_when), for the help of every such flag.
WHEN_TEXT = "2025-01-31, ISO time, or an age: 7d, 2w, 12h, 30m = minutes"


@dataclass(frozen=True)
class Bound:
    """Closed interval [low, high] (``low_open``: (low, high]) of a flag's value, and an example."""

    low: float
    high: float
    example: str
    low_open: bool = False
    unit: str = ""

    def holds(self, value: float) -> bool:
        try:
            x = float(value)
        except OverflowError:  # an integer beyond any float
            return False
        if not math.isfinite(x) or x > self.high:
            return False
        return x > self.low if self.low_open else x >= self.low

    def text(self) -> str:
        low = _plain(self.low)
        span = f"{'above' if self.low_open else 'from'} {low} {'up ' if self.low_open else ''}to {_plain(self.high)}"
        return f"{span} {self.unit}" if self.unit else span


def _plain(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


def _count(high: int, example: str, low: int = 1) -> Bound:
    return Bound(low, high, example)


def _age(example: str) -> Bound:
    return Bound(0, MAX_AGE_DAYS, example, unit="days (a relative age, in any of its units)")


def _seconds(example: str) -> Bound:
    return Bound(0, WEEK_S, example, low_open=True, unit="seconds")


SEED = _count(2**32 - 1, "0", low=0)  # numpy's seeds are 32-bit
BOUNDS: dict[str, Bound] = {
    # winml perf
    "--iterations": _count(1_000_000, "5"),
    "--invocations": _count(10_000, "5"),
    "--max-invocations": _count(10_000, "20"),
    "--min-iterations": _count(1_000_000, "6"),
    "--max-iterations": _count(1_000_000, "1000"),
    "--rounds": _count(10_000, "3"),
    "--requests": _count(1_000_000, "16"),  # winml serve: requests per load point
    "--concurrency": _count(4096, "4"),  # winml serve: requests in flight (closed loop)
    "--request-rate": Bound(0, 1e6, "8", low_open=True, unit="requests/s"),  # winml serve: open loop
    "--warmup": _count(10_000, "1", low=0),
    "--prompt-tokens": _count(MAX_TOKENS, "128"),
    "--max-new-tokens": _count(MAX_TOKENS, "32"),
    "--perplexity-chunk": _count(MAX_TOKENS, "512", low=4),
    "--seed": SEED,
    "--compile-timeout": _seconds("600"),
    "--max-time": _seconds("120"),
    "--cell-timeout": _seconds("600"),
    "--duration": _seconds("10m"),
    "--target-ci": Bound(0, 100, "1%", low_open=True, unit="%"),
    "--shape": Bound(0, 2**31 - 1, "input=1x3x224x224", unit="in each dimension"),
    "--intra-op-threads": _count(MAX_THREADS, "4", low=0),
    "--inter-op-threads": _count(MAX_THREADS, "1", low=0),
    # winml tune
    "--max-ttft-ms": Bound(0, WEEK_S * 1000, "200", low_open=True, unit="ms"),
    "--min-placement": Bound(0, 1, "0.5", unit="(share of a stage's nodes)"),
    "--max-device-crossings": _count(1024, "1", low=0),
    "--max-rounds": _count(10_000, "30", low=2),
    "--screen-rounds": _count(1000, "2", low=0),
    "--budget": _seconds("300s"),
    "--budget tokens": _count(10**12, "20000tok"),
    # results, dashboard
    "--limit": _count(2**31 - 1, "20"),
    "--jobs": _count(256, "4"),
    "--older-than": _age("90d"),
    "--since": _age("7d"),
    "--until": _age("1d"),
    # compare
    "--resamples": _count(100_000, "2000"),
    "--equivalence": Bound(0, 100, "2%", unit="%"),
    "--fail-on-regression": Bound(0, 1000, "5%", unit="%"),
    # bundle synth
    "--prompt-length": _count(MAX_TOKENS, "16"),
    "--kv-length": _count(MAX_TOKENS, "128"),
    "--context-length": _count(MAX_TOKENS, "4096"),
    "--layers": _count(1024, "2"),
    # bundle from-gguf
    "--accuracy-level": _count(4, "4", low=0),  # MatMulNBits accuracy_level: 0 (float) to 4 (int8 activations)
}
FALLBACK_INT = Bound(-(2**31), 2**31 - 1, "1")
FALLBACK_FLOAT = Bound(-1e15, 1e15, "1")


def bound_of(flag: str, value: float) -> Bound:
    bound = BOUNDS.get(flag)
    if bound is not None:
        return bound
    return FALLBACK_INT if isinstance(value, int) else FALLBACK_FLOAT


def check(flag: str, value: float, shown: object = None) -> float:
    """``value`` when it is within ``flag``'s bounds; else UsageError naming the flag, its range and
    an example. ``shown``: the text the user gave, when it differs from ``value``."""
    bound = bound_of(flag, value)
    if bound.holds(value):
        return value
    given = value if shown is None else shown
    raise UsageError(
        f"{flag} {given!r} is out of range: it takes {bound.text()}",
        f"pass a value in range, e.g. {flag} {bound.example}",
    )


def check_age(flag: str, count: int, unit_days: float, shown: str) -> None:
    """A relative age (``7d``, ``12w``, ``48h``): at most ``MAX_AGE_DAYS`` days whatever its unit."""
    check(flag, count * unit_days, shown)
