"""Profile one plain ONNX route: a separate session with onnxruntime's session profiler on.

One warmup inference, then ``RUNS`` profiled ones; the breakdown is their mean (phase ``run``,
one stage ``model``). The profile file is deleted afterwards.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from winml_perf.explain.breakdown import PhaseBreakdown, phase_breakdown
from winml_perf.explain.profile import read_profile

RUNS = 5
STAGE = "model"


def profile_model(model_path: str | Path, options: Mapping[str, Any], runs: int = RUNS) -> dict[str, PhaseBreakdown]:
    from winml_perf.session.onnx_session import OnnxSession

    work = Path(tempfile.mkdtemp(prefix="winml-explain-"))
    try:
        session = OnnxSession.from_options(model_path, **dict(options), profile_prefix=str(work / STAGE))
        session.load()
        try:
            session.run_timed()
            walls = [session.run_timed() for _ in range(runs)]
            profile = session.end_profiling()
        finally:
            session.unload()
        profiled = read_profile(profile)[-runs:]  # the last runs: any run made while loading comes first
        return {"run": phase_breakdown("run", walls, {STAGE: profiled})}
    finally:
        shutil.rmtree(work, ignore_errors=True)
