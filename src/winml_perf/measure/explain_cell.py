"""Explain a measured cell: profile its route in a child process of its own, after its measured iterations.

The profiled session is a separate session in a separate process, so the profiler's cost never
reaches a measured iteration, the measuring process's memory figures, or its loaded session. The
child gets the prompt token ids the measured iterations used. Its answer is the record's
``explain`` section; a child that fails leaves ``{"error": ...}`` there and the cell stays ok.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from winml_perf.ep import child
from winml_perf.model.spec import CellSpec, SessionSpec

CHILD_MODULE = "winml_perf.measure.explain_cell"
DEFAULT_TIMEOUT_S = 600.0
METHOD = "onnxruntime session profiler (kernel spans per node; model_run span per session run)"


def profiled_note(cell: CellSpec, prompt_tokens: int) -> dict[str, Any]:
    """Which generations/runs were profiled (none of the measured ones)."""
    where = "a separate session in its own child process, after the cell's measured iterations"
    if cell.session.token_based:
        from winml_perf.explain.genai_run import GENERATIONS

        return {
            "where": where,
            "measured_iterations_profiled": 0,
            "generations": GENERATIONS,
            "warmup_generations": GENERATIONS - 1,
            "prompt_tokens": prompt_tokens,
            "decode_steps": max(0, (cell.max_new_tokens or 1) - 1),
        }
    from winml_perf.explain.onnx_run import RUNS

    return {"where": where, "measured_iterations_profiled": 0, "runs": RUNS, "warmup_runs": 1}


def explain_cell(cell: CellSpec, prompt_ids: Sequence[int], timeout_s: float | None = None) -> dict[str, Any]:
    """The record's ``explain`` section for ``cell``: method, what was profiled, and the phases."""
    note = profiled_note(cell, len(prompt_ids))
    with tempfile.TemporaryDirectory(prefix="winml-explain-") as tmp:
        request, answer = Path(tmp) / "request.json", Path(tmp) / "explain.json"
        request.write_text(
            json.dumps(
                {
                    "session": cell.session.to_dict(),
                    "prompt_ids": list(prompt_ids),
                    "max_new_tokens": cell.max_new_tokens,
                }
            ),
            encoding="utf-8",
        )
        context = child.ChildContext.from_parent(cell.session.plugin_libraries)
        result = child.run_module(CHILD_MODULE, [str(request), str(answer)], context, timeout_s or DEFAULT_TIMEOUT_S)
        if not result.ok or not answer.is_file():
            return {"method": METHOD, "profiled": note, "error": result.failure()}
        phases = json.loads(answer.read_text(encoding="utf-8"))
    return {"method": METHOD, "profiled": note, "phases": phases}


def _explain(request_path: str, answer_path: str) -> None:
    request = json.loads(Path(request_path).read_text(encoding="utf-8"))
    spec = SessionSpec.from_dict(request["session"])
    if spec.token_based:
        from winml_perf.explain.genai_run import profile_route

        phases = profile_route(spec.path, request["prompt_ids"], int(request["max_new_tokens"]))
    else:
        from winml_perf.explain.onnx_run import profile_model

        phases = profile_model(spec.path, spec.options)
    Path(answer_path).write_text(json.dumps({k: p.to_dict() for k, p in phases.items()}), encoding="utf-8")


def main(argv: Sequence[str]) -> int:
    """The child: ``REQUEST.json ANSWER.json`` (plugins already registered by child.py)."""
    return child.exit_status(lambda: _explain(*argv))
