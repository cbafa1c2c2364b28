"""Teacher-forced logits of an onnxruntime-genai bundle (issue 24): the prompt, then given tokens one
step at a time, the logits of every step read with ``generator.get_logits()``.

Without ``continuation`` the bundle feeds back its own argmax (greedy decoding), which is how the
reference's continuation is made; with one, every route sees exactly those tokens.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from winml_perf.support.errors import BenchmarkFailure


@dataclass(frozen=True)
class TeacherForced:
    path: str
    logits: np.ndarray  # steps x vocabulary, float32
    continuation: tuple[int, ...]  # the token fed after each step (the greedy choice, or the one given)
    outputs: dict[str, dict[int, np.ndarray]] = field(
        default_factory=dict
    )  # stage output name -> {step: last position}
    load_ms: float = 0.0
    run_ms: float = 0.0
    release_ms: float = 0.0  # letting go of the generator (and of the model when the check keeps none)


def _read_outputs(generator: Any, names: Sequence[str], step: int, into: dict[str, dict[int, np.ndarray]]) -> None:
    for name in dict.fromkeys(names):
        try:
            value = np.array(generator.get_output(name), dtype=np.float32)
        except Exception:  # the generator keeps only some stage outputs at some steps
            continue
        into.setdefault(name, {})[step] = value[:, -1:, ...] if value.ndim >= 3 else value


def teacher_forced(
    path: str | Path,
    prompt_ids: Sequence[int],
    steps: int,
    continuation: Sequence[int] | None = None,
    outputs: Sequence[str] = (),
) -> TeacherForced:
    """Logits of ``steps`` steps: step 0 after the prompt, step k after ``continuation[k-1]``."""
    import onnxruntime_genai as og

    from winml_perf.equivalence.passes.model_pool import load_model

    if steps <= 0 or not prompt_ids:
        raise ValueError("teacher_forced needs a prompt and at least one step")
    if continuation is not None and len(continuation) < steps - 1:
        raise ValueError(f"continuation has {len(continuation)} tokens, {steps - 1} needed")
    t0 = time.perf_counter()
    try:
        model = load_model(path)  # the check's kept model (equivalence/passes/model_pool.py), else loaded
        t1 = time.perf_counter()
        params = og.GeneratorParams(model)
        params.set_search_options(max_length=len(prompt_ids) + steps, do_sample=False)
        generator = og.Generator(model, params)
        rows: list[np.ndarray] = []
        fed: list[int] = []
        seen: dict[str, dict[int, np.ndarray]] = {}
        generator.append_tokens(np.asarray(prompt_ids, dtype=np.int32))
        for k in range(steps):
            logits = np.array(generator.get_logits(), dtype=np.float32).reshape(-1)
            rows.append(logits)
            _read_outputs(generator, outputs, k, seen)
            token = (
                int(logits.argmax()) if continuation is None else int(continuation[k]) if k < len(continuation) else 0
            )
            fed.append(token)
            if k < steps - 1:
                generator.append_tokens(np.asarray([token], dtype=np.int32))
        t2 = time.perf_counter()
        del generator, params, model  # timed: an EP may wait for its device as it frees them
        t3 = time.perf_counter()
    except Exception as exc:  # onnxruntime-genai raises RuntimeError with the EP's message
        raise BenchmarkFailure(
            f"{path}: the equivalence check's teacher-forced pass failed: {str(exc).strip().splitlines()[0]}",
            "turn it off with --no-equivalence, or fix the route",
        ) from exc
    return TeacherForced(
        str(path), np.stack(rows), tuple(fed), seen, (t1 - t0) * 1000.0, (t2 - t1) * 1000.0, (t3 - t2) * 1000.0
    )
