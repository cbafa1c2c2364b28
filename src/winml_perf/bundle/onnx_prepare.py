"""Ahead-of-time prepare of a plain .onnx model for one EP: ``winml bundle prepare MODEL.onnx --ep X``.

What is written: for an EP that compiles (``eps.compiles(ep)``: QNN, OpenVINO, VitisAI,
TensorRT-RTX) an EPContext model ``<stem>_<alias>_ctx.onnx`` (context binaries beside it); for any
other EP a plain model already optimised at ``graph_optimization_level`` for that EP,
``<stem>_<alias>_<level>.onnx``. Both come from onnxruntime's compile API (``ModelCompiler``), which
writes the graph without running it; initializers over 1 KiB go to ``<output>.data``. An EPContext
compile runs in a child process with a timeout (vendor compilers crash and hang); the optimised
graph is written in this process (it is the same optimiser every session creation runs).
A compile that fails is an error: nothing is written and nothing falls back. So is an output that
does not load on the EP with its provider options at the level it is loaded at (disable): each is
load-checked before it is published.

Where and when: in the artifact cache (cache.py), as ``<stem>-<alias>-<hash12>/`` under the model
folder's ``_compiled/`` (or its cache folder when the folder is not writable). The key covers the EP,
device class, kind, level, provider options and session config; the identity of the model file and
of every external-data file it names; and, for an optimised model at level ``layout``/``all``
(whose kernels and layouts depend on the CPU), the host's CPU model; the cache adds the runtime
versions and its format. An EPContext model is trusted only while onnxruntime's compatibility check
against the EP devices here does not ask for a recompile and a session with the run's options loads it
(a verdict kept in the folder's compat.json); a prepare with ``device_free`` opens no session. Each
EPContext model's provenance (device-free or on-device, EP package, version, SDK, target options,
compatibility info) is kept in the folder's prepared.json, and ``compatibility`` says whether this
machine matches it (bundle/epcontext/onnx_reuse.py).

Load a prepared model with ``OnnxSession(prepared.path, ep=..., **prepared.session_options())``:
graph optimisation disabled, and the source model timed too for prepared-vs-unprepared creation.
"""

from __future__ import annotations

import json
import platform
import re
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from winml_perf.bundle import cache
from winml_perf.ep import child
from winml_perf.ep import table as eps
from winml_perf.onnxfile.external_data import model_files
from winml_perf.onnxfile.integrity import not_a_model_file
from winml_perf.support.errors import BundleError, EPUnavailableError
from winml_perf.support.json_shapes import Opt

if TYPE_CHECKING:
    from winml_perf.ep.devices import Target

FORMAT_VERSION = 2  # 2: a compiled model's provenance in prepared.json
KINDS = ("epcontext", "optimized")
SHAPE = {"kind": str, "ep": str, "device": Opt(str), "output": str, "graph_optimization_level": str}
EXTERNAL_THRESHOLD_BYTES = 1024


@dataclass(frozen=True)
class PreparedModel:
    path: Path  # the model file to load
    source: Path
    folder: Path
    kind: str  # "epcontext" | "optimized"
    ep: str
    device: str | None
    graph_optimization_level: str
    key: str
    cache: str  # "hit" | "miss"
    cache_reason: str
    prepare_ms: float
    compile_ms: float
    files: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    compatibility: dict[str, Any] | None = (
        None  # an EPContext model's verdict here and how it was made (epcontext/onnx_reuse.py)
    )

    def session_options(self) -> dict[str, Any]:
        """Options to merge into ``SessionSpec.options`` / ``OnnxSession`` kwargs for this model."""
        return {"prepared": True, "source_model": str(self.source)}

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "source": str(self.source),
            "folder": str(self.folder),
            "kind": self.kind,
            "ep": self.ep,
            "device": self.device,
            "graph_optimization_level": self.graph_optimization_level,
            "key": self.key,
            "cache": self.cache,
            "cache_reason": self.cache_reason,
            "prepare_ms": self.prepare_ms,
            "compile_ms": self.compile_ms,
            "files": list(self.files),
            "warnings": list(self.warnings),
            "compatibility": self.compatibility,
        }


# -- sources --------------------------------------------------------------------------------------
def host_fingerprint() -> dict[str, Any]:
    cpu = platform.processor() or ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), cpu)
    except OSError:
        pass
    return {"machine": platform.machine(), "cpu": cpu}


# -- key ------------------------------------------------------------------------------------------
def settings(
    model: Path,
    kind: str,
    target: Target,
    level: str,
    provider_options: Mapping[str, Any],
    session_config: Mapping[str, Any],
) -> dict[str, Any]:
    """What decides a prepared model besides its sources (the cache adds versions and identities)."""
    out = {
        "onnx_prepare_format": FORMAT_VERSION,
        "kind": kind,
        "ep": target.ep,
        "device": target.device,
        "graph_optimization_level": level,
        "provider_options": dict(provider_options),
        "session_config": dict(session_config),
    }
    if kind == "optimized" and level in ("layout", "all"):
        out["host"] = host_fingerprint()
    return out


def output_name(model: Path, kind: str, ep: str, level: str) -> str:
    suffix = "ctx" if kind == "epcontext" else level
    return f"{model.stem}_{eps.ep_alias(ep)}_{suffix}.onnx"


# -- compile --------------------------------------------------------------------------------------
def compile_model(
    src: str,
    out: str,
    ep: str,
    device: str | None,
    level: str,
    provider_options: Mapping[str, Any],
    session_config: Mapping[str, Any],
    require_nodes: bool,
) -> None:
    """One ModelCompiler call: ``src`` for ``ep`` on ``device`` -> ``out`` (+ ``out``.data)."""
    import onnxruntime as ort

    from winml_perf.session.onnx_options import graph_optimization_enum
    from winml_perf.session.onnx_session import ort_ep_devices

    so = ort.SessionOptions()
    for key, value in session_config.items():
        so.add_session_config_entry(str(key), str(value))
    devices = ort_ep_devices(ep, device) or ort_ep_devices(ep)
    if not devices:
        raise EPUnavailableError(
            f"onnxruntime offers no device for {ep} here; a model for it cannot be prepared on this machine",
            "prepare on a machine that has the EP (see `winml devices`)",
        )
    so.add_provider_for_devices(devices[:1], {str(k): str(v) for k, v in provider_options.items()})
    flags = ort.OrtCompileApiFlags.ERROR_IF_NO_NODES_COMPILED if require_nodes else ort.OrtCompileApiFlags.NONE
    compiler = ort.ModelCompiler(
        so,
        str(src),
        embed_compiled_data_into_model=False,
        external_initializers_file_path=Path(out).name + ".data",
        external_initializers_size_threshold=EXTERNAL_THRESHOLD_BYTES,
        flags=flags,
        graph_optimization_level=graph_optimization_enum(level),
    )
    compiler.compile_to_file(str(out))
    from winml_perf.bundle.epcontext.compat import load_error

    # A prepared model is loaded with optimisation disabled (OnnxSession): one that fails there is no model.
    error = load_error(Path(out), ep, provider_options, "disable")
    if error is not None:
        raise RuntimeError(f"the prepared model does not load on {ep} with these options: {error}")


CHILD_MODULE = "winml_perf.bundle.onnx_prepare"  # the module the compile child runs (its main())


def _compile_in_child(args: list[str], timeout_s: float) -> None:
    result = child.run_module(CHILD_MODULE, args, child.ChildContext.from_parent(), timeout_s)
    if result.exit.timed_out:
        raise BundleError(
            f"compiling {args[0]} for {args[2]} took longer than {timeout_s:g} s",
            "raise --compile-timeout, or run without prepare",
        )
    if not result.ok:
        from winml_perf.bundle.epcontext.compile import capability_error

        raise RuntimeError(capability_error(result.stderr, args[2]) or result.failure())


def _run_compile(
    model: Path,
    out: Path,
    kind: str,
    target: Target,
    level: str,
    provider_options: Mapping[str, Any],
    session_config: Mapping[str, Any],
    timeout_s: float,
) -> float:
    assert target.ep is not None  # prepare_onnx refuses a target without an EP
    t0 = time.perf_counter()
    try:
        if kind == "epcontext":
            args = [
                str(model),
                str(out),
                target.ep,
                target.device or "",
                level,
                json.dumps(dict(provider_options)),
                json.dumps(dict(session_config)),
            ]
            _compile_in_child(args, timeout_s)
        else:
            compile_model(
                str(model), str(out), target.ep, target.device, level, provider_options, session_config, False
            )
    except (BundleError, EPUnavailableError):
        raise
    except Exception as exc:
        text = " ".join(str(exc).split())
        if "INVALID_PROTOBUF" in text or "Protobuf parsing failed" in text or "No graph was found" in text:
            raise BundleError(f"{model}: not an ONNX model (onnxruntime: {text})", "pass an .onnx model file") from exc
        raise BundleError(
            f"{model}: compiling for {target.ep} ({kind}) failed: {text}",
            "run without prepare, or pick another --ep; nothing was written",
        ) from exc
    return _ms(t0)


# -- cache ----------------------------------------------------------------------------------------
def _valid(folder: Path, manifest: dict[str, Any]) -> str | None:
    """None for a known kind whose output is one of its files."""
    if manifest["kind"] not in KINDS:
        return f"{folder.name} has no valid manifest (kind {manifest['kind']!r} is not one of {', '.join(KINDS)}); rebuilding"
    if manifest["output"] not in manifest["files"]:
        return f"{folder.name} has no valid manifest (its output {manifest['output']!r} is not one of its files); rebuilding"
    return None


def _fits(device_free: bool, provider_options: Mapping[str, str], seen: dict[str, Any]) -> cache.Check:
    """The cache's check: a valid manifest, and (with a device here) a compiled model fit for it."""
    from winml_perf.bundle.epcontext.onnx_reuse import fits_check

    here = None if device_free else fits_check(provider_options, seen)
    return lambda folder, manifest: _valid(folder, manifest) or (here(folder, manifest) if here else None)


@dataclass(frozen=True)
class EpSettings:
    """What the EP and its session are handed besides the graph (both in the cache key): the EP's
    provider options and the session config entries."""

    provider_options: Mapping[str, str] = field(default_factory=dict)
    session_config: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class OnnxBuild:
    """How a prepared model missing from the cache (or not fit here) comes to be. ``compile_timeout_s``:
    seconds an EPContext compile child may take. ``device_free``: compiled on the EP's virtual device
    (bundle/epcontext/device_free.py), trusted on a hit without asking the devices here. ``importer(tmp,
    output)``: writes the model from an export instead of compiling (bundle/epcontext/export_onnx.py) and
    returns its compat verdict here. ``no_recompile``: a model not prepared, or not fit here, is exit 2
    saying why, and nothing is compiled."""

    compile_timeout_s: float = 600.0
    device_free: bool = False
    importer: Callable[[Path, str], Any] | None = None
    no_recompile: bool = False


def prepare_onnx(
    model_path: str | Path,
    target: Target,
    graph_optimization_level: str = "all",
    *,
    ep_settings: EpSettings | None = None,
    build: OnnxBuild | None = None,
    verify_sources: bool = False,
    plugin_libraries: Sequence[str] = (),
) -> PreparedModel:
    """The prepared model for ``target`` (a devices.Target of kind 'ep' or 'device') at
    ``graph_optimization_level`` (a short name, parsed where the request was made:
    session/onnx_options.py): reused when fresh, else made as ``build`` says (compiled, by default)
    and published atomically (see the module doc). For a non-CPU EP, plugin EPs (installed packages,
    $WINML_PERF_EP_LIBRARIES, ``plugin_libraries`` 'NAME=PATH') are registered here first; the
    compile child registers what this process has."""
    t0 = time.perf_counter()
    build = build or OnnxBuild()
    model = Path(model_path).resolve()
    unusable = not_a_model_file(Path(model_path))
    if unusable is not None:
        raise unusable
    if target.ep is None:
        raise BundleError(
            "preparing a plain .onnx model needs an EP (--ep X or --device D)",
            "there is no genai_config.json to follow",
        )
    level = graph_optimization_level
    if target.ep != eps.CPU_EP:
        from winml_perf.ep import plugins

        plugins.register_plugin_eps(list(plugin_libraries))  # idempotent; a plugin EP needs it before compiling
    asked = ep_settings or EpSettings()
    given = EpSettings(dict(asked.provider_options or {}), dict(asked.session_config or {}))
    kind = "epcontext" if eps.compiles(target.ep) else "optimized"
    sources = cache.source_identities(model.parent, model_files(model), verify_sources)
    request = cache.Request(
        model.parent,
        f"{model.stem}-{eps.ep_alias(target.ep)}",
        "prepared model",
        settings(model, kind, target, level, given.provider_options, given.session_config),
        sources,
        shape=SHAPE,
    )
    made = _Making(model, output_name(model, kind, target.ep, level), kind, target, level, given, build)
    check = _fits(build.device_free, given.provider_options, made.seen)
    if build.no_recompile:
        from winml_perf.bundle.epcontext.travel import require_fresh

        require_fresh(request, check)
    entry = cache.get_or_build(request, made.build, check)
    return _prepared(entry, made, t0)


@dataclass
class _Making:
    """One prepare's model being made: what the cache's build writes, and what it saw (compile time, a verdict)."""

    model: Path
    out: str
    kind: str
    target: Any
    level: str
    settings: EpSettings
    how: OnnxBuild
    timing: dict[str, Any] = field(default_factory=dict)
    # the verdict the cache's check reached on a hit, or the importer's
    seen: dict[str, Any] = field(default_factory=dict)

    def build(self, tmp: Path) -> dict[str, Any]:
        model, out, target, level, how = self.model, self.out, self.target, self.level, self.how
        provider_options, session_config = self.settings.provider_options, self.settings.session_config
        if how.importer is not None:
            self.seen["verdict"] = how.importer(tmp, out)
        elif how.device_free:
            from winml_perf.bundle.epcontext.device_free import compile_plain

            args = (target.ep, level, provider_options, session_config, how.compile_timeout_s)
            self.timing["compile_ms"] = compile_plain(model, tmp / out, *args)
        else:
            self.timing["compile_ms"] = _run_compile(
                model, tmp / out, self.kind, target, level, provider_options, session_config, how.compile_timeout_s
            )
            if self.kind == "epcontext":
                _write_made_here(tmp / out, model, target.ep, provider_options, session_config)
        return {
            "kind": self.kind,
            "ep": target.ep,
            "device": target.device,
            "graph_optimization_level": level,
            "output": out,
            "source": {"model": str(model)},
            "target": target.to_dict(),
            "timings": dict(self.timing),
        }


def _prepared(entry: cache.Entry, made: _Making, t0: float) -> PreparedModel:
    """The cache entry as a PreparedModel, with an EPContext model's compatibility here."""
    m = entry.manifest
    compatibility = None
    if m["kind"] == "epcontext":
        from winml_perf.bundle.epcontext import onnx_reuse

        provider_options = made.settings.provider_options
        verdict = made.seen.get("verdict")
        if entry.cache == "miss" and not made.how.device_free and made.how.importer is None:
            # compiled here: the compile's load check passed
            verdict = onnx_reuse.compiled_verdict(entry.folder, m["output"], m["ep"], provider_options)
        compatibility = onnx_reuse.compatibility(entry.folder, m["output"], m["ep"], provider_options, verdict)
    return PreparedModel(
        entry.folder / m["output"],
        made.model,
        entry.folder,
        m["kind"],
        m["ep"],
        m.get("device"),
        m["graph_optimization_level"],
        entry.key,
        entry.cache,
        entry.reason,
        _ms(t0),
        made.timing.get("compile_ms", 0.0),
        tuple(m["files"]),
        compatibility=compatibility,
    )


def _write_made_here(
    output: Path, model: Path, ep: str, provider_options: Mapping[str, Any], session_config: Mapping[str, Any]
) -> None:
    from winml_perf.bundle.epcontext import provenance

    strict = str(session_config.get("session.disable_cpu_ep_fallback")) == "1"
    provenance.write(
        output.parent, {output.name: provenance.made_here(output, [model.stem], ep, provider_options, strict)}
    )


def clean_onnx(model_path: str | Path, on_wait: Callable[[Path], None] | None = None) -> list[Path]:
    """Remove the prepared copies of this one model (``<stem>-<alias>-<hash12>`` under ``_compiled/``
    and the cache folder), leaving other models of the same folder alone. Returns what went."""
    model = Path(model_path).resolve()
    return cache.clean(model.parent, rf"{re.escape(model.stem)}-[^-]+", on_wait=on_wait)


def _ms(t0: float) -> float:
    return round((time.perf_counter() - t0) * 1000.0, 3)


# -- child entry: python -m winml_perf.ep.child winml_perf.bundle.onnx_prepare SRC OUT EP DEVICE LEVEL OPTS CONFIG --
def main(argv: list[str]) -> int:
    """Compile in a child the runner started (plugins registered by it); 0 on success."""
    if len(argv) != 7:
        print("usage: SRC OUT EP DEVICE LEVEL OPTIONS_JSON CONFIG_JSON", file=sys.stderr)
        return 2
    src, out, ep, device, level, options, config = argv
    return child.exit_status(
        lambda: compile_model(src, out, ep, device or None, level, json.loads(options), json.loads(config), True)
    )
