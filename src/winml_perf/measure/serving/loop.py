"""The load loop: drive a server (session/genai_engine.py Server) through one load point.

Closed loop: ``concurrency`` requests begin at once and each that ends is replaced by the next,
which arrives then. Open loop: arrivals at Poisson times drawn with the load's seed (exponential
gaps of mean 1/rate); before every step each request that is due is handed to the server with its
due time as its arrival, so a loop that falls behind shows as queueing, never as a slower rate.
Sequential: the closed loop at concurrency 1.

The loop holds the server calls and the clock only; figures come later (stats/serving.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from winml_perf.model.serving import LoadSpec, RequestTiming, StepPoint
from winml_perf.session.genai_engine import Server


@dataclass(frozen=True)
class Planned:
    """A request as planned: its lengths and (open loop) its due time from the start."""

    index: int
    prompt_tokens: int
    max_new_tokens: int
    due_s: float = 0.0


def plan(load: LoadSpec) -> list[Planned]:
    """The load point's requests: lengths fixed or uniform over their range, and Poisson due times
    (open loop), all drawn from one generator seeded with the load's seed: the same plan for every
    route and invocation."""
    rng = np.random.default_rng(load.seed)
    n = load.requests
    prompts = rng.integers(load.prompt_tokens.low, load.prompt_tokens.high + 1, size=n)
    outputs = rng.integers(load.max_new_tokens.low, load.max_new_tokens.high + 1, size=n)
    due = [0.0] * n
    if load.mode == "open":
        assert load.rate_per_s is not None
        gaps = rng.exponential(1.0 / load.rate_per_s, size=n)
        due = [float(x) for x in np.cumsum(gaps) - gaps[0]]  # the first request arrives at 0
    return [Planned(i, int(prompts[i]), int(outputs[i]), due[i]) for i in range(n)]


@dataclass
class _Live:
    planned: Planned
    arrival_s: float
    scheduled_s: float | None = None
    reason: str = ""

    def __post_init__(self) -> None:
        self.token_s: list[float] = []


def run_load(
    server: Server,
    load: LoadSpec,
    prompt_ids: Callable[[Planned], Sequence[int]],
    clock: Callable[[], float] = time.perf_counter,
    sleep: Callable[[float], None] = time.sleep,
) -> tuple[tuple[RequestTiming, ...], tuple[StepPoint, ...], float]:
    """Serve every planned request of ``load``; the requests' timings, the steps and the wall time."""
    planned = plan(load)
    prompts = {p.index: list(prompt_ids(p)) for p in planned}  # made before the clock starts
    limit = 1 if load.mode == "sequential" else (load.concurrency or 0)
    live: dict[int, _Live] = {}
    done: list[_Live] = []
    steps: list[StepPoint] = []
    queue = list(planned)
    t0 = clock()

    def now() -> float:  # to the microsecond: the record keeps every token's time, compactly
        return round(clock() - t0, 6)

    def begin(p: Planned, arrival: float) -> None:
        live[p.index] = _Live(p, arrival)
        server.submit(p.index, prompts[p.index], p.max_new_tokens)

    if load.mode != "open":
        for p in queue[:limit]:
            begin(p, 0.0)
        queue = queue[limit:]
    while queue or live:
        if load.mode == "open":
            t = now()
            while queue and queue[0].due_s <= t:
                p = queue.pop(0)
                begin(p, p.due_s)
            if not live:  # idle until the next arrival
                sleep(max(0.0, queue[0].due_s - now()))
                continue
        start = now()
        tokens = server.step()
        end = now()
        got: set[int] = set()
        for tok in tokens:
            r = live[tok.rid]
            if r.scheduled_s is None:
                r.scheduled_s = start
            r.token_s.append(end)
            got.add(tok.rid)
            if tok.finished:
                r.reason = tok.reason
                done.append(live.pop(tok.rid))
                if load.mode != "open" and queue:
                    begin(queue.pop(0), end)
        steps.append(StepPoint(start, end, len(got), server.waiting()))
        if not tokens and not server.pending() and live:
            stuck = sorted(live)
            raise RuntimeError(f"the server has nothing pending but requests {stuck} did not finish")
    wall = now()
    timings = tuple(
        RequestTiming(
            r.planned.index,
            r.arrival_s,
            r.scheduled_s if r.scheduled_s is not None else r.arrival_s,
            tuple(r.token_s),
            r.planned.prompt_tokens,
            r.planned.max_new_tokens,
            r.reason,
        )
        for r in sorted(done, key=lambda r: r.planned.index)
    )
    return timings, tuple(steps), wall
