"""Discover plugin execution-provider libraries and register them into onnxruntime and onnxruntime_genai.

Sources, in order of precedence (the first one that names an EP wins):

1. ``--ep-library NAME=PATH`` strings (``extra``), repeatable;
2. the ``WINML_PERF_EP_LIBRARIES`` environment variable: ``NAME=PATH`` entries separated by
   ``os.pathsep`` (``:`` on Linux/macOS, ``;`` on Windows);
3. installed plugin packages: importable top-level modules named ``onnxruntime_ep_*`` exposing
   ``get_library_path()`` and ``get_ep_name()`` (e.g. ``onnxruntime-ep-webgpu``). Only modules with
   that prefix are imported.

A NAME that spells a known EP (``webgpu``) is registered under its canonical name
(``WebGpuExecutionProvider``); any other NAME is used as given.

This module is the process's one plugin registry. ``register_plugin_eps`` is the only entry point
that registers; installed packages are discovered once per process. Everything else asks
``registered_plugins()`` / ``registered_specs()``; asking before anything was registered registers
the default sources (env + installed packages) first, so an answer never depends on call order.
The command edge registers its ``--ep-library`` flags before it asks; a child process registers
exactly the specs its parent hands it (child.py), with no discovery of its own.

Each library is registered once per process: onnxruntime and onnxruntime_genai keep separate
registries and both refuse a second registration, so this module remembers what it registered and
returns the same record on later calls. A failure (missing file, a library that does not load, the
same EP name asked for with two different paths) raises ``PluginError`` naming the path and the error.

Note on WebGPU: the plugin registers on a machine without a GPU, but then offers no EP device unless
``ORT_WEBGPU_EP_ALLOW_SOFTWARE_ADAPTER=1`` is set *before* registration; with it the device appears
with hardware type CPU (and running a session additionally needs a Vulkan driver such as lavapipe).
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping

from winml_perf.eps import is_known_ep, normalize_ep_name
from winml_perf.errors import PluginError, UsageError

ENV_VAR = "WINML_PERF_EP_LIBRARIES"
PACKAGE_PREFIX = "onnxruntime_ep_"


@dataclass(frozen=True)
class PluginSpec:
    """A library asked for: EP name, path, and where the request came from."""

    ep_name: str
    library_path: str
    origin: str  # 'flag' | 'env' | 'package:<module>'


@dataclass(frozen=True)
class PluginRegistration:
    ep_name: str
    library_path: str
    origin: str
    registration_ms: float
    registered_here: bool = True  # False when onnxruntime already had it (registered outside this module)

    def to_dict(self) -> dict:
        return {
            "ep_name": self.ep_name,
            "library_path": self.library_path,
            "origin": self.origin,
            "registration_ms": self.registration_ms,
            "registered_here": self.registered_here,
        }

    @classmethod
    def from_dict(cls, data: Mapping) -> "PluginRegistration":
        return cls(
            ep_name=data["ep_name"],
            library_path=data["library_path"],
            origin=data["origin"],
            registration_ms=float(data["registration_ms"]),
            registered_here=bool(data.get("registered_here", True)),
        )


_LOCK = threading.RLock()
_REGISTERED: dict[str, PluginRegistration] = {}
_STATE = {"settled": False, "discovered": None}  # settled: a registration has run; discovered: list[PluginSpec]


def registered_plugins() -> dict[str, PluginRegistration]:
    """EP name -> registration, for every plugin library this process registered; the default
    sources (env, installed packages) are registered first if nothing was registered yet."""
    with _LOCK:
        if not _STATE["settled"]:
            register_plugin_eps()
        return dict(_REGISTERED)


def registered_specs() -> tuple[str, ...]:
    """'NAME=PATH' of every registered library: what a child process is handed to register."""
    return tuple(f"{r.ep_name}={r.library_path}" for r in registered_plugins().values())


def _canonical_name(name: str) -> str:
    return normalize_ep_name(name) if is_known_ep(name) else name


def _origin_text(origin: str) -> str:
    return {"flag": "--ep-library", "env": ENV_VAR}.get(origin, origin)


def parse_library_spec(text: str, origin: str) -> PluginSpec:
    """``NAME=PATH`` -> PluginSpec; UsageError naming where the bad entry came from."""
    name, sep, path = text.partition("=")
    where = _origin_text(origin)
    if not sep or not name.strip() or not path.strip():
        raise UsageError(
            f"{where} entry {text!r} is not NAME=PATH",
            remedy="write e.g. WebGpuExecutionProvider=/path/to/libonnxruntime_providers_webgpu.so",
        )
    return PluginSpec(_canonical_name(name.strip()), path.strip(), origin)


def parse_env(env: Mapping[str, str] | None = None) -> list[PluginSpec]:
    value = (os.environ if env is None else env).get(ENV_VAR, "")
    return [parse_library_spec(entry, "env") for entry in value.split(os.pathsep) if entry.strip()]


def discover_plugin_packages() -> list[PluginSpec]:
    """Installed ``onnxruntime_ep_*`` modules -> PluginSpec per EP name they expose."""
    specs: list[PluginSpec] = []
    names = sorted({m.name for m in pkgutil.iter_modules() if m.name.startswith(PACKAGE_PREFIX)})
    for module_name in names:
        try:
            module = importlib.import_module(module_name)
            if not (hasattr(module, "get_library_path") and hasattr(module, "get_ep_name")):
                continue  # not a plugin EP package by the documented protocol
            path = str(module.get_library_path())
            ep_names = list(module.get_ep_names()) if hasattr(module, "get_ep_names") else [module.get_ep_name()]
        except Exception as exc:  # a broken plugin package must be visible, not skipped
            raise PluginError(
                f"plugin EP package {module_name} failed to report its library: {type(exc).__name__}: {exc}",
                remedy=f"reinstall or uninstall the package that provides {module_name}",
            ) from exc
        # One library, several EP names: register the library once under its first name.
        specs.append(PluginSpec(_canonical_name(ep_names[0]), path, f"package:{module_name}"))
    return specs


def collect_specs(extra: Iterable[str] = (), env: Mapping[str, str] | None = None, discover: bool = True) -> list[PluginSpec]:
    """Flag, env and discovered specs, deduplicated by EP name (first source wins)."""
    ordered = [parse_library_spec(s, "flag") for s in extra] + parse_env(env)
    if discover:
        ordered += _discovered()
    chosen: dict[str, PluginSpec] = {}
    for spec in ordered:
        first = chosen.get(spec.ep_name)
        if first is None:
            chosen[spec.ep_name] = spec
        elif first.origin == spec.origin and _same_path(first.library_path, spec.library_path) is False:
            raise UsageError(
                f"{spec.ep_name} is given twice with different libraries: {first.library_path} and {spec.library_path}",
                remedy="name each EP once in --ep-library / " + ENV_VAR,
            )
    return list(chosen.values())


def _discovered() -> list[PluginSpec]:
    """discover_plugin_packages(), run once per process (importing the packages costs tens of ms)."""
    with _LOCK:
        if _STATE["discovered"] is None:
            _STATE["discovered"] = discover_plugin_packages()
        return list(_STATE["discovered"])


def _same_path(a: str, b: str) -> bool:
    try:
        return Path(a).resolve() == Path(b).resolve()
    except OSError:
        return a == b


def _already_registered(exc: Exception) -> bool:
    return "already registered" in str(exc).lower()


def _register_one(spec: PluginSpec) -> PluginRegistration:
    path = Path(spec.library_path)
    if not path.is_file():
        raise PluginError(
            f"plugin EP library for {spec.ep_name} not found: {spec.library_path} (from {_origin_text(spec.origin)})",
            remedy="check the path given with --ep-library NAME=PATH or " + ENV_VAR,
        )
    import onnxruntime as ort
    import onnxruntime_genai as og

    start = time.perf_counter()
    registered_here = True
    try:
        ort.register_execution_provider_library(spec.ep_name, str(path))
    except Exception as exc:
        if not _already_registered(exc):
            raise PluginError(
                f"onnxruntime could not register plugin EP library {spec.library_path} as {spec.ep_name}: {exc}",
                remedy="check that the file is an onnxruntime plugin EP library built for this onnxruntime version",
            ) from exc
        registered_here = False
    try:
        og.register_execution_provider_library(spec.ep_name, str(path))
    except Exception as exc:
        if not _already_registered(exc):
            if registered_here:
                _try_unregister(ort, spec.ep_name)
            raise PluginError(
                f"onnxruntime_genai could not register plugin EP library {spec.library_path} as {spec.ep_name}: {exc}",
                remedy="check that onnxruntime-genai and the plugin are built for the same onnxruntime version",
            ) from exc
    elapsed_ms = (time.perf_counter() - start) * 1000.0
    return PluginRegistration(spec.ep_name, str(path), spec.origin, elapsed_ms, registered_here)


def _try_unregister(ort_module, name: str) -> None:
    try:
        ort_module.unregister_execution_provider_library(name)
    except Exception:  # best effort undo; the PluginError raised by the caller says what failed
        pass


def register_plugin_eps(
    extra: Iterable[str] = (), env: Mapping[str, str] | None = None, discover: bool = True
) -> list[PluginRegistration]:
    """Register every plugin EP library asked for (flags, env, installed packages); idempotent per process.

    The one entry point that registers. Returns one PluginRegistration per library, in the order
    the sources were read; a library registered by an earlier call returns its original record.
    """
    results: list[PluginRegistration] = []
    with _LOCK:
        specs = collect_specs(extra, env, discover)
        for spec in specs:
            known = _REGISTERED.get(spec.ep_name)
            if known is not None:
                if not _same_path(known.library_path, spec.library_path):
                    raise PluginError(
                        f"{spec.ep_name} is already registered from {known.library_path}; "
                        f"cannot also register {spec.library_path} (from {_origin_text(spec.origin)})",
                        remedy="onnxruntime allows one library per EP name per process; drop one of them",
                    )
                results.append(known)
                continue
            registration = _register_one(spec)
            _REGISTERED[spec.ep_name] = registration
            results.append(registration)
        _STATE["settled"] = True
    return results
