"""The measuring child of ``winml serve``: one invocation of one route in a fresh process.

It loads the route's bundle, makes the server (the Engine; where the Engine refuses the route,
batch-1 generators when the run allows that fallback, else it answers "refused" with the reason),
warms it with a short load, then serves each load point in turn, a fresh server for each, with
the process's RSS sampled throughout (peak per load point). The sequential baseline always uses
batch-1 generators one at a time. Replies over the pipe:

    ("ok", ServingReply)        every load point served
    ("refused", reason)         the Engine refused the route and the fallback was not allowed
    ("error", text)             anything else that failed
"""

from __future__ import annotations

import os
import traceback
from dataclasses import dataclass, field
from typing import Any

from winml_perf.model.serving import SEQUENTIAL, Lengths, LoadSpec, ServedInvocation
from winml_perf.model.spec import SessionSpec

#: The warmup load before the first load point: this many requests of WARMUP_TOKENS new tokens.
WARMUP_REQUESTS = 2
WARMUP_TOKENS = 4


@dataclass(frozen=True)
class ServingJob:
    """What the child is asked: the route's session, its load points, the invocation's index, and
    whether batch-1 generators may stand in where the Engine refuses (``fallback``)."""

    session: SessionSpec
    loads: tuple[LoadSpec, ...]
    invocation: int
    fallback: bool = False
    prompt_seed: int = 0


@dataclass(frozen=True)
class ServingReply:
    served: tuple[ServedInvocation, ...]
    capabilities: dict[str, Any]
    server_note: str | None
    model_load_ms: float | None
    memory: dict[str, Any] = field(default_factory=dict)


def make_server(model: Any, sequential: bool, fallback: bool) -> tuple[Any, str | None, str | None]:
    """(server, note, refusal): the Engine, or batch-1 generators (sequential, or the allowed
    fallback, with a note saying why), or None with why the Engine refused."""
    from winml_perf.session.genai_engine import Batch1Server, EngineServer

    if sequential:
        return Batch1Server(model, one_at_a_time=True), None, None
    try:
        return EngineServer(model), None, None
    except Exception as exc:
        why = f"og.Engine refused the model: {(str(exc).strip().splitlines() or [type(exc).__name__])[0]}"
        if not fallback:
            return None, None, why
        return Batch1Server(model), why + "; served by batch-1 generators stepped in turn (not batched)", None


def serve(job: ServingJob) -> tuple[str, Any]:
    from winml_perf.measure.memory import MemorySampler
    from winml_perf.measure.serving.loop import run_load
    from winml_perf.session.genai_session import GenaiSession

    sampler = MemorySampler(device=True).start()
    session = GenaiSession(job.session.path).load()
    model = session._require_loaded()

    def prompt_ids(p: Any) -> list[int]:
        return session.synthetic_prompt(p.prompt_tokens, job.prompt_seed + p.index)

    served: list[ServedInvocation] = []
    capabilities: dict[str, Any] = {}
    note: str | None = None
    length = job.loads[0].prompt_tokens.low  # a static pipeline takes only its own prompt length
    warm = LoadSpec(
        "closed", WARMUP_REQUESTS, Lengths(length, length), Lengths(WARMUP_TOKENS, WARMUP_TOKENS), WARMUP_REQUESTS
    )
    for load in job.loads:
        sequential = load.mode == "sequential"
        server, why, refusal = make_server(model, sequential, job.fallback)
        if refusal is not None:
            return "refused", refusal
        if not sequential:
            note = note or why
            capabilities = capabilities or server.capabilities()
        run_load(server, warm, prompt_ids)  # every fresh server: its first requests pay one-time costs
        sampler.reset()
        requests, steps, wall = run_load(server, load, prompt_ids)
        peak = sampler.snapshot().get("peak_rss_bytes")
        served.append(
            ServedInvocation(
                job.invocation,
                server.kind if not sequential else SEQUENTIAL,
                requests,
                steps,
                wall,
                os.getpid(),
                peak,
                server.speculative(),
            )
        )
        del server
    memory = sampler.snapshot()
    sampler.stop()
    return "ok", ServingReply(tuple(served), capabilities, note, session.load_ms, memory)


def child_main(conn: Any, job: ServingJob) -> None:
    """The Worker target: serve the job, answer once, exit."""
    try:
        reply = serve(job)
    except Exception as exc:
        reply = ("error", f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}")
    conn.send(reply)
    conn.close()
