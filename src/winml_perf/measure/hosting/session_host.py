"""SessionHost: one loaded session (one route) that runs cells' iterations on request.

The same class runs in the measuring process (no isolation) and inside an isolated child
(isolate.py drives it over a pipe), so both paths time exactly the same code. The timing itself
happens inside the session (``generate_timed`` / ``run_timed``); the host only calls it in a tight
loop and converts results to IterationSample afterwards.
"""

from __future__ import annotations

import hashlib
import math
import time
from collections.abc import Callable
from typing import Any

from winml_perf.measure.hosting.replies import BatchReply, BeginReply, EndReply, LoadReply
from winml_perf.measure.memory import MemorySampler
from winml_perf.model.sample import IterationSample
from winml_perf.model.spec import CellSpec, PromptSpec, SessionSpec
from winml_perf.session.factory import register_plugins
from winml_perf.stats import sample_stats as stats


def build_prompt_ids(session: Any, prompt: PromptSpec, n_tokens: int | None) -> tuple[list[int], dict[str, Any]]:
    """The token ids fed every iteration, and a description for the record."""
    info: dict[str, Any] = {"mode": prompt.mode, "seed": prompt.seed, "apply_template": prompt.apply_template}
    if prompt.text is None:
        ids = list(session.synthetic_prompt(n_tokens, seed=prompt.seed))
        info["fitted"] = False
    else:
        text = session.apply_chat_template(prompt.text) if prompt.apply_template else prompt.text
        ids = list(session.encode(text))
        info["text_sha256"] = hashlib.sha256(prompt.text.encode()).hexdigest()
        info["encoded_tokens"] = len(ids)
        info["fitted"] = bool(n_tokens) and len(ids) != n_tokens
        if n_tokens and ids:  # tile or cut the text's tokens to exactly n_tokens
            ids = (ids * math.ceil(n_tokens / len(ids)))[:n_tokens]
    info["tokens"] = len(ids)
    return ids, info


class SessionHost:
    """Opens one session from a SessionSpec and serves cells: begin_cell, run_batch, end_cell."""

    def __init__(
        self,
        spec: SessionSpec,
        session_factory: Callable[[SessionSpec], Any],
        sample_memory: bool = True,
        meter: Any = None,  # a power.meters.EnergyMeter read at each generation's phase boundaries
    ) -> None:
        self.spec = spec
        self.meter: Any = meter if spec.token_based else None
        self._marks: list[tuple[float, float]] = []
        self.session_factory = session_factory
        self.session: Any = None
        self.memory = MemorySampler() if sample_memory else None
        self.load_info: LoadReply | None = None
        self._cell: CellSpec | None = None
        self._prompt_ids: list[int] = []
        self._calls = 0
        self._first_generation_ms: float | None = None
        self._cells_served = 0

    # -- lifecycle -----------------------------------------------------------------------------
    def load(self) -> LoadReply:
        if self.session is not None and self.load_info is not None:
            return self.load_info
        if self.memory is not None:
            self.memory.start()
        plugin_ms = register_plugins(self.spec)
        session = self.session_factory(self.spec)
        t0 = time.perf_counter()
        session.load()
        load_ms = (time.perf_counter() - t0) * 1000.0
        self.session = session
        self.load_info = LoadReply(plugin_registration_ms=plugin_ms, model_load_ms=load_ms)
        return self.load_info

    def close(self) -> None:
        if self.session is not None and hasattr(self.session, "unload"):
            self.session.unload()
        self.session = None
        if self.memory is not None:
            self.memory.stop()

    # -- cells ---------------------------------------------------------------------------------
    def _one(self, round_index: int) -> IterationSample:
        cell = self._cell
        first = self._calls == 0
        t0 = time.perf_counter() if first else 0.0
        if self.spec.token_based:
            assert cell is not None  # begin_cell names the cell before any token iteration
            if self.meter is None:
                timing = self.session.generate_timed(self._prompt_ids, cell.max_new_tokens)
            else:
                self._marks = []
                timing = self.session.generate_timed(self._prompt_ids, cell.max_new_tokens, mark=self._mark)
            sample = IterationSample.from_timing(timing, round_index)
            self._last_token_ids = sample.token_ids
        else:
            sample = IterationSample(latency_ms=float(self.session.run_timed()), round_index=round_index)
        if first:
            self._first_generation_ms = (time.perf_counter() - t0) * 1000.0
        self._calls += 1
        return sample

    def _mark(self) -> None:
        self._marks.append((time.perf_counter(), self.meter.read()))

    def _idle_window(self) -> tuple[tuple[float, float], ...]:
        """Poll the meter through a quiet window (nothing runs): idle power and the counter's steps."""
        from winml_perf.power.meters import IDLE_POLL_S, IDLE_WINDOW_S

        marks, end = [], time.perf_counter() + IDLE_WINDOW_S
        while True:
            now = time.perf_counter()
            marks.append((now, self.meter.read()))
            if now >= end:
                return tuple(marks)
            time.sleep(IDLE_POLL_S)

    def begin_cell(self, cell: CellSpec) -> BeginReply:
        """Build the prompt and run the cell's warmup; returns prompt info, warmup samples and the
        first-generation time of this session (the very first call, whichever cell made it)."""
        load = self.load()
        self._cell = cell
        if self.memory is not None:
            self.memory.reset()
        if self.spec.token_based:
            self._prompt_ids, prompt_info = build_prompt_ids(self.session, cell.prompt, cell.prompt_tokens)
        else:
            self._prompt_ids, prompt_info = [], {"mode": "inputs"}
        idle = self._idle_window() if self.meter is not None else ()
        warm = cell.warmup
        samples: list[IterationSample] = []
        t0 = time.perf_counter()
        while len(samples) < warm.count:
            samples.append(self._one(-1))
        if warm.mode == "settle":
            while len(samples) < warm.max_count and not stats.warmup_settled(
                [s.latency_ms for s in samples], warm.settle_window, warm.settle_tolerance_pct
            ):
                samples.append(self._one(-1))
        reused = self._cells_served > 0
        self._cells_served += 1
        return BeginReply(
            prompt_info=prompt_info,
            prompt_ids=tuple(self._prompt_ids),
            warmup_samples=tuple(samples),
            warmup_s=time.perf_counter() - t0,
            first_generation_ms=self._first_generation_ms,
            session_reused=reused,
            load=load,
            idle_marks=idle,
        )

    def run_batch(self, n: int, round_index: int, warmup: int = 0) -> BatchReply:
        """Run ``warmup`` discarded then ``n`` measured iterations of the current cell."""
        for _ in range(warmup):
            self._one(-1)
        marks: list[tuple[tuple[float, float], ...]] = []
        samples: list[IterationSample] = []
        t0 = time.perf_counter()
        for _ in range(n):
            samples.append(self._one(round_index))
            marks.append(tuple(self._marks))
        wall_s = time.perf_counter() - t0
        return BatchReply(tuple(samples), wall_s, tuple(marks) if self.meter is not None else ())

    def end_cell(self) -> EndReply:
        """Memory figures of the cell and what the session says actually ran (when it can)."""
        memory = self.memory.snapshot() if self.memory is not None else {}
        route_actual: dict[str, Any] = {}
        actual = getattr(self.session, "actual_route", None)
        if callable(actual):
            try:
                route_actual = dict(actual())
            except Exception as exc:  # reporting must not kill a finished measurement
                route_actual = {"error": f"{type(exc).__name__}: {exc}"}
        text = self._output_text()
        self._cell = None
        return EndReply(memory, route_actual, text)

    def _output_text(self) -> str | None:
        """What a text prompt generated, as the bundle's tokenizer reads it; None for synthetic tokens."""
        ids = getattr(self, "_last_token_ids", ())
        if self._cell is None or self._cell.prompt.text is None or not ids:
            return None
        try:
            return str(self.session.decode(ids))
        except Exception:  # the text is a courtesy; the measurement stands without it
            return None
