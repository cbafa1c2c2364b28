"""EPContext compilation of a route's stages, each in a child process with a timeout.

Stages whose EP writes EPContext models (``eps.EPS[..].compiles``: QNN, OpenVINO, VitisAI,
TensorRT-RTX) are compiled with onnxruntime's ``ModelCompiler`` to ``{stage}_{ep}_ctx.onnx``; stages
that share one source file, EP and options are compiled once. A stage on any other EP is reported
"nothing to compile". A compile that fails or times out leaves that stage on its source model, and
the outcome says why. Before a compiled model is reused, ``compatibility`` asks onnxruntime whether
the EP devices present here still run it well.

Child entry point: ``python -m winml_perf.bundle.compile SRC OUT EP OPTIONS_JSON``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from winml_perf import eps
from winml_perf.model.route import CompileOutcome

RECOMPILE_STATUSES = ("EP_UNSUPPORTED", "EP_SUPPORTED_PREFER_RECOMPILATION")
SLEEP_ENV = "WINML_PERF_TEST_COMPILE_SLEEP_S"  # test hook: the child sleeps this long first
_CHILD_FAILED = 3


@dataclass(frozen=True)
class CompileJob:
    stages: tuple[str, ...]
    source: str  # the stages' model file, relative to the bundle
    ep: str  # canonical
    provider_options: dict = field(default_factory=dict)

    @property
    def output(self) -> str:
        return f"{self.stages[0]}_{eps.ep_alias(self.ep)}_ctx.onnx"

    def key_dict(self) -> dict:
        return {"stages": list(self.stages), "source": self.source, "ep": self.ep, "provider_options": self.provider_options, "output": self.output}


def _compiles(ep: str) -> bool:
    return ep in eps.EPS and eps.EPS[ep].compiles


def compile_jobs(plan, compiles=None) -> tuple[list[CompileJob], list[CompileOutcome]]:
    """(jobs, notes): one job per distinct (file, EP, options); a note per stage with nothing to compile."""
    compiles = compiles or _compiles
    jobs: dict[str, CompileJob] = {}
    notes = []
    for route in plan.stages:
        if not compiles(route.ep_after):
            notes.append(CompileOutcome((route.stage,), route.files[0], route.ep_after, None, "nothing to compile",
                                        f"{eps.ep_alias(route.ep_after)} does not produce EPContext models"))
            continue
        options = next(iter(route.provider_options_after[0].values())) if route.provider_options_after else {}
        ident = json.dumps([route.files[0], route.ep_after, options], sort_keys=True)
        if ident in jobs:
            job = jobs[ident]
            jobs[ident] = CompileJob(job.stages + (route.stage,), job.source, job.ep, job.provider_options)
        else:
            jobs[ident] = CompileJob((route.stage,), route.files[0], route.ep_after, dict(options))
    return list(jobs.values()), notes


def run_jobs(jobs: list[CompileJob], src_dir: Path, out_dir: Path, timeout_s: float) -> list[CompileOutcome]:
    return [compile_in_child(job, Path(src_dir), Path(out_dir), timeout_s) for job in jobs]


def filename_updates(outcomes: list[CompileOutcome]) -> dict[str, str]:
    """stage -> compiled file, for outcomes that compiled."""
    return {stage: o.output for o in outcomes if o.status == "compiled" for stage in o.stages}


def compile_in_child(job: CompileJob, src_dir: Path, out_dir: Path, timeout_s: float) -> CompileOutcome:
    out = out_dir / job.output
    cmd = [sys.executable, "-m", "winml_perf.bundle.compile", str(src_dir / job.source), str(out), job.ep, json.dumps(job.provider_options)]
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _discard(out)
        return CompileOutcome(job.stages, job.source, job.ep, None, "timeout",
                              f"compile took longer than {timeout_s:g} s; the stage keeps its source model (raise --compile-timeout)",
                              _ms(t0))
    if proc.returncode != 0 or not out.is_file():
        _discard(out)
        lines = [ln for ln in (proc.stderr or "").strip().splitlines() if ln.strip()]
        why = lines[-1] if lines else f"exit status {proc.returncode}"
        return CompileOutcome(job.stages, job.source, job.ep, None, "failed", f"{why}; the stage keeps its source model", _ms(t0))
    return CompileOutcome(job.stages, job.source, job.ep, job.output, "compiled", "", _ms(t0))


def compatibility(model_path: Path, ep: str) -> tuple[str, str]:
    """(status, detail) of a compiled model for the devices of ``ep`` here, per onnxruntime's API.

    Status is an ``OrtCompiledModelCompatibility`` member name, or ``NOT_CHECKED`` when the model
    carries no compatibility info or no device of that EP is present.
    """
    import onnxruntime as ort
    from onnxruntime.capi import onnxruntime_pybind11_state as C

    info = C.get_compatibility_info_from_model(str(model_path), ep)
    if info is None:
        return "NOT_CHECKED", f"no ep_compatibility_info.{ep} in the model"
    devices = [d for d in ort.get_ep_devices() if d.ep_name == ep]
    if not devices:
        return "NOT_CHECKED", f"no {ep} device here"
    status = C.get_model_compatibility_for_ep_devices(devices, info)
    return status.name, f"checked against {len(devices)} device(s)"


def _discard(path: Path) -> None:
    for p in path.parent.glob(path.stem + "*"):
        p.unlink(missing_ok=True)


def _ms(t0: float) -> float:
    return round((time.perf_counter() - t0) * 1000.0, 3)


def _child(src: str, out: str, ep: str, options_json: str) -> int:
    import onnxruntime as ort

    sleep_s = float(os.environ.get(SLEEP_ENV) or 0)
    if sleep_s:
        time.sleep(sleep_s)
    try:
        from winml_perf import plugins

        plugins.register_plugin_eps()
    except Exception as exc:  # a plugin that fails to register is reported, and only matters for its EP
        print(f"plugin registration: {exc}", file=sys.stderr)
    options = {str(k): str(v) for k, v in json.loads(options_json).items()}
    so = ort.SessionOptions()
    devices = [d for d in ort.get_ep_devices() if d.ep_name == ep]
    if devices:
        so.add_provider_for_devices(devices, options)
    elif ep != "CPUExecutionProvider":
        so.add_provider(ep, options)
    flags = ort.OrtCompileApiFlags.ERROR_IF_NO_NODES_COMPILED if _compiles(ep) else ort.OrtCompileApiFlags.NONE
    compiler = ort.ModelCompiler(so, src, embed_compiled_data_into_model=False, flags=flags)
    compiler.compile_to_file(out)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 4:
        print("usage: python -m winml_perf.bundle.compile SRC OUT EP OPTIONS_JSON", file=sys.stderr)
        return 2
    try:
        return _child(*args)
    except Exception as exc:
        print(f"{type(exc).__name__}: {' '.join(str(exc).split())}", file=sys.stderr)
        return _CHILD_FAILED


if __name__ == "__main__":
    sys.exit(main())
