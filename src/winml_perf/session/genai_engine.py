"""Servers of many requests at once over a loaded GenaiSession: the seam ``winml serve`` drives.

A server takes requests (``submit``), runs one step (``step``: the tokens that step produced, per
request) and says whether anything is left (``pending``). Three of them:

* ``EngineServer``: onnxruntime-genai 0.18's ``og.Engine`` (continuous batching). Requests are keyed
  by the Request object's hash and checked with ``==``: ``ev.request`` is a new Python wrapper on
  every event, equal to (and hashing as) the one ``create_request`` gave.
* ``Batch1Server``: one batch-1 ``og.Generator`` per request in flight, stepped in turn in this
  thread: concurrent, never batched. The fallback where the Engine refuses a route, labelled so.
* ``SequentialServer``: one batch-1 generator at a time, the next request begun only when the one
  before ended: the baseline of the batching gain.

Every request generates exactly its ``max_new_tokens`` (min length = max length), as single-stream
cells do, so routes and loads compare at equal work.

``engine_refusal(config)`` says, from genai_config.json alone, why the Engine will not serve a
bundle (measured on onnxruntime-genai 0.18: a ``decoder-pipeline`` model, the NPU-style static
pipelines included, raises "The model type is not supported for decoding. Expected a decoder-only
model."); None when it may.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from winml_perf.model.serving import BATCH1, ENGINE, SEQUENTIAL
from winml_perf.support.errors import BenchmarkFailure

#: Event-buffer capacity per step: more than any batch the Engine schedules here.
EVENT_CAPACITY = 1024


@dataclass(frozen=True)
class Token:
    """A token a step gave to request ``rid``; ``finished`` with the reason when it was the last."""

    rid: int
    token: int
    finished: bool = False
    reason: str = ""


class Server(Protocol):
    kind: str

    def capabilities(self) -> dict[str, Any]: ...

    def submit(self, rid: int, prompt_ids: Sequence[int], max_new_tokens: int) -> None: ...

    def step(self) -> list[Token]: ...

    def pending(self) -> bool: ...

    def waiting(self) -> int: ...

    def speculative(self) -> dict[str, Any] | None: ...


def engine_refusal(config: Mapping[str, Any]) -> str | None:
    """Why og.Engine refuses this genai_config.json (see the module doc), or None."""
    model = config.get("model") if isinstance(config, Mapping) else None
    kind = model.get("type") if isinstance(model, Mapping) else None
    if kind == "decoder-pipeline":
        return (
            "onnxruntime-genai's Engine serves decoder-only models; this bundle is a decoder-pipeline "
            "(model.type), which og.Engine refuses ('Expected a decoder-only model')"
        )
    return None


def _fail(what: str, exc: Exception) -> BenchmarkFailure:
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return BenchmarkFailure(
        f"onnxruntime-genai failed while {what}: {first}", "see the route's EPs (winml bundle show)"
    )


class EngineServer:
    """og.Engine over a loaded model (module doc)."""

    kind = ENGINE

    def __init__(self, model: Any) -> None:
        import onnxruntime_genai as og

        self._og = og
        self.engine = og.Engine(model)  # raises where the Engine refuses the model: the caller says why
        self._buffer = self.engine.create_event_buffer(EVENT_CAPACITY)
        self._by_hash: dict[int, list[tuple[Any, int]]] = {}
        self._in_flight = 0
        self._slots = int(self.capabilities().get("configured_max_batch_size") or 0)

    def capabilities(self) -> dict[str, Any]:
        c = self.engine.get_capabilities()
        names = ("configured_max_batch_size", "max_request_length", "max_scheduled_tokens")
        return {n: int(getattr(c, n)) for n in names if hasattr(c, n)}

    def submit(self, rid: int, prompt_ids: Sequence[int], max_new_tokens: int) -> None:
        og = self._og
        try:
            request = self.engine.create_request()
            options = og.TurnOptions(request)
            options.set_max_generated_tokens(int(max_new_tokens))
            options.set_min_generated_tokens(int(max_new_tokens))
            request.begin_turn(np.asarray(prompt_ids, dtype=np.int32), options)
        except Exception as exc:
            raise _fail("beginning a request", exc) from exc
        self._by_hash.setdefault(hash(request), []).append((request, rid))
        self._in_flight += 1

    def _rid(self, request: Any) -> tuple[int, Any]:
        for kept, rid in self._by_hash.get(hash(request), ()):
            if kept == request:
                return rid, kept
        raise BenchmarkFailure("the Engine returned an event for a request this run did not make", "report it")

    def step(self) -> list[Token]:
        og = self._og
        try:
            out = self.engine.run(self._buffer)
        except Exception as exc:
            raise _fail("stepping the Engine", exc) from exc
        tokens: list[Token] = []
        for k in range(len(out)):
            ev = out[k]
            rid, kept = self._rid(ev.request)
            finished = ev.finish_reason != og.FinishReason.NONE
            has_token = bool(ev.flags & og.EngineEventFlags.TOKEN) if hasattr(og, "EngineEventFlags") else True
            reason = str(ev.finish_reason).rsplit(".", 1)[-1] if finished else ""
            if has_token:
                tokens.append(Token(rid, int(ev.token), finished, reason))
            elif finished and tokens and tokens[-1].rid == rid:
                tokens[-1] = Token(rid, tokens[-1].token, True, reason)
            if finished:
                self._in_flight -= 1
                self._by_hash[hash(kept)] = [(r, i) for r, i in self._by_hash[hash(kept)] if i != rid]
                kept.close()
        return tokens

    def pending(self) -> bool:
        return bool(self.engine.has_pending_requests())

    def waiting(self) -> int:
        """Requests begun and not yet given a slot: those in flight beyond the configured batch size."""
        return max(0, self._in_flight - self._slots) if self._slots else 0

    def speculative(self) -> dict[str, Any] | None:
        try:
            stats = dict(self.engine.get_speculative_stats())
        except Exception:  # no statistics from this build: nothing to report
            return None
        return {k: v for k, v in stats.items() if isinstance(v, int | float | list)}


class _Generated:
    def __init__(self, generator: Any, rid: int, prompt: np.ndarray, left: int) -> None:
        self.generator, self.rid, self.prompt, self.left = generator, rid, prompt, left


class Batch1Server:
    """A batch-1 og.Generator per request in flight, stepped in turn (module doc)."""

    kind = BATCH1

    def __init__(self, model: Any, one_at_a_time: bool = False) -> None:
        import onnxruntime_genai as og

        self._og, self.model = og, model
        self.one_at_a_time = one_at_a_time
        self.kind = SEQUENTIAL if one_at_a_time else BATCH1
        self._active: list[_Generated] = []
        self._queued: list[tuple[int, Sequence[int], int]] = []

    def capabilities(self) -> dict[str, Any]:
        return {"configured_max_batch_size": 1}

    def submit(self, rid: int, prompt_ids: Sequence[int], max_new_tokens: int) -> None:
        self._queued.append((rid, prompt_ids, max_new_tokens))

    def _start(self, rid: int, prompt_ids: Sequence[int], max_new: int) -> _Generated:
        og = self._og
        params = og.GeneratorParams(self.model)
        total = len(prompt_ids) + int(max_new)
        params.set_search_options(max_length=total, min_length=total, do_sample=False)
        return _Generated(og.Generator(self.model, params), rid, np.asarray(prompt_ids, dtype=np.int32), int(max_new))

    def step(self) -> list[Token]:
        """Admit what may start, then one token for each generator in flight, in turn."""
        while self._queued and (not self.one_at_a_time or not self._active):
            self._active.append(self._start(*self._queued.pop(0)))
        tokens: list[Token] = []
        try:
            for g in list(self._active):
                if g.prompt.size:
                    g.generator.append_tokens(g.prompt)
                    g.prompt = g.prompt[:0]
                g.generator.generate_next_token()
                g.left -= 1
                token = int(g.generator.get_next_tokens()[0])
                tokens.append(Token(g.rid, token, g.left == 0, "MAX_GENERATED_TOKENS" if g.left == 0 else ""))
                if g.left == 0:
                    self._active.remove(g)
        except Exception as exc:
            raise _fail("generating", exc) from exc
        return tokens

    def pending(self) -> bool:
        return bool(self._active or self._queued)

    def waiting(self) -> int:
        return len(self._queued)

    def speculative(self) -> dict[str, Any] | None:
        return None
