"""Placement proof: where each stage's nodes really run, and ``--strict`` on top of it.

A stage's model is opened with onnxruntime on the EP and provider options its (derived) config names,
with session config ``session.record_ep_graph_assignment_info=1``; the session's
``get_provider_graph_assignment_info()`` then lists every node with the EP it was assigned to. The
result per stage: nodes per EP, the op types that fell back to CPU (with counts), and ``ep_actual``
when every node landed on one EP other than the one asked (onnxruntime's silent fallback).

This runs in the prepare step. For a derived bundle the result is kept in ``placement.json`` next to
its ``manifest.json``, under a key made of the derived bundle's cache key, this module's format
version and the identity of the EPs involved (plugin library file, EP devices), so a cache hit costs
one small file read. Stages that share a model file and EP (context and iterator) are measured once
per process. A placement session costs 1-15 ms on CPU and 40-90 ms on WebGPU for the tiny bundles;
it loads the weights, so it grows with the model (once per derived bundle).

``enforce_strict(prepared)`` fails a forced route (exit 1) naming every forced stage and the op types
that would run on CPU. It reads the recorded placement: onnxruntime's own
``session.disable_cpu_ep_fallback=1`` only says that session creation failed, naming no node.
"""

from __future__ import annotations

import collections
import hashlib
import json
import os
import time
import uuid
import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping, Sequence

from winml_perf import eps
from winml_perf.bundle.config import GenaiConfig, Stage, load_config
from winml_perf.bundle.routing import CPU, stage_ep
from winml_perf.errors import BenchmarkFailure

FORMAT_VERSION = 1
PLACEMENT_FILE = "placement.json"
RECORD_ASSIGNMENT = "session.record_ep_graph_assignment_info"
OK, ERROR, UNAVAILABLE = "ok", "error", "unavailable"
#: genai session_options keys that are not onnxruntime session config entries.
GENAI_SESSION_KEYS = frozenset({
    "log_id", "provider_options", "intra_op_num_threads", "inter_op_num_threads", "enable_cpu_mem_arena",
    "enable_mem_pattern", "disable_cpu_ep_fallback", "disable_quant_qdq", "enable_quant_qdq_cleanup",
    "ep_context_enable", "ep_context_embed_mode", "ep_context_file_path", "log_severity_level", "enable_profiling",
    "custom_ops_library", "use_env_allocators", "graph_optimization_level", "config_entries", "use_external_allocator",
})
_ERROR_CHARS = 600


@dataclass(frozen=True)
class StagePlacement:
    """Where one stage's nodes were placed. ``ep`` is the EP asked (canonical name, or as written)."""

    stage: str
    files: tuple[str, ...]
    ep: str
    status: str  # "ok" | "error" (the session could not be created) | "unavailable" (EP not here)
    nodes_per_ep: Mapping[str, int] = field(default_factory=dict)
    op_types_per_ep: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    providers: tuple[str, ...] = ()
    session_ms: float | None = None
    error: str | None = None

    @property
    def nodes(self) -> int:
        return sum(self.nodes_per_ep.values())

    @property
    def cpu_fallback_ops(self) -> dict[str, int]:
        """Op types (with node counts) placed on CPU although another EP was asked."""
        return {} if self.ep == CPU else dict(sorted(self.op_types_per_ep.get(CPU, {}).items()))

    @property
    def cpu_fallback_nodes(self) -> int:
        return 0 if self.ep == CPU else self.nodes_per_ep.get(CPU, 0)

    @property
    def ep_actual(self) -> str | None:
        """The single EP that holds every node, when it is not the EP asked; else None."""
        holders = [k for k, n in self.nodes_per_ep.items() if n > 0]
        return holders[0] if self.status == OK and len(holders) == 1 and holders[0] != self.ep else None

    def to_dict(self) -> dict:
        return {
            "stage": self.stage, "files": list(self.files), "ep": self.ep, "status": self.status,
            "nodes": self.nodes, "nodes_per_ep": dict(self.nodes_per_ep),
            "cpu_fallback_nodes": self.cpu_fallback_nodes, "cpu_fallback_ops": self.cpu_fallback_ops,
            "op_types_per_ep": {k: dict(v) for k, v in self.op_types_per_ep.items()},
            "ep_actual": self.ep_actual, "providers": list(self.providers), "session_ms": self.session_ms,
            "error": self.error,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "StagePlacement":
        return cls(d["stage"], tuple(d.get("files") or ()), d["ep"], d["status"], dict(d.get("nodes_per_ep") or {}),
                   {k: dict(v) for k, v in (d.get("op_types_per_ep") or {}).items()}, tuple(d.get("providers") or ()),
                   d.get("session_ms"), d.get("error"))


@dataclass(frozen=True)
class RoutePlacement:
    stages: tuple[StagePlacement, ...]
    cache: str | None  # "hit" | "miss" | None (not cached: nothing derived, or not storable)
    reason: str
    placement_ms: float
    key: str | None = None

    def by_stage(self) -> dict[str, StagePlacement]:
        return {p.stage: p for p in self.stages}


# -- pure rules ---------------------------------------------------------------------------------------
def op_name(op_type: str, domain: str | None) -> str:
    """``Cast`` for the default ONNX domain, ``com.microsoft.GroupQueryAttention`` otherwise."""
    return op_type if domain in (None, "", "ai.onnx") else f"{domain}.{op_type}"


def summarize(stage: str, files: Sequence[str], ep: str, assigned: Sequence[tuple[str, str, str]], providers: Sequence[str] = (),
              session_ms: float | None = None) -> StagePlacement:
    """A StagePlacement from (ep_name, op_type, domain) per node."""
    per_ep: collections.Counter = collections.Counter()
    ops: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for ep_name, op_type, domain in assigned:
        per_ep[ep_name] += 1
        ops[ep_name][op_name(op_type, domain)] += 1
    return StagePlacement(stage, tuple(files), ep, OK, dict(per_ep), {k: dict(sorted(v.items())) for k, v in ops.items()},
                          tuple(providers), session_ms)


def ops_text(ops: Mapping[str, int]) -> str:
    """``{"Cast": 2, "Shape": 1}`` -> ``Cast x2, Shape``."""
    return ", ".join(f"{op} x{n}" if n > 1 else op for op, n in sorted(ops.items()))


def nodes_text(placement: Mapping[str, Any] | None) -> str:
    """``webgpu 23, cpu 6`` (most nodes first), or the status when nothing was measured."""
    if not placement:
        return "-"
    if placement.get("status") != OK:
        return placement.get("status", "-")
    counts = sorted((placement.get("nodes_per_ep") or {}).items(), key=lambda kv: (-kv[1], kv[0]))
    return ", ".join(f"{eps.ep_alias(k)} {n}" for k, n in counts) or "0 nodes"


def strict_violations(stages: Sequence[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """(stage, why) per forced, non-CPU stage that has a node off its EP (or no placement to prove it)."""
    out = []
    for s in stages:
        asked = s.get("ep_after")
        if not s.get("forced") or asked == CPU:
            continue
        p = s.get("placement")
        where = f"stage `{s.get('stage')}` ({', '.join(s.get('files') or [])}) on {eps.ep_alias(asked) if eps.is_known_ep(asked) else asked}"
        if not p or p.get("status") != OK:
            why = (p or {}).get("error") or (p or {}).get("status") or "no placement was recorded"
            out.append((s.get("stage"), f"{where}: placement unknown ({why})"))
            continue
        off = {k: n for k, n in (p.get("nodes_per_ep") or {}).items() if k != asked and n}
        if not off:
            continue
        ops_off = {}
        for k in off:
            for op, n in (p.get("op_types_per_ep") or {}).get(k, {}).items():
                ops_off[op] = ops_off.get(op, 0) + n
        elsewhere = ", ".join(f"{n} on {eps.ep_alias(k)}" for k, n in sorted(off.items()))
        out.append((s.get("stage"), f"{where}: {sum(off.values())} of {p.get('nodes')} nodes would not run there ({elsewhere}): {ops_text(ops_off)}"))
    return out


def enforce_strict(prepared: Any) -> None:
    """BenchmarkFailure (exit 1) when a forced stage of ``prepared`` (a PreparedRoute, or anything
    with ``to_dict()["stages"]`` / ``stages`` carrying ``placement``) has nodes off its EP."""
    stages = prepared.to_dict()["stages"] if hasattr(prepared, "to_dict") else list(prepared.stages)
    problems = strict_violations(stages)
    if not problems:
        return
    route = getattr(prepared, "route", None) or (prepared.to_dict().get("route") if hasattr(prepared, "to_dict") else "?")
    failing = {stage for stage, _ in problems}
    whole = [s["stage"] for s in stages if s.get("forced") and s.get("ep_after") != CPU and s["stage"] not in failing]
    hint = f" (these forced stages run whole on it: --stages {','.join(whole)})" if whole else ""
    raise BenchmarkFailure(
        f"--strict: route {route} would run nodes of forced stages off their EP: " + "; ".join(why for _, why in problems),
        "drop --strict to measure the mixed route as it is, limit the route with --stages" + hint
        + ", or pick an EP with kernels for these ops",
    )


# -- measuring ---------------------------------------------------------------------------------------
def stage_session_options(config: GenaiConfig, stage: Stage) -> dict:
    """The genai session_options a stage runs with (its own, else the decoder's)."""
    decoder = config.raw["model"]["decoder"]
    if config.kind == "flat":
        return dict(decoder.get("session_options") or {})
    pipeline = decoder["pipeline"]
    nodes = {name: node for group in (pipeline if isinstance(pipeline, list) else [pipeline]) for name, node in group.items()}
    node = nodes[stage.name]
    return dict((node if "session_options" in node else decoder).get("session_options") or {})


def config_entries(session_options: Mapping[str, Any]) -> dict[str, str]:
    """onnxruntime session config entries genai would pass: ``config_entries`` and extra string keys."""
    out = {str(k): str(v) for k, v in (session_options.get("config_entries") or {}).items()}
    out.update({k: v for k, v in session_options.items() if k not in GENAI_SESSION_KEYS and isinstance(v, str)})
    if session_options.get("disable_cpu_ep_fallback") is True:
        out["session.disable_cpu_ep_fallback"] = "1"
    out[RECORD_ASSIGNMENT] = "1"
    return out


_MEMO: dict[tuple, StagePlacement] = {}


def measure_stage(folder: Path, config: GenaiConfig, stage: Stage) -> StagePlacement:
    """Open the stage's model as its config says and read where onnxruntime placed each node."""
    ep = stage_ep(stage)[0]
    so_dict = stage_session_options(config, stage)
    ep_options = {}
    if stage.provider_options:
        ep_options = {k: str(v) for k, v in (next(iter(stage.provider_options[0].values())) or {}).items()}
    entries = config_entries(so_dict)
    model = Path(folder) / stage.filename
    st = model.stat()
    memo_key = (str(model.resolve()), st.st_size, st.st_mtime_ns, ep, json.dumps(ep_options, sort_keys=True),
                json.dumps(entries, sort_keys=True), str(so_dict.get("graph_optimization_level")))
    if memo_key not in _MEMO:
        _MEMO[memo_key] = _measure(model, ep, ep_options, entries, so_dict.get("graph_optimization_level"))
    return replace(_MEMO[memo_key], stage=stage.name, files=stage.files)


def _measure(model: Path, ep: str, ep_options: dict, entries: dict, level: str | None) -> StagePlacement:
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.log_severity_level = 3  # "some nodes were not assigned to the preferred EP" is what we record
    for k, v in entries.items():
        so.add_session_config_entry(k, v)
    if isinstance(level, str) and hasattr(ort.GraphOptimizationLevel, level):
        so.graph_optimization_level = getattr(ort.GraphOptimizationLevel, level)
    providers = None
    if ep != CPU:
        devices = _ep_devices(ep, ep_options.get("device_type"))
        if devices:
            so.add_provider_for_devices(devices[:1], ep_options)
        elif ep in ort.get_available_providers():
            providers = [(ep, ep_options), CPU]
        else:
            return StagePlacement("", (), ep, UNAVAILABLE, error=f"onnxruntime offers no device for {ep} in this process")
    t0 = time.perf_counter()
    try:
        with warnings.catch_warnings():  # onnxruntime's own retry on CPU warns about providers; we record it
            warnings.simplefilter("ignore")
            session = ort.InferenceSession(str(model), sess_options=so, providers=providers)
        session_ms = round((time.perf_counter() - t0) * 1000.0, 3)
        assigned = [(sub.ep_name, n.op_type, n.domain) for sub in session.get_provider_graph_assignment_info() for n in sub.get_nodes()]
        used = tuple(session.get_providers())
    except Exception as exc:  # recorded per stage: genai's own load reports it too, strict fails on it
        text = " ".join(str(exc).split())
        return StagePlacement("", (), ep, ERROR, error=f"{type(exc).__name__}: {text[:_ERROR_CHARS]}")
    del session
    return summarize("", (), ep, assigned, used, session_ms)


def _ep_devices(ep: str, device_type: str | None) -> list:
    import onnxruntime as ort

    own = [d for d in ort.get_ep_devices() if d.ep_name == ep]
    if device_type:
        wanted = [d for d in own if str(getattr(d.device.type, "name", d.device.type)).rsplit(".", 1)[-1].lower() == device_type.lower()]
        return wanted or own
    return own


def measure_config(config: GenaiConfig, folder: Path | None = None, stages: Sequence[str] | None = None) -> list[StagePlacement]:
    """Placement of ``stages`` (default: all) of ``config``, whose files lie in ``folder`` (default: its bundle).
    Registers plugin EPs first when a stage asks for an EP other than CPU."""
    chosen = [s for s in config.stages if stages is None or s.name in stages]
    if any(stage_ep(s)[0] != CPU for s in chosen):
        _ensure_plugins()
    return [measure_stage(Path(folder or config.bundle), config, s) for s in chosen]


def _ensure_plugins() -> None:
    """Register plugin EPs unless this process already did (discovery alone costs tens of ms)."""
    from winml_perf.plugins import register_plugin_eps, registered_plugins

    if not registered_plugins():
        register_plugin_eps()


# -- the cached placement of a derived bundle ---------------------------------------------------------------
def ep_identity(ep_names: Sequence[str]) -> dict:
    """What besides the model decides placement: each non-CPU EP's plugin library file and devices."""
    from winml_perf import devices as devs
    from winml_perf.plugins import registered_plugins

    plugins = registered_plugins()
    listed = devs.list_ep_devices() if any(e != CPU for e in ep_names) else []
    out = {}
    for ep in sorted(set(ep_names) - {CPU}):
        reg = plugins.get(ep)
        lib = None
        if reg is not None:
            try:
                st = os.stat(reg.library_path)
                lib = {"path": reg.library_path, "size": st.st_size, "mtime_ns": st.st_mtime_ns}
            except OSError:
                lib = {"path": reg.library_path}
        out[ep] = {"library": lib, "devices": [d.to_dict() for d in listed if d.ep_name == ep]}
    return out


def placement_key(derive_key: str, identity: Mapping) -> str:
    text = json.dumps({"format_version": FORMAT_VERSION, "derive_key": derive_key, "eps": identity}, sort_keys=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def derived_placement(folder: Path, derive_key: str) -> RoutePlacement:
    """Placement of every stage of the derived bundle ``folder``: from its placement.json when that
    was made under the same key, else measured and saved (unless an EP was unavailable here)."""
    t0 = time.perf_counter()
    folder = Path(folder)
    config = load_config(folder)
    needed = [stage_ep(s)[0] for s in config.stages]
    if any(e != CPU for e in needed):
        _ensure_plugins()
    key = placement_key(derive_key, ep_identity(needed))
    cached = _read(folder / PLACEMENT_FILE)
    if cached is not None and cached.get("key") == key and [s["stage"] for s in cached["stages"]] == list(config.stage_names):
        stages = tuple(StagePlacement.from_dict(s) for s in cached["stages"])
        return RoutePlacement(stages, "hit", f"{PLACEMENT_FILE} made under this key", _ms(t0), key)
    why = "none yet" if cached is None else "made under another key (plugin library, EP devices or format changed)"
    stages = tuple(measure_config(config, folder))
    transient = _transient(stages)
    if transient:
        return RoutePlacement(stages, None, f"measured ({why}); not saved: {transient}", _ms(t0), key)
    saved = _write(folder / PLACEMENT_FILE, {"format_version": FORMAT_VERSION, "key": key, "derive_key": derive_key,
                                             "stages": [s.to_dict() for s in stages]})
    return RoutePlacement(stages, "miss", f"measured: {why}" + ("" if saved is None else f"; not saved: {saved}"), _ms(t0), key)


def _transient(stages: Sequence[StagePlacement]) -> str | None:
    """Why these results describe this process's environment rather than the model (so are not saved)."""
    for p in stages:
        if p.status == UNAVAILABLE:
            return f"stage `{p.stage}`: {p.error}"
        if p.status == OK and p.ep != CPU and p.ep not in p.providers:
            return f"stage `{p.stage}`: {eps.ep_alias(p.ep)} did not start here (onnxruntime fell back to {', '.join(p.providers)})"
    return None


def _read(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("stages"), list) else None


def _write(path: Path, data: dict) -> str | None:
    """Write atomically (temp file + rename); None on success, else why not (the cache is optional)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}")
    try:
        tmp.write_text(json.dumps(data, indent=2), encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        return exc.strerror or str(exc)
    return None


def _ms(t0: float) -> float:
    return round((time.perf_counter() - t0) * 1000.0, 3)
