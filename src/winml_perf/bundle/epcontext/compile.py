"""EPContext compilation of a route's stages, each in a child process with a timeout.

Stages whose EP writes EPContext models (its table entry says so, as the route plan carries it: QNN, OpenVINO,
VitisAI, TensorRT-RTX) are compiled with onnxruntime's ``ModelCompiler`` to ``{stage}_{ep}_ctx.onnx``; stages
that share one source file, EP and options are compiled once. A stage on any other EP is reported
"nothing to compile". A compile that fails or times out leaves that stage on its source model, and
the outcome says why. Before a compiled model is reused, ``compatibility`` asks onnxruntime whether
the EP devices present here still run it well.

A source over ``device_free_child.INLINE_LIMIT_BYTES`` (near protobuf's 2 GB) is compiled with its
initializers in ``<output>.data``.

Each compile runs as ``main(SRC OUT EP OPTIONS_JSON)`` in a child started by child.py, which hands
it the plugin EP libraries this process registered (``--ep-library`` included), so a plugin EP given
only by that flag compiles too.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from winml_perf.ep import child
from winml_perf.ep import table as eps
from winml_perf.model.route import CompileOutcome, CompileStatus
from winml_perf.support.errors import BundleError, UsageError

if TYPE_CHECKING:
    from winml_perf.bundle.routing import RoutePlan

RECOMPILE_STATUSES = ("EP_UNSUPPORTED", "EP_SUPPORTED_PREFER_RECOMPILATION")
NO_NODES = "Unable to compile any nodes"  # onnxruntime's words under ERROR_IF_NO_NODES_COMPILED
CHILD_MODULE = "winml_perf.bundle.epcontext.compile"  # the module the compile child runs (its main())
_CAPABILITY_FAILED = re.compile(r"GetCapability\(\) for (\S+) failed with error: (.*)")  # onnxruntime's log line
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


@dataclass(frozen=True)
class CompileJob:
    stages: tuple[str, ...]
    source: str  # the stages' model file, relative to the bundle
    ep: str  # canonical
    provider_options: dict[str, Any] = field(default_factory=dict)
    graph_optimization_level: str = "all"  # the level the stages load at; the compile runs at it too

    @property
    def output(self) -> str:
        return f"{self.stages[0]}_{eps.ep_alias(self.ep)}_ctx.onnx"

    def key_dict(self) -> dict[str, Any]:
        return {
            "stages": list(self.stages),
            "source": self.source,
            "ep": self.ep,
            "provider_options": self.provider_options,
            "graph_optimization_level": self.graph_optimization_level,
            "output": self.output,
        }


#: what compiles a plan's jobs from a source folder into an output folder: run_jobs, or a replacement
#: (device_free.runner, export.runner)
JobRunner = Callable[[Sequence["CompileJob"], Path, Path, float], list[CompileOutcome]]


def _compiles(ep: str) -> bool:
    return eps.compiles(ep)


def compile_jobs(
    plan: RoutePlan, compiles: Callable[[str], bool] | None = None
) -> tuple[list[CompileJob], list[CompileOutcome]]:
    """(jobs, notes): one job per distinct (file, EP, options); a note per stage with nothing to compile.
    Whether an EP compiles is its table entry's word, as the plan carries it (``RoutePlan.entries``;
    an EP the table lacks compiles nothing); ``compiles`` overrides it."""
    entries = plan.entries
    writes_epcontext = compiles or (lambda ep: ep in entries and entries[ep].compiles)
    jobs: dict[str, CompileJob] = {}
    notes = []
    forced = any(r.forced for r in plan.stages)
    for route in plan.stages:
        ep = route.ep_after
        assert ep is not None, "a plan's stage routes name their EP (bundle/routing.py)"
        if forced and not route.forced:  # --stages or a per-stage route: only the stages the route names are compiled
            why = "not one of this route's stages (--stages, or a per-stage route that leaves it out)"
        elif not writes_epcontext(ep):
            why = f"{entries[ep].alias if ep in entries else ep} does not produce EPContext models"
        else:
            why = None
        if why is not None:
            notes.append(
                CompileOutcome((route.stage,), route.files[0], ep, None, CompileStatus.NOTHING_TO_COMPILE, why)
            )
            continue
        options = next(iter(route.provider_options_after[0].values())) if route.provider_options_after else {}
        level = load_level(plan.config.raw, route.stage)
        ident = json.dumps([route.files[0], ep, options, level], sort_keys=True)
        if ident in jobs:
            job = jobs[ident]
            jobs[ident] = replace(job, stages=job.stages + (route.stage,))
        else:
            jobs[ident] = CompileJob((route.stage,), route.files[0], ep, dict(options), level)
    return list(jobs.values()), notes


def load_level(raw_config: dict[str, Any], stage: str) -> str:
    """The graph optimisation level onnxruntime-genai loads ``stage`` at: its session_options'
    ``graph_optimization_level`` (its own, else the decoder's), else onnxruntime's default, all.

    A stage compiled at a lower level than it loads at can fail to load: the loader constant-folds
    a CPU node that feeds an EPContext partition, and QNN then counts fewer graph inputs than its
    binary has (measured on the static NPU bundle's context stage)."""
    from winml_perf.session.onnx_options import parse_graph_optimization_level

    decoder = raw_config.get("model", {}).get("decoder", {})
    pipeline = decoder.get("pipeline") or []
    groups = pipeline if isinstance(pipeline, list) else [pipeline]
    node = next((g[stage] for g in groups if isinstance(g, dict) and stage in g), None)
    for owner in (node, decoder):
        so = owner.get("session_options") if isinstance(owner, dict) else None
        if isinstance(so, dict):
            try:
                return parse_graph_optimization_level(so.get("graph_optimization_level"))
            except UsageError as exc:
                raise BundleError(
                    f"genai_config.json: stage {stage}: session_options.graph_optimization_level "
                    f"{so.get('graph_optimization_level')!r} is not an onnxruntime level",
                    "use ORT_DISABLE_ALL, ORT_ENABLE_BASIC, ORT_ENABLE_EXTENDED or ORT_ENABLE_ALL",
                ) from exc
    return parse_graph_optimization_level(None)


def run_jobs(jobs: Sequence[CompileJob], src_dir: Path, out_dir: Path, timeout_s: float) -> list[CompileOutcome]:
    """Each job in a compile child on this machine's device; how each compiled file was made goes to prepared.json."""
    from winml_perf.bundle.epcontext import provenance

    context = child.ChildContext.from_parent()
    outcomes = [compile_in_child(job, Path(src_dir), Path(out_dir), timeout_s, context) for job in jobs]
    made = {
        job.output: provenance.made_here(Path(out_dir) / job.output, job.stages, job.ep, job.provider_options)
        for job, o in zip(jobs, outcomes)
        if o.status == "compiled"
    }
    if made:
        provenance.write(out_dir, made)
    return outcomes


def filename_updates(outcomes: list[CompileOutcome]) -> dict[str, str]:
    """stage -> compiled file, for outcomes that compiled."""
    return {stage: o.compiled_output for o in outcomes if o.status == "compiled" for stage in o.stages}


def compile_in_child(
    job: CompileJob, src_dir: Path, out_dir: Path, timeout_s: float, context: child.ChildContext | None = None
) -> CompileOutcome:
    out = out_dir / job.output
    args = [str(src_dir / job.source), str(out), job.ep, json.dumps(job.provider_options), job.graph_optimization_level]
    result = child.run_module(CHILD_MODULE, args, context or child.ChildContext.from_parent(), timeout_s)
    ms = round(result.wall_s * 1000.0, 3)
    if result.exit.timed_out:
        _discard(out)
        return CompileOutcome(
            job.stages,
            job.source,
            job.ep,
            None,
            CompileStatus.TIMEOUT,
            f"compile took longer than {timeout_s:g} s; the stage keeps its source model (raise --compile-timeout)",
            ms,
        )
    if not result.ok or not out.is_file():
        _discard(out)
        ep_error = capability_error(result.stderr, job.ep)
        if NO_NODES in result.stderr and ep_error is None:  # the EP claims no node of this model: a note, not a failure
            return CompileOutcome(
                job.stages,
                job.source,
                job.ep,
                None,
                CompileStatus.NOTHING_TO_COMPILE,
                f"{eps.ep_alias(job.ep)} claims no node of {job.source}; the stage runs its source model",
                ms,
            )
        return CompileOutcome(
            job.stages,
            job.source,
            job.ep,
            None,
            CompileStatus.FAILED,
            f"{ep_error or result.failure()}; the stage keeps its source model",
            ms,
        )
    return CompileOutcome(
        job.stages, job.source, job.ep, job.output, CompileStatus.COMPILED, "", ms, _verdict(result.stdout)
    )


def capability_error(stderr: str, ep: str, registered_as: str | None = None) -> str | None:
    """The error ``ep`` (registered as ``registered_as``, if another name) raised while choosing its nodes, as
    onnxruntime logs it; onnxruntime then reports no node compiled, though the EP never looked (QNN with a
    soc_model it cannot create a device for)."""
    for line in stderr.splitlines():
        found = _CAPABILITY_FAILED.search(_ANSI.sub("", line))
        if found and found.group(1) == (registered_as or ep):
            return f"{eps.ep_alias(ep)} failed while choosing the nodes it takes: {found.group(2).strip()}"
    return None


def _verdict(stdout: str) -> dict[str, Any] | None:
    """The compile child's last stdout line: the compiled model's compatibility verdict (JSON)."""
    for line in reversed(stdout.strip().splitlines()):
        try:
            data = json.loads(line)
        except ValueError:
            continue
        if isinstance(data, dict) and "verdict" in data:
            return data
    return None


def compatibility(model_path: Path, ep: str) -> tuple[str, str]:
    """(status, detail): onnxruntime's own answer for a compiled model and the ``ep`` devices here;
    ``NOT_CHECKED`` when the model carries no compatibility info or no device of that EP is present
    (bundle/epcontext/compat.py then verifies with a session)."""
    from winml_perf.bundle.epcontext.compat import ask_onnxruntime

    v = ask_onnxruntime(Path(model_path), ep)
    return ("NOT_CHECKED" if v.status in ("NO_INFO", "NO_DEVICE") else v.status), v.detail


def _discard(path: Path) -> None:
    for p in path.parent.glob(path.stem + "*"):
        p.unlink(missing_ok=True)


def _compile(src: str, out: str, ep: str, options_json: str, level: str) -> None:
    import onnxruntime as ort

    from winml_perf.session.onnx_options import graph_optimization_enum

    options = {str(k): str(v) for k, v in json.loads(options_json).items()}
    so = ort.SessionOptions()
    devices = [d for d in ort.get_ep_devices() if d.ep_name == ep]
    if devices:
        so.add_provider_for_devices(devices, options)
    elif ep != eps.CPU_EP:
        so.add_provider(ep, options)
    flags = ort.OrtCompileApiFlags.ERROR_IF_NO_NODES_COMPILED if _compiles(ep) else ort.OrtCompileApiFlags.NONE
    from winml_perf.bundle.epcontext.device_free_child import external_options

    ort.ModelCompiler(
        so,
        src,
        embed_compiled_data_into_model=False,
        flags=flags,
        graph_optimization_level=graph_optimization_enum(level),
        **external_options(src, out),  # a source near protobuf's 2 GB: its compiled model's weights in <out>.data
    ).compile_to_file(out)
    from winml_perf.bundle.epcontext.compat import check

    verdict = check(Path(out), ep, options, level=level)  # a compiled model that does not load is a failed compile
    if not verdict.fit:
        raise RuntimeError(f"the compiled model does not load with these options: {verdict.detail}")
    print(json.dumps(verdict.to_dict()))


def main(argv: list[str]) -> int:
    """The compile child (plugins already registered by child.py): 0 when ``OUT`` was written."""
    if len(argv) != 5:
        print("usage: SRC OUT EP OPTIONS_JSON LEVEL", file=sys.stderr)
        return 2
    return child.exit_status(lambda: _compile(*argv))
