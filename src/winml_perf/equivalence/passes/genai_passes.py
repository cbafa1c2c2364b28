"""The routes' teacher-forced passes of an equivalence check, run in a few worker processes at once.

onnxruntime-genai holds Python's lock for each of its calls, so in one process the routes' model
loads and steps run one after another, and they were most of a check's time. On a machine with cores
to spare, ``pass_lanes()`` starts a few spawned processes ("lanes"); once the reference's pass has
given the tokens every route is fed, each route's pass is handed to a lane, and the check takes the
results in route order. A route always goes to the same lane, which keeps the models it loaded
(equivalence/passes/model_pool.py) for the check's later prompts. A pass in a lane is the pass this process
would run: the same library, bundle, session options and tokens, so the same arrays.

A lane that dies (a crash in an EP) fails the pass it was running, said as such; the routes queued
behind it are handed to a fresh lane. ``WINML_PERF_CHECK_PROCESSES`` sets the number of lanes (0: every
pass here, in turn); by default one per four cores beyond the first four, at most three.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import replace
from typing import Any

from winml_perf.equivalence.passes.genai_logits import TeacherForced
from winml_perf.support.errors import BenchmarkFailure, UsageError

PROCESSES_ENV = "WINML_PERF_CHECK_PROCESSES"
MAX_LANES = 3


def lanes_wanted(env: dict[str, str] | None = None) -> int:
    """The number of lanes: ``WINML_PERF_CHECK_PROCESSES`` when set, else from the cores (see the module doc)."""
    text = (os.environ if env is None else env).get(PROCESSES_ENV, "").strip()
    if text:
        if not text.isdigit():
            raise UsageError(
                f"{PROCESSES_ENV}={text!r} is not a number of processes",
                remedy=f"set {PROCESSES_ENV} to 0 (every pass in this process) or a small count such as 3",
            )
        return int(text)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(0, min(MAX_LANES, cores // 4 - 1))


def _lane_setup(budget: int) -> None:
    from winml_perf.equivalence.passes.model_pool import keep_models_from_now

    keep_models_from_now(budget)


def _lane_ready() -> None:
    import onnxruntime_genai  # noqa: F401  (its import is most of a lane's start)


def _lane_pass(
    path: str, prompt_ids: Sequence[int], steps: int, continuation: Sequence[int], outputs: Sequence[str]
) -> tuple[TeacherForced | None, str, str | None, bool]:
    """In a lane: (the pass, '', None, whether its model was kept from before), or (None, why, remedy,
    False) when it failed (an error travels back as text)."""
    from winml_perf.equivalence.passes.genai_logits import teacher_forced
    from winml_perf.equivalence.passes.model_pool import current_pool

    pool = current_pool()
    reused = pool.reused if pool is not None else 0
    try:
        run = teacher_forced(path, prompt_ids, steps, continuation, outputs=outputs)
    except BenchmarkFailure as exc:
        return None, exc.message, exc.remedy, False
    return run, "", None, pool is not None and pool.reused > reused


class PassLanes:
    """``n`` lane processes; ``submit`` hands a route's pass to its lane, ``result`` waits for it."""

    def __init__(self, n: int, work: Callable[..., Any] | None = None) -> None:
        from winml_perf.ep.child import ChildContext
        from winml_perf.equivalence.passes.model_pool import free_memory_share

        self.n = n
        self.work = work or _lane_pass  # importable by name: what a lane runs for each pass
        self.context = ChildContext.from_parent()
        self.budget = free_memory_share() // max(1, n)  # the lanes' kept models share what one pool may hold
        self.lanes: list[Any] = [self._new_lane() for _ in range(n)]
        self.lane_of: dict[str, int] = {}  # route folder -> its lane, for the check's later prompts
        self.futures: dict[
            str, tuple[Future[Any], int, tuple[object, ...]]
        ] = {}  # route folder -> (its pass, lane, arguments)
        self.queued_on: list[set[Future[Any]]] = [set() for _ in range(n)]  # passes left queued on a lane that died
        self.waited_ms = 0.0  # this process's time waiting for the lanes' passes
        self.restarted = 0

    def _new_lane(self) -> Any:
        from winml_perf.ep.child import one_process_pool

        lane = one_process_pool(self.context, _lane_setup, (self.budget,))
        lane.submit(_lane_ready)  # the process starts now, while this one runs the reference's pass
        return lane

    def submit(
        self,
        paths: Sequence[str],
        prompt_ids: Sequence[int],
        steps: int,
        continuation: Sequence[int],
        outputs: Sequence[str],
    ) -> None:
        """Hand each route's pass (of ``paths``, in order) to its lane."""
        for path in paths:
            lane = self.lane_of.setdefault(path, len(self.lane_of) % self.n)
            args = (path, list(prompt_ids), steps, list(continuation), list(outputs))
            self.futures[path] = (self.lanes[lane].submit(self.work, *args), lane, args)

    def has(self, path: str) -> bool:
        return path in self.futures

    def result(self, path: str) -> tuple[TeacherForced, bool]:
        """The route's pass and whether its lane had kept its model; BenchmarkFailure when it failed."""
        future, lane, args = self.futures.pop(path)
        t0 = time.perf_counter()
        try:
            try:
                run, why, remedy, reused = future.result()
            except BrokenProcessPool:
                if future in self.queued_on[lane]:  # queued behind the pass its lane died in: a fresh lane runs it
                    run, why, remedy, reused = self.lanes[lane].submit(self.work, *args).result()
                else:  # the first pass to see its lane dead is the one it died in (a lane runs in order)
                    self._restart(lane)
                    raise BenchmarkFailure(
                        f"{path}: the equivalence check's teacher-forced pass ended its worker process",
                        "turn it off with --no-equivalence, or fix the route",
                    ) from None
        finally:
            self.waited_ms += (time.perf_counter() - t0) * 1000.0
        if run is None:
            raise BenchmarkFailure(why, remedy)
        return replace(run, path=str(path)), reused

    def _restart(self, lane: int) -> None:
        """A fresh process for a dead lane; the passes still queued on the dead one are marked to run there."""
        self.queued_on[lane] = {f for f, n, _ in self.futures.values() if n == lane}
        self.lanes[lane] = self._new_lane()
        self.restarted += 1

    def close(self) -> None:
        """Drop what was queued and not asked for, and end the lanes."""
        for lane in self.lanes:
            lane.shutdown(wait=True, cancel_futures=True)
        self.futures.clear()


_LANES: ContextVar[PassLanes | None] = ContextVar("winml_pass_lanes", default=None)


@contextmanager
def pass_lanes(n: int | None = None) -> Iterator[PassLanes | None]:
    """Within the block, an equivalence check's route passes run in ``n`` lanes (lanes_wanted() when
    None); none are started for 0. An enclosing block's lanes are used as they are."""
    outer = _LANES.get()
    if outer is not None:
        yield outer
        return
    n = lanes_wanted() if n is None else n
    if n <= 0:
        yield None
        return
    lanes = PassLanes(n)
    token = _LANES.set(lanes)
    try:
        yield lanes
    finally:
        _LANES.reset(token)
        lanes.close()


def active_lanes() -> PassLanes | None:
    return _LANES.get()


class CheckPasses:
    """One check's route passes: in the enclosing ``pass_lanes()`` block's lanes, or in lanes of its own
    once it has two routes or more to judge, else here, in turn."""

    def __init__(self) -> None:
        self.lanes = active_lanes()
        self.own: PassLanes | None = None
        self.waited_before = self.lanes.waited_ms if self.lanes is not None else 0.0

    def open(self, n_routes: int) -> None:
        """Before the reference's pass (the lanes start while it runs): lanes of its own if it has none."""
        if self.lanes is None and n_routes >= 2:
            n = min(lanes_wanted(), n_routes)
            if n > 0:
                self.own = self.lanes = PassLanes(n)

    def submit(
        self,
        paths: Sequence[str],
        prompt_ids: Sequence[int],
        steps: int,
        continuation: Sequence[int],
        outputs: Sequence[str],
    ) -> None:
        if self.lanes is not None:
            self.lanes.submit(paths, prompt_ids, steps, continuation, outputs)

    def run(
        self, path: str, prompt_ids: Sequence[int], steps: int, continuation: Sequence[int], outputs: Sequence[str]
    ) -> TeacherForced:
        """The route's pass: from its lane (waiting for it), else run here now."""
        from winml_perf.equivalence.passes.genai_logits import teacher_forced
        from winml_perf.equivalence.passes.model_pool import current_pool

        if self.lanes is None or not self.lanes.has(path):
            return teacher_forced(path, prompt_ids, steps, continuation, outputs=outputs)
        run, reused = self.lanes.result(path)
        pool = current_pool()
        if pool is not None:  # the check's count of models loaded and kept covers its lanes' too
            pool.count(reused)
        return run

    @property
    def processes(self) -> int:
        return self.lanes.n if self.lanes is not None else 0

    @property
    def waited_ms(self) -> float:
        return self.lanes.waited_ms - self.waited_before if self.lanes is not None else 0.0

    def close(self) -> None:
        if self.own is not None:
            self.own.close()
