"""The measurement defaults, in one place: the command line and the specs read them from here.

A new default, or a change to one, goes here and nowhere else. ``winml perf --help`` shows these
values, and a spec built without the command line (tests, benchmarks, the library) gets the same.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Defaults:
    """What a run measures when it is not told otherwise."""

    #: Measured iterations in each invocation (fixed policy).
    iterations: int = 5
    #: Invocations (fresh processes) of each route that `winml perf` runs: enough for an interval
    #: across runs (docs/benchmarks.md). A bare IterationPolicy is one invocation (in-process callers).
    invocations: int = 5
    #: Least invocations of an adaptive run before it may stop at its target. Two give a
    #: between-process variance on one degree of freedom: two processes alike by chance gave ±1.4 %
    #: where processes differ by 40 %; three is the fewest with a second degree of freedom.
    adaptive_min_invocations: int = 3
    #: Adaptive: at most this many invocations per route (`--max-invocations`).
    max_invocations: int = 20
    #: Adaptive: at least this many iterations in each invocation.
    min_iterations: int = 6
    #: Adaptive: at most this many iterations per cell, all invocations together.
    max_iterations: int = 1000
    #: Adaptive: at most this many seconds per cell (loads, warmups and iterations).
    max_time_s: float = 600.0
    #: Warmup iterations discarded before measuring.
    warmup: int = 1
    #: Warmup: the most iterations `auto` (settle) may discard.
    warmup_max: int = 20
    #: Warmup `auto`: the last this many times must agree ...
    settle_window: int = 3
    #: ... within this many percent of their median.
    settle_tolerance_pct: float = 5.0
    #: Prompt length in tokens of a synthetic prompt.
    prompt_tokens: int = 128
    #: Tokens generated per iteration.
    max_new_tokens: int = 32
    #: Seconds allowed for each EPContext compile.
    compile_timeout_s: float = 600.0
    #: Seed of synthetic prompts and of the route order.
    seed: int = 0


DEFAULTS = Defaults()
