"""Discover plugin execution-provider libraries and register them into onnxruntime and onnxruntime_genai.

Sources, in order of precedence (the first one that names an EP wins):

1. ``--ep-library NAME=PATH`` strings (``extra``), repeatable;
2. the ``WINML_PERF_EP_LIBRARIES`` environment variable: ``NAME=PATH`` entries separated by
   ``os.pathsep`` (``:`` on Linux/macOS, ``;`` on Windows);
3. installed plugin packages, found by protocol whatever their module is called: an installed
   distribution named ``onnxruntime-*`` or requiring ``onnxruntime`` whose top-level module exposes
   ``get_library_path()`` and ``get_ep_name()`` (``onnxruntime-ep-webgpu`` -> ``onnxruntime_ep_webgpu``,
   ``onnxruntime-qnn`` -> ``onnxruntime_qnn``). Only those candidates' modules are imported (a few ms),
   never onnxruntime or onnxruntime_genai themselves. ``WINML_PERF_NO_PLUGIN_DISCOVERY=1`` turns this
   source off (flags and the env var still count).

``plugin_identity(ep)`` (``identity_of`` its registration) says what a discovered plugin is: package,
version, SDK version (e.g. ``onnxruntime_qnn.build_and_package_info.qnn_version``) and the library's
sha256 (hashed once per path, size and mtime). It goes into the environment record; ``plugins_here``
registers a command's plugins and says what each is, once, for its derived-bundle keys.

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
returns the same record on later calls. A library that is missing or does not load raises
``PluginError`` naming the path and the error (exit 2) when ``--ep-library`` named it; one from the
env or an installed package is skipped with a warning on stderr, once, so a command that asks
nothing of that EP still runs, and a route that asks for it later fails naming the library
(``refuse_if_skipped``). The same EP name asked for with two different paths, from any source, is
``PluginError``: which one was meant cannot be guessed.

Note on WebGPU: the plugin registers on a machine without a GPU, but then offers no EP device unless
``ORT_WEBGPU_EP_ALLOW_SOFTWARE_ADAPTER=1`` is set *before* registration; with it the device appears
with hardware type CPU (and running a session additionally needs a Vulkan driver such as lavapipe).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import importlib.util
import os
import re
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

from winml_perf.ep.package_facts import module_version as _module_version
from winml_perf.ep.package_facts import package_holding
from winml_perf.ep.package_facts import sdk_version as _sdk_version
from winml_perf.ep.table import canonical_or_own
from winml_perf.support.errors import PluginError, UsageError

ENV_VAR = "WINML_PERF_EP_LIBRARIES"
NO_DISCOVERY_ENV = "WINML_PERF_NO_PLUGIN_DISCOVERY"
PACKAGE_PREFIX = "onnxruntime_ep_"  # the documented module prefix; other modules are found by their distribution
#: Modules of onnxruntime itself: never candidates (importing them costs 100+ ms and they are no plugin).
NOT_PLUGINS = frozenset({"onnxruntime", "onnxruntime_genai", "onnx"})


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

    @property
    def spec(self) -> str:
        """``EP=LIBRARY``, as a route's session hands it to a child process."""
        return f"{self.ep_name}={self.library_path}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "ep_name": self.ep_name,
            "library_path": self.library_path,
            "origin": self.origin,
            "registration_ms": self.registration_ms,
            "registered_here": self.registered_here,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PluginRegistration:
        return cls(
            ep_name=data["ep_name"],
            library_path=data["library_path"],
            origin=data["origin"],
            registration_ms=float(data["registration_ms"]),
            registered_here=bool(data.get("registered_here", True)),
        )


_LOCK = threading.RLock()
_REGISTERED: dict[str, PluginRegistration] = {}
_SKIPPED: dict[str, PluginError] = {}  # EP name -> why its library (env, package) did not register


class _State(TypedDict):
    settled: bool  # a registration has run
    discovered: list[PluginSpec] | None  # discover_plugin_packages(), once per process


_STATE: _State = {"settled": False, "discovered": None}


def registered_plugins() -> dict[str, PluginRegistration]:
    """EP name -> registration, for every plugin library this process registered; the default
    sources (env, installed packages) are registered first if nothing was registered yet."""
    with _LOCK:
        if not _STATE["settled"]:
            register_plugin_eps()
        return dict(_REGISTERED)


def skipped_plugins() -> dict[str, PluginError]:
    """EP name -> why its plugin library, from the env or an installed package, did not register (it
    was skipped with a warning); the default sources are registered first if nothing was yet."""
    with _LOCK:
        if not _STATE["settled"]:
            register_plugin_eps()
        return dict(_SKIPPED)


def refuse_if_skipped(ep: str) -> None:
    """Raise PluginError (exit 2) when ``ep``, now asked for, is a plugin EP whose library was skipped."""
    failed = skipped_plugins().get(ep)
    if failed is not None:
        raise PluginError(
            f"{ep} was asked for, but its plugin EP library did not load: {failed.message}", failed.remedy
        )


def registered_specs() -> tuple[str, ...]:
    """'NAME=PATH' of every registered library: what a child process is handed to register."""
    return tuple(f"{r.ep_name}={r.library_path}" for r in registered_plugins().values())


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
    return PluginSpec(canonical_or_own(name.strip()), path.strip(), origin)


def parse_env(env: Mapping[str, str] | None = None) -> list[PluginSpec]:
    value = (os.environ if env is None else env).get(ENV_VAR, "")
    return [parse_library_spec(entry, "env") for entry in value.split(os.pathsep) if entry.strip()]


_REQUIRES_ORT = re.compile(rb"^Requires-Dist:\s*onnxruntime(?![\w.-])", re.MULTILINE | re.IGNORECASE)


def _dist_infos() -> list[Path]:
    """Every ``*.dist-info`` folder on sys.path (listed, not parsed: parsing all METADATA costs ~70 ms)."""
    import sys

    found = []
    for entry in sys.path:
        try:
            with os.scandir(entry or ".") as it:
                found += [Path(e.path) for e in it if e.name.endswith(".dist-info") and e.is_dir()]
        except OSError:
            continue
    return found


def _top_level_modules(info: Path) -> list[str]:
    """A distribution's top-level import names: top_level.txt, else the folders its RECORD lists."""
    try:
        return [line.strip() for line in (info / "top_level.txt").read_text().splitlines() if line.strip()]
    except OSError:
        pass
    names = set()
    try:
        for line in (info / "RECORD").read_text().splitlines():
            first = line.split(",", 1)[0].split("/", 1)[0]
            if first and "/" in line.split(",", 1)[0] and not first.endswith((".dist-info", ".data")) and first != "..":
                names.add(first)
    except OSError:
        pass
    return sorted(names)


def candidate_modules() -> list[tuple[str, str, str]]:
    """(module, distribution, version) of installed distributions that may be plugin EP packages:
    named ``onnxruntime-*`` or requiring onnxruntime, plus importable ``onnxruntime_ep_*`` modules
    that no distribution claims (a folder on sys.path)."""
    out: dict[str, tuple[str, str, str]] = {}
    for info in _dist_infos():
        name, _, version = info.name[: -len(".dist-info")].partition("-")
        if not name.lower().startswith("onnxruntime"):
            try:
                with open(info / "METADATA", "rb") as f:
                    if not _REQUIRES_ORT.search(f.read(1 << 16)):
                        continue
            except OSError:
                continue
        for module in _top_level_modules(info):
            if module not in NOT_PLUGINS and not module.startswith("_"):
                out.setdefault(module, (module, name.replace("_", "-"), version))
    import pkgutil

    for m in pkgutil.iter_modules():
        if m.name.startswith(PACKAGE_PREFIX) and m.name not in out:
            out[m.name] = (m.name, "", "")
    return sorted(out.values())


def _may_be_plugin(module_name: str) -> bool:
    """True when the module's own file defines ``get_library_path`` (read, not imported: importing a
    package that merely depends on onnxruntime could cost seconds)."""
    try:
        spec = importlib.util.find_spec(module_name)
    except (ImportError, ValueError):
        return False
    if spec is None or not spec.origin or not os.path.isfile(spec.origin):
        return False
    try:
        with open(spec.origin, "rb") as f:
            return b"get_library_path" in f.read(1 << 20)
    except OSError:
        return False


def discover_plugin_packages() -> list[PluginSpec]:
    """Installed plugin EP packages (see the module doc) -> one PluginSpec per library."""
    specs: list[PluginSpec] = []
    for module_name, dist_name, version in candidate_modules():
        if not _may_be_plugin(module_name):
            continue
        try:
            module = importlib.import_module(module_name)
            if not (
                callable(getattr(module, "get_library_path", None)) and callable(getattr(module, "get_ep_name", None))
            ):
                continue  # not a plugin EP package by the documented protocol
            path = str(module.get_library_path())
            ep_names = list(module.get_ep_names()) if hasattr(module, "get_ep_names") else [module.get_ep_name()]
        except Exception as exc:  # a broken plugin package must be visible, not skipped
            raise PluginError(
                f"plugin EP package {module_name} failed to report its library: {type(exc).__name__}: {exc}",
                remedy=f"reinstall or uninstall the package that provides {module_name}",
            ) from exc
        ep = canonical_or_own(ep_names[0])
        _PACKAGES[ep] = {
            "package": dist_name or module_name,
            "module": module_name,
            "version": version or _module_version(module),
            "sdk_version": _sdk_version(module),
        }
        # One library, several EP names: register the library once under its first name.
        specs.append(PluginSpec(ep, path, f"package:{module_name}"))
    return specs


_PACKAGES: dict[str, dict[str, Any]] = {}  # EP name -> package facts of the discovered plugin
_DIGESTS: dict[tuple[Any, ...], str] = {}  # (path, size, mtime_ns) -> sha256


def library_digest(path: str) -> str | None:
    """sha256 of a library file, computed once per (path, size, mtime) in this process."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    key = (os.path.realpath(path), st.st_size, st.st_mtime_ns)
    if key not in _DIGESTS:
        h = hashlib.sha256()
        with open(path, "rb") as f:
            while chunk := f.read(1 << 20):
                h.update(chunk)
        _DIGESTS[key] = h.hexdigest()
    return _DIGESTS[key]


def plugin_identity(ep_name: str) -> dict[str, Any] | None:
    """What the registered plugin library of ``ep_name`` is (``identity_of``), or None when no plugin
    library serves that EP in this process."""
    reg = registered_plugins().get(ep_name)
    return None if reg is None else identity_of(reg)


def identity_of(reg: PluginRegistration) -> dict[str, Any]:
    """What the registered library ``reg`` is: package, version, SDK version, library path and sha256."""
    facts = _PACKAGES.get(reg.ep_name) if reg.origin.startswith("package:") else None
    facts = facts or _package_of_library(reg.library_path)
    unknown = None
    if facts is None:  # given by path: read the package whose folder holds the library, else say why not
        facts, unknown = package_holding(reg.library_path)
    return {
        "ep_name": reg.ep_name,
        **(facts or {"package": None, "module": None, "version": None, "sdk_version": None}),
        **({"package_unknown": unknown} if unknown else {}),
        "library_path": reg.library_path,
        "library_sha256": library_digest(reg.library_path),
        "origin": reg.origin,
    }


def _package_of_library(path: str) -> dict[str, Any] | None:
    """Package facts for a library given by flag or env that lies inside a discovered package."""
    for ep, facts in _PACKAGES.items():
        spec = next((s for s in (_STATE["discovered"] or ()) if s.ep_name == ep), None)
        if spec is not None and _same_path(spec.library_path, path):
            return facts
    return None


def plugin_identities() -> list[dict[str, Any]]:
    """identity_of() every registered plugin library, by EP name."""
    return [identity_of(reg) for _, reg in sorted(registered_plugins().items())]


@dataclass(frozen=True)
class PluginsHere:
    """The plugin EP libraries a command registered (``register_plugin_eps``: its ``--ep-library``
    flags, the env, installed packages), once a command: each as ``EP=LIBRARY`` (what a route's session
    hands a child), what registering took, and what each library is (``identity_of``), by EP name:
    what a derived bundle's key holds (bundle/derive.py)."""

    specs: tuple[str, ...] = ()
    ms: float = 0.0
    identities: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)


def plugins_here(extra: Iterable[str] = ()) -> PluginsHere:
    """Register the plugin EP libraries (``extra``: the ``--ep-library`` flags; the env and installed
    packages too), then say what each is: a command's one ask."""
    t0 = time.perf_counter()
    registrations = register_plugin_eps(list(extra))
    ms = round((time.perf_counter() - t0) * 1000.0, 3)
    identities = {r.ep_name: identity_of(r) for r in sorted(registrations, key=lambda r: r.ep_name)}
    return PluginsHere(tuple(r.spec for r in registrations), ms, identities)


def collect_specs(
    extra: Iterable[str] = (), env: Mapping[str, str] | None = None, discover: bool = True
) -> list[PluginSpec]:
    """Flag, env and discovered specs, deduplicated by EP name (first source wins)."""
    ordered = [parse_library_spec(s, "flag") for s in extra] + parse_env(env)
    if discover and os.environ.get(NO_DISCOVERY_ENV, "") not in ("1", "true", "yes"):
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
        discovered = _STATE["discovered"]
        if discovered is None:
            discovered = _STATE["discovered"] = discover_plugin_packages()
        return list(discovered)


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
            remedy="check the path, " + _drop_remedy(spec),
        )
    import onnxruntime as ort
    import onnxruntime_genai as og

    start = time.perf_counter()
    registered_here = True
    try:
        with _registration_warnings_muted(ort):
            ort.register_execution_provider_library(spec.ep_name, str(path))
    except Exception as exc:
        if not _already_registered(exc):
            raise PluginError(
                f"onnxruntime could not register plugin EP library {spec.library_path} as {spec.ep_name} "
                f"(from {_origin_text(spec.origin)}): {exc}",
                remedy="check that the file is an onnxruntime plugin EP library built for this onnxruntime version, "
                + _drop_remedy(spec),
            ) from exc
        registered_here = False
    try:
        og.register_execution_provider_library(spec.ep_name, str(path))
    except Exception as exc:
        if not _already_registered(exc):
            if registered_here:
                _try_unregister(ort, spec.ep_name)
            raise PluginError(
                f"onnxruntime_genai could not register plugin EP library {spec.library_path} as {spec.ep_name} "
                f"(from {_origin_text(spec.origin)}): {exc}",
                remedy="check that onnxruntime-genai and the plugin are built for the same onnxruntime version, "
                + _drop_remedy(spec),
            ) from exc
    elapsed_ms = (time.perf_counter() - start) * 1000.0
    return PluginRegistration(spec.ep_name, str(path), spec.origin, elapsed_ms, registered_here)


def _drop_remedy(spec: PluginSpec) -> str:
    """How to stop asking for ``spec``'s library, where it was asked."""
    if spec.origin.startswith("package:"):
        return f"or uninstall the package that provides {spec.origin.partition(':')[2]}"
    return f"or drop {spec.ep_name} from {_origin_text(spec.origin)}"


def _skip(spec: PluginSpec, failed: PluginError) -> None:
    """Keep why ``spec`` (env or package) did not register, and say so once on stderr."""
    from winml_perf.support.text_table import say

    _SKIPPED[spec.ep_name] = failed
    say(f"warning: {failed.message}; {spec.ep_name} is skipped (a route that asks for it fails); {failed.remedy}")


@contextlib.contextmanager
def _registration_warnings_muted(ort_module: Any) -> Iterator[None]:
    """onnxruntime's warnings while a plugin registers (the WebGPU EP's line about
    ORT_WEBGPU_EP_ALLOW_SOFTWARE_ADAPTER on every command) stay off stderr: `winml devices` says in
    words which device each plugin EP runs on. Errors still raise; the default severity (warning)
    comes back after, before a child's --verbose sets its own."""
    ort_module.set_default_logger_severity(3)
    try:
        yield
    finally:
        ort_module.set_default_logger_severity(2)


def _try_unregister(ort_module: Any, name: str) -> None:
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
            if spec.origin != "flag" and spec.ep_name in _SKIPPED:
                continue  # said once
            try:
                registration = _register_one(spec)
            except PluginError as failed:
                if spec.origin == "flag":
                    raise  # named on the command line: the user asked for it
                _skip(spec, failed)
                continue
            _REGISTERED[spec.ep_name] = registration
            results.append(registration)
        _STATE["settled"] = True
    return results
