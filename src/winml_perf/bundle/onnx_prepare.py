"""Ahead-of-time prepare of a plain .onnx model for one EP: ``winml bundle prepare MODEL.onnx --ep X``.

What is written: for an EP that compiles (``eps.EPS[ep].compiles``: QNN, OpenVINO, VitisAI,
TensorRT-RTX) an EPContext model ``<stem>_<alias>_ctx.onnx`` (context binaries beside it); for any
other EP a plain model already optimised at ``graph_optimization_level`` for that EP,
``<stem>_<alias>_<level>.onnx``. Both come from onnxruntime's compile API (``ModelCompiler``), which
writes the graph without running it; initializers over 1 KiB go to ``<output>.data``. An EPContext
compile runs in a child process with a timeout (vendor compilers crash and hang); the optimised
graph is written in this process (it is the same optimiser every session creation runs).
A compile that fails is an error: nothing is written and nothing falls back.

Where and when (the derived-bundle rules of bundle/derive.py, whose primitives this reuses):
``derive.derived_root(<model dir>)`` (``<model dir>/_compiled/``, or the cache folder under
``$WINML_PERF_CACHE_DIR`` when the model's folder is not writable), in ``<stem>-<alias>-<hash12>/``
with a ``manifest.json``. ``derive.cache_key`` hashes: the EP, device class, kind, level, provider
options and session config; the identity (size, mtime_ns, inode; sha256 with ``verify_sources``)
of the model file and of every external-data file it names; ``derive.runtime_versions()``;
``derive.FORMAT_VERSION`` and ``FORMAT_VERSION`` here; and, for an optimised model at level
``layout``/``all`` (whose kernels and layouts depend on the CPU), the host's CPU model. It is built
in a temporary folder and renamed into place under a file lock; a folder is trusted only when its
manifest has the key and every file it lists is present, and an EPContext model only while
onnxruntime's compatibility check against the EP devices here does not ask for a recompile.

Load a prepared model with ``OnnxSession(prepared.path, ep=..., **prepared.session_options())``:
graph optimisation disabled, and the source model timed too for prepared-vs-unprepared creation.
"""

from __future__ import annotations

import hashlib
import json
import mmap
import os
import platform
import re
import shutil
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

from filelock import FileLock

from winml_perf import eps
from winml_perf.bundle import derive
from winml_perf.errors import BundleError, EPUnavailableError

FORMAT_VERSION = 1
KINDS = ("epcontext", "optimized")
EXTERNAL_THRESHOLD_BYTES = 1024
_LOCATION_TAG = b"\n\x08location\x12"  # StringStringEntryProto{key: "location", value: ...} in an ONNX file
_CHILD_FAILED = 3


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

    def session_options(self) -> dict:
        """Options to merge into ``SessionSpec.options`` / ``OnnxSession`` kwargs for this model."""
        return {"prepared": True, "source_model": str(self.source)}

    def to_dict(self) -> dict:
        return {
            "path": str(self.path), "source": str(self.source), "folder": str(self.folder), "kind": self.kind,
            "ep": self.ep, "device": self.device, "graph_optimization_level": self.graph_optimization_level,
            "key": self.key, "cache": self.cache, "cache_reason": self.cache_reason, "prepare_ms": self.prepare_ms,
            "compile_ms": self.compile_ms, "files": list(self.files), "warnings": list(self.warnings),
        }


# -- sources --------------------------------------------------------------------------------------
def external_data_files(model: Path) -> list[str]:
    """Relative paths of the external-data files the model names (existing ones), sorted.

    Found by scanning the file for ONNX's ``location`` entries (no protobuf parse, no weights read
    into memory); a match that names no existing file is ignored.
    """
    found: set[str] = set()
    with open(model, "rb") as f:
        try:
            data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except ValueError:  # empty file
            return []
        with data:
            pos = data.find(_LOCATION_TAG)
            while pos >= 0:
                start = pos + len(_LOCATION_TAG)
                length, start = _varint(data, start)
                if 0 < length < 4096:
                    rel = bytes(data[start:start + length]).decode("utf-8", "replace")
                    if (model.parent / rel).is_file():
                        found.add(rel)
                pos = data.find(_LOCATION_TAG, start)
    return sorted(found)


def _varint(data, pos: int) -> tuple[int, int]:
    value, shift = 0, 0
    while pos < len(data) and shift < 35:
        byte = data[pos]
        value |= (byte & 0x7F) << shift
        pos += 1
        if not byte & 0x80:
            return value, pos
        shift += 7
    return -1, pos


def source_identities(model: Path, verify: bool = False) -> list[dict]:
    out = []
    for rel in [model.name] + external_data_files(model):
        path = model.parent / rel
        st = path.stat()
        ident = {"file": rel, "size": st.st_size, "mtime_ns": st.st_mtime_ns, "inode": st.st_ino}
        if verify:
            ident["sha256"] = _file_sha256(path)
        out.append(ident)
    return out


def host_fingerprint() -> dict:
    cpu = platform.processor() or ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), cpu)
    except OSError:
        pass
    return {"machine": platform.machine(), "cpu": cpu}


# -- key ------------------------------------------------------------------------------------------
def key_components(model: Path, kind: str, target, level: str, provider_options: Mapping, session_config: Mapping,
                   verify: bool) -> dict:
    identities = source_identities(model, verify)
    comps = {
        "format_version": derive.FORMAT_VERSION, "onnx_prepare_format": FORMAT_VERSION, "kind": kind,
        "ep": target.ep, "device": target.device, "graph_optimization_level": level,
        "provider_options": dict(provider_options), "session_config": dict(session_config),
        "sources_sha256": hashlib.sha256(json.dumps(identities, sort_keys=True).encode()).hexdigest(),
        "versions": derive.runtime_versions(),
    }
    if kind == "optimized" and level in ("layout", "all"):
        comps["host"] = host_fingerprint()
    return {"components": comps, "identities": identities}


def output_name(model: Path, kind: str, ep: str, level: str) -> str:
    suffix = "ctx" if kind == "epcontext" else level
    return f"{model.stem}_{eps.ep_alias(ep)}_{suffix}.onnx"


# -- compile --------------------------------------------------------------------------------------
def compile_model(src: str, out: str, ep: str, device: str | None, level: str, provider_options: Mapping,
                  session_config: Mapping, require_nodes: bool) -> None:
    """One ModelCompiler call: ``src`` for ``ep`` on ``device`` -> ``out`` (+ ``out``.data)."""
    import onnxruntime as ort

    from winml_perf.session.onnx_options import graph_optimization_enum
    from winml_perf.session.onnx_session import ort_ep_devices

    so = ort.SessionOptions()
    for key, value in session_config.items():
        so.add_session_config_entry(str(key), str(value))
    devices = ort_ep_devices(ep, device) or ort_ep_devices(ep)
    if not devices:
        raise EPUnavailableError(f"onnxruntime offers no device for {ep} here; a model for it cannot be prepared on this machine",
                                 "prepare on a machine that has the EP (see `winml devices`)")
    so.add_provider_for_devices(devices[:1], {str(k): str(v) for k, v in provider_options.items()})
    flags = ort.OrtCompileApiFlags.ERROR_IF_NO_NODES_COMPILED if require_nodes else ort.OrtCompileApiFlags.NONE
    compiler = ort.ModelCompiler(
        so, str(src), embed_compiled_data_into_model=False,
        external_initializers_file_path=Path(out).name + ".data",
        external_initializers_size_threshold=EXTERNAL_THRESHOLD_BYTES,
        flags=flags, graph_optimization_level=graph_optimization_enum(level),
    )
    compiler.compile_to_file(str(out))


def _compile_in_child(args: list[str], timeout_s: float) -> None:
    cmd = [sys.executable, "-m", "winml_perf.bundle.onnx_prepare", *args]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise BundleError(f"compiling {args[0]} for {args[2]} took longer than {timeout_s:g} s",
                          "raise --compile-timeout, or run without prepare") from None
    if proc.returncode != 0:
        lines = [ln for ln in (proc.stderr or "").strip().splitlines() if ln.strip()]
        raise RuntimeError(lines[-1] if lines else f"compile child exited with status {proc.returncode}")


def _run_compile(model: Path, out: Path, kind: str, target, level: str, provider_options, session_config,
                 timeout_s: float, plugin_libraries: Sequence[str]) -> float:
    t0 = time.perf_counter()
    try:
        if kind == "epcontext":
            args = [str(model), str(out), target.ep, target.device or "", level, json.dumps(dict(provider_options)),
                    json.dumps(dict(session_config)), json.dumps(list(plugin_libraries))]
            _compile_in_child(args, timeout_s)
        else:
            compile_model(str(model), str(out), target.ep, target.device, level, provider_options, session_config, False)
    except (BundleError, EPUnavailableError):
        raise
    except Exception as exc:
        text = " ".join(str(exc).split())
        if "INVALID_PROTOBUF" in text or "Protobuf parsing failed" in text or "No graph was found" in text:
            raise BundleError(f"{model}: not an ONNX model (onnxruntime: {text})", "pass an .onnx model file") from exc
        raise BundleError(f"{model}: compiling for {target.ep} ({kind}) failed: {text}",
                          "run without prepare, or pick another --ep; nothing was written") from exc
    return _ms(t0)


# -- cache ----------------------------------------------------------------------------------------
def _read_manifest(folder: Path) -> dict | None:
    try:
        return json.loads((folder / derive.MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _fresh_problem(final: Path, key: str) -> str | None:
    if not final.exists():
        return "absent"
    manifest = _read_manifest(final)
    if manifest is None or manifest.get("key") != key:
        return f"{final.name} has no valid manifest (left by an interrupted or foreign prepare); rebuilding"
    missing = [f for f in manifest.get("files", []) if not (final / f).exists()]
    if missing:
        return f"{final.name} lacks {missing[0]}; rebuilding"
    if manifest.get("kind") == "epcontext":
        from winml_perf.bundle import compile as compiler

        status, detail = compiler.compatibility(final / manifest["output"], manifest["ep"])
        if status in compiler.RECOMPILE_STATUSES:
            return f"{manifest['output']} is {status} for the {eps.ep_alias(manifest['ep'])} devices here ({detail}); recompiling"
    return None


def _miss_reason(root: Path, prefix: str, comps: dict, stale: str) -> str:
    if stale != "absent":
        return stale
    olds = [(f.stat().st_mtime, f.name, m) for f in root.glob(f"{prefix}-*") if (m := _read_manifest(f)) and m.get("components")]
    if not olds:
        return "no prepared model for this route yet"
    _, other, manifest = max(olds, key=lambda t: t[0])
    old = manifest["components"]
    changed = sorted(k for k in comps.keys() & old.keys() if comps[k] != old[k]) or ["key"]
    what = {"sources_sha256": "source files", "versions": "runtime versions", "host": "host CPU"}
    return f"changed since {other}: " + ", ".join(what.get(k, k) for k in changed)


def _hit(final: Path, model: Path, manifest: dict, t0: float, reason: str) -> PreparedModel:
    return PreparedModel(final / manifest["output"], model, final, manifest["kind"], manifest["ep"], manifest.get("device"),
                         manifest["graph_optimization_level"], manifest["key"], "hit", reason, _ms(t0), 0.0,
                         tuple(manifest.get("files", [])))


def _publish(tmp: Path, final: Path, manifest: dict) -> tuple[str, ...]:
    files = sorted({os.path.relpath(os.path.join(d, f), tmp) for d, _, fs in os.walk(tmp) for f in fs} | {derive.MANIFEST})
    manifest = {**manifest, "files": files}
    (tmp / derive.MANIFEST).write_text(json.dumps(manifest, indent=2), encoding="utf-8")
    os.rename(tmp, final)
    return tuple(files)


def prepare_onnx(
    model_path: str | Path,
    target,
    graph_optimization_level: str = "all",
    *,
    provider_options: Mapping[str, str] | None = None,
    session_config: Mapping[str, str] | None = None,
    verify_sources: bool = False,
    compile_timeout_s: float = 600.0,
    plugin_libraries: Sequence[str] = (),
) -> PreparedModel:
    """The prepared model for ``target`` (a devices.Target of kind 'ep' or 'device'): reused when
    fresh, else compiled and published atomically (see the module doc). For a non-CPU EP, plugin
    EPs (installed packages, $WINML_PERF_EP_LIBRARIES, ``plugin_libraries`` 'NAME=PATH') are
    registered first, here and in the compile child."""
    from winml_perf.session.onnx_options import parse_graph_optimization_level

    t0 = time.perf_counter()
    model = Path(model_path).resolve()
    if not model.is_file():
        raise BundleError(f"{model_path}: model file not found", "pass the path of an .onnx file")
    if getattr(target, "ep", None) is None:
        raise BundleError("preparing a plain .onnx model needs an EP (--ep X or --device D)", "there is no genai_config.json to follow")
    level = parse_graph_optimization_level(graph_optimization_level)
    if target.ep != "CPUExecutionProvider":
        from winml_perf import plugins

        plugins.register_plugin_eps(list(plugin_libraries))  # idempotent; a plugin EP needs it before compiling
    provider_options, session_config = dict(provider_options or {}), dict(session_config or {})
    kind = "epcontext" if target.ep in eps.EPS and eps.EPS[target.ep].compiles else "optimized"
    keyed = key_components(model, kind, target, level, provider_options, session_config, verify_sources)
    key = derive.cache_key(keyed["components"])
    prefix = f"{model.stem}-{eps.ep_alias(target.ep)}"
    root = derive.derived_root(model.parent)
    final = root / f"{prefix}-{key[:12]}"
    if _fresh_problem(final, key) is None:
        return _hit(final, model, _read_manifest(final), t0, "fresh: a prepared model with this key exists")
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BundleError(f"cannot create {root}: {exc.strerror}", f"free space or set {derive.CACHE_ENV} to a writable folder") from exc
    with FileLock(str(root / f".{final.name}.lock")):
        stale = _fresh_problem(final, key)
        if stale is None:
            return _hit(final, model, _read_manifest(final), t0, "fresh: another process prepared it just now")
        reason = _miss_reason(root, prefix, keyed["components"], stale)
        for leftover in root.glob(f".tmp-{final.name}-*"):
            shutil.rmtree(leftover, ignore_errors=True)
        shutil.rmtree(final, ignore_errors=True)
        tmp = root / f".tmp-{final.name}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        out = output_name(model, kind, target.ep, level)
        try:
            tmp.mkdir()
            compile_ms = _run_compile(model, tmp / out, kind, target, level, provider_options, session_config,
                                      compile_timeout_s, plugin_libraries)
            manifest = {
                "format_version": derive.FORMAT_VERSION, "key": key, "name": final.name, "kind": kind, "ep": target.ep,
                "device": target.device, "graph_optimization_level": level, "output": out,
                "components": keyed["components"], "source": {"model": str(model), "files": keyed["identities"]},
                "target": target.to_dict(), "timings": {"compile_ms": compile_ms},
                "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            }
            files = _publish(tmp, final, manifest)
        except OSError as exc:
            shutil.rmtree(tmp, ignore_errors=True)
            raise BundleError(f"cannot write prepared model {final}: {exc.strerror or exc}",
                              f"free disk space, or set {derive.CACHE_ENV} to another folder; nothing half-made was kept") from exc
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    return PreparedModel(final / out, model, final, kind, target.ep, target.device, level, key, "miss", reason,
                         _ms(t0), compile_ms, files)


def clean_onnx(model_path: str | Path) -> list[Path]:
    """Remove the prepared copies of this one model (``<stem>-*`` under ``_compiled/`` and the cache
    folder), leaving other models of the same folder alone. Returns what went."""
    model = Path(model_path).resolve()
    mine = re.compile(rf"^\.?{re.escape(model.stem)}-[^-]+-[0-9a-f]{{12}}(\.lock)?$")
    removed = []
    for root in (model.parent / derive.COMPILED_DIR, derive.cache_root(model.parent)):
        for path in sorted(root.glob(f"*{model.stem}-*")):
            if not mine.match(path.name):
                continue
            try:
                shutil.rmtree(path) if path.is_dir() else path.unlink()
            except OSError as exc:
                raise BundleError(f"cannot remove {path}: {exc.strerror}", "check its permissions") from exc
            removed.append(path)
    return removed


def _file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def _ms(t0: float) -> float:
    return round((time.perf_counter() - t0) * 1000.0, 3)


# -- child entry: python -m winml_perf.bundle.onnx_prepare SRC OUT EP DEVICE LEVEL OPTS CONFIG PLUGINS --
def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 8:
        print("usage: python -m winml_perf.bundle.onnx_prepare SRC OUT EP DEVICE LEVEL OPTIONS_JSON CONFIG_JSON PLUGINS_JSON",
              file=sys.stderr)
        return 2
    src, out, ep, device, level, options, config, plugin_libs = args
    try:
        from winml_perf import plugins

        plugins.register_plugin_eps(json.loads(plugin_libs))
    except Exception as exc:  # reported; it only matters if it was the EP being compiled for
        print(f"plugin registration: {exc}", file=sys.stderr)
    try:
        compile_model(src, out, ep, device or None, level, json.loads(options), json.loads(config), True)
    except Exception as exc:
        print(f"{type(exc).__name__}: {' '.join(str(exc).split())}", file=sys.stderr)
        return _CHILD_FAILED
    return 0


if __name__ == "__main__":
    sys.exit(main())
