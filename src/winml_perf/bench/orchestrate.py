"""run_benchmark(request): wires resolve -> prepare -> session -> runner -> record. Nothing else."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from winml_perf.bundle.config import load_config_dict
from winml_perf.errors import BenchmarkFailure
from winml_perf.session.genai_session import GenaiSession

DEFAULT_PROMPT = "Benchmarks measure how fast a model reads a prompt and writes tokens on a device."


@dataclass(frozen=True)
class PerfRequest:
    path: Path
    runtime: str = "winml-genai"
    prompt: str | None = None
    apply_template: bool = False
    prompt_tokens: list[int] | None = None
    max_new_tokens: list[int] = (32,)
    warmup: int = 1
    iterations: int = 5
    seed: int = 0
    quiet: bool = False


def _summary(values: list[float]) -> dict:
    a = np.asarray(values, dtype=float)
    return {"median": float(np.median(a)), "mean": float(a.mean()), "min": float(a.min()), "max": float(a.max()),
            "p50": float(np.percentile(a, 50)), "p90": float(np.percentile(a, 90)), "p99": float(np.percentile(a, 99))}


def run_benchmark(req: PerfRequest) -> dict:
    load_config_dict(req.path)
    session = GenaiSession(req.path)
    session.load()
    cells = []
    prompt_sets = req.prompt_tokens or [None]
    for n_prompt in prompt_sets:
        for n_new in req.max_new_tokens:
            if n_prompt is None:
                text = req.prompt or DEFAULT_PROMPT
                if req.apply_template:
                    text = session.apply_chat_template(text)
                ids = session.encode(text)
            else:
                ids = session.synthetic_prompt(n_prompt, seed=req.seed)
            for _ in range(req.warmup):
                session.generate_timed(ids, n_new)
            timings = [session.generate_timed(ids, n_new) for _ in range(req.iterations)]
            steps = [s for t in timings for s in t.decode_step_ms]
            cells.append({
                "prompt_tokens": len(ids), "max_new_tokens": n_new,
                "ttft_ms": _summary([t.ttft_ms for t in timings]),
                "prompt_tokens_per_s": _summary([t.prompt_tokens_per_s for t in timings]),
                "decode_tokens_per_s": _summary([t.decode_tokens_per_s for t in timings]),
                "token_latency_ms": _summary(steps),
                "e2e_ms": _summary([t.e2e_ms for t in timings]),
            })
    return {"bundle": str(req.path), "runtime": req.runtime, "route": "config", "model_load_ms": session.load_ms, "cells": cells}
