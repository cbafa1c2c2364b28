"""Profile one genai route: a separate, profiling-enabled copy of the route's bundle, loaded on its own.

onnxruntime-genai's runtime option ``enable_profiling`` reaches only the top-level decoder's run
options (a pipeline's stage sessions never see it), so every stage gets session-level profiling
instead: the copy's genai_config.json sets ``session_options.enable_profiling`` to a prefix of its
own per stage, every other file is a hard link to the route's (a copy across file systems): never a
symlink, since onnxruntime-genai refuses external data that resolves outside the folder it loads (seen
with OpenVINO on a derived bundle's ``model.onnx.data``). onnxruntime writes one file per stage
session, ``<prefix>_<timestamp>.json``, holding every run of the session; the files are complete
once the model is released. The copy and the files are deleted afterwards.

Two generations run, each of the cell's shape: a warmup (first-run effects: shader compilation,
allocator growth) and the profiled one. Both are profiled (session-level profiling cannot pause), so
each stage's runs are split evenly between them and the warmup's are dropped.
"""

from __future__ import annotations

import gc
import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

from winml_perf.bundle.config import CONFIG_NAME, GenaiConfig, load_config
from winml_perf.explain.breakdown import PhaseBreakdown, phase_breakdown
from winml_perf.explain.profile import RunProfile, read_profile
from winml_perf.session.genai_session import GenaiSession
from winml_perf.support.errors import BenchmarkFailure

GENERATIONS = 2  # a warmup and the profiled generation, both recorded by the session profiler


def _place(source: Path, target: Path) -> None:
    """``target`` holds ``source``'s content inside the copy: a hard link, else a copy (another file system)."""
    if source.is_dir():
        shutil.copytree(source, target, copy_function=_link_or_copy)
    else:
        _link_or_copy(source, target)


def _link_or_copy(source: str | Path, target: str | Path) -> None:
    try:
        os.link(Path(source).resolve(), target)
    except OSError:
        shutil.copy2(Path(source).resolve(), target)


def profiling_copy(route_dir: Path, dest: Path) -> tuple[GenaiConfig, dict[str, Path]]:
    """A copy of ``route_dir`` in ``dest`` (linked files, and a config with profiling on for every
    stage); returns the route's config and each stage's profile prefix."""
    config = load_config(route_dir)
    bundle = dest / "bundle"
    bundle.mkdir(parents=True)
    for entry in route_dir.iterdir():
        if entry.name not in (CONFIG_NAME, "_compiled"):
            _place(entry.resolve(), bundle / entry.name)
    prefixes = {s.name: dest / "profiles" / s.name for s in config.stages}
    (dest / "profiles").mkdir()
    profiled = config.with_session_entries({name: {"enable_profiling": str(p)} for name, p in prefixes.items()})
    (bundle / CONFIG_NAME).write_text(profiled.dumps(), encoding="utf-8")
    return config, prefixes


def _stage_runs(prefix: Path) -> list[RunProfile]:
    files = sorted(prefix.parent.glob(f"{prefix.name}_*.json"))
    if len(files) != 1:
        raise BenchmarkFailure(
            f"onnxruntime wrote {len(files)} profile files for stage `{prefix.name}`, expected 1",
            "the stage's session_options may override enable_profiling; remove it from genai_config.json",
        )
    return read_profile(files[0])


def split_runs(
    config: GenaiConfig, runs: dict[str, list[RunProfile]], steps: int
) -> dict[str, dict[str, list[RunProfile]]]:
    """{phase: {stage: runs}} of the profiled (last) generation. A stage that runs on token
    generation ran once per decode step at the end of the generation; its earlier runs are the prompt's."""
    out: dict[str, dict[str, list[RunProfile]]] = {"prompt": {}, "decode_step": {}}
    for stage in config.stages:
        all_runs = runs[stage.name]
        if len(all_runs) % GENERATIONS:
            raise BenchmarkFailure(
                f"stage `{stage.name}` ran {len(all_runs)} times in {GENERATIONS} identical generations",
                "report this: the profile cannot be split into generations",
            )
        mine = all_runs[len(all_runs) // GENERATIONS * (GENERATIONS - 1) :]
        in_steps = steps if stage.run_on_token_gen else 0
        if in_steps > len(mine):
            raise BenchmarkFailure(
                f"stage `{stage.name}` ran {len(mine)} times in a generation of {steps} decode steps",
                "check run_on_prompt/run_on_token_gen of the stage in genai_config.json",
            )
        out["prompt"][stage.name] = mine[: len(mine) - in_steps]
        out["decode_step"][stage.name] = mine[len(mine) - in_steps :]
    return out


def profile_route(route_dir: str | Path, prompt_ids: Sequence[int], new_tokens: int) -> dict[str, PhaseBreakdown]:
    """Breakdowns of the prompt pass and the mean decode step of one generation of this shape."""
    work = Path(tempfile.mkdtemp(prefix="winml-explain-"))
    try:
        config, prefixes = profiling_copy(Path(route_dir), work)
        session = GenaiSession(work / "bundle").load()  # the harness's own timed loop
        try:
            timed = [session.generate_timed(prompt_ids, new_tokens) for _ in range(GENERATIONS)][-1]
        finally:
            session.unload()  # releases the sessions: onnxruntime completes the profile files
            del session
            gc.collect()
        runs = {name: _stage_runs(prefix) for name, prefix in prefixes.items()}
        split = split_runs(config, runs, len(timed.decode_step_ms))
        # The prompt phase runs from append_tokens to the first token (time to first token).
        phases = {"prompt": phase_breakdown("prompt", [timed.ttft_ms], split["prompt"])}
        if timed.decode_step_ms:
            phases["decode_step"] = phase_breakdown("decode_step", timed.decode_step_ms, split["decode_step"])
        return phases
    finally:
        shutil.rmtree(work, ignore_errors=True)
