"""Placement proof: where each stage's nodes really run, and ``--strict`` on top of it.

A stage's model is opened with onnxruntime on the EP and provider options its (derived) config names,
with session config ``session.record_ep_graph_assignment_info=1``; the session's
``get_provider_graph_assignment_info()`` then lists every node with the EP it was assigned to. The
result per stage: nodes per EP, the op types that fell back to CPU (with counts), and ``ep_actual``
when every node landed on one EP other than the one asked (onnxruntime's silent fallback).

This runs in the prepare step. For a derived bundle the result is kept in ``placement.json`` next to
its ``manifest.json``, under a key made of the derived bundle's cache key, this module's format
version and the identity of the EPs involved (plugin library file, EP devices), so a cache hit costs
one small file read. The file is sealed (its sha256 over what it holds) and read by its shape: an
edited or misshapen placement.json is measured again, the reason saying why. Stages that share a model file and EP (context and iterator) are measured once
per process. A placement session costs 1-15 ms on CPU and 40-90 ms on WebGPU for the tiny bundles;
it loads the weights, so it grows with the model (once per derived bundle).

``enforce_strict(route)`` fails a route, forced or config (exit 1), naming every non-CPU stage and the op types
that would run on CPU. It reads the recorded placement: onnxruntime's own
``session.disable_cpu_ep_fallback=1`` only says that session creation failed, naming no node.
"""

from __future__ import annotations

import collections
import hashlib
import json
import os
import time
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from winml_perf.bundle.config import GenaiConfig, Stage
from winml_perf.ep import table as eps
from winml_perf.model.route import CPU, ERROR, OK, UNAVAILABLE, Route, StagePlacement, StageRoute
from winml_perf.support import json_shapes
from winml_perf.support.errors import BenchmarkFailure
from winml_perf.support.json_shapes import NUMBER, DictOf, ListOf, Opt

FORMAT_VERSION = (
    3  # 2: placement.json is sealed and read by its shape; 3: compiled stages counted in nodes, not partitions
)
PLACEMENT_FILE = "placement.json"
STAGE_SHAPE = {
    "stage": str,
    "files": Opt(ListOf(str)),
    "ep": str,
    "status": str,
    "nodes_per_ep": Opt(DictOf(int)),
    "op_types_per_ep": Opt(DictOf(DictOf(int))),
    "providers": Opt(ListOf(str)),
    "session_ms": Opt(NUMBER),
    "error": Opt(str),
}
PLACEMENT_SHAPE = {"format_version": int, "key": str, "derive_key": str, "stages": ListOf(STAGE_SHAPE)}
RECORD_ASSIGNMENT = "session.record_ep_graph_assignment_info"
#: genai session_options keys that are not onnxruntime session config entries.
GENAI_SESSION_KEYS = frozenset(
    {
        "log_id",
        "provider_options",
        "intra_op_num_threads",
        "inter_op_num_threads",
        "enable_cpu_mem_arena",
        "enable_mem_pattern",
        "disable_cpu_ep_fallback",
        "disable_quant_qdq",
        "enable_quant_qdq_cleanup",
        "ep_context_enable",
        "ep_context_embed_mode",
        "ep_context_file_path",
        "log_severity_level",
        "enable_profiling",
        "custom_ops_library",
        "use_env_allocators",
        "graph_optimization_level",
        "config_entries",
        "use_external_allocator",
    }
)
_ERROR_CHARS = 600


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


def summarize(
    stage: str,
    files: Sequence[str],
    ep: str,
    assigned: Sequence[tuple[str, str, str]],
    providers: Sequence[str] = (),
    session_ms: float | None = None,
) -> StagePlacement:
    """A StagePlacement from (ep_name, op_type, domain) per node."""
    per_ep: collections.Counter[str] = collections.Counter()
    ops: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for ep_name, op_type, domain in assigned:
        per_ep[ep_name] += 1
        ops[ep_name][op_name(op_type, domain)] += 1
    return StagePlacement(
        stage,
        tuple(files),
        ep,
        OK,
        dict(per_ep),
        {k: dict(sorted(v.items())) for k, v in ops.items()},
        tuple(providers),
        session_ms,
    )


def ops_text(ops: Mapping[str, int]) -> str:
    """``{"Cast": 2, "Shape": 1}`` -> ``Cast x2, Shape``."""
    return ", ".join(f"{op} x{n}" if n > 1 else op for op, n in sorted(ops.items()))


def nodes_text(placement: StagePlacement | None) -> str:
    """``webgpu 23, cpu 6`` (most nodes first), or the status when nothing was measured."""
    if placement is None:
        return "-"
    if placement.status != OK:
        return placement.status
    counts = sorted(placement.nodes_per_ep.items(), key=lambda kv: (-kv[1], kv[0]))
    return ", ".join(f"{eps.ep_alias(k)} {n}" for k, n in counts) or "0 nodes"


def _held(stages: Sequence[StageRoute], config_route: bool = False) -> list[StageRoute]:
    """The stages --strict holds to their EP: the forced non-CPU stages of a forced route; on the config
    route every stage the config puts on an EP other than CPU."""
    return [s for s in stages if s.ep_after is not None and s.ep_after != CPU and (s.forced or config_route)]


def strict_violations(stages: Sequence[StageRoute], config_route: bool = False) -> list[tuple[str, str]]:
    """(stage, why) per forced, non-CPU stage that has a node off its EP (or no placement to prove it)."""
    out = []
    for s in _held(stages, config_route):
        asked, p = s.ep_after, s.placement
        assert asked is not None  # _held keeps stages with an EP only
        where = (
            f"stage `{s.stage}` ({', '.join(s.files)}) on {eps.ep_alias(asked) if eps.is_known_ep(asked) else asked}"
        )
        if p is None or p.status != OK:
            why = (p.error or p.status) if p is not None else "no placement was recorded"
            out.append((s.stage, f"{where}: placement unknown ({why})"))
            continue
        off = p.nodes_off(asked)
        if not off:
            continue
        ops_off: dict[str, int] = {}
        for k in off:
            for op, n in p.op_types_per_ep.get(k, {}).items():
                ops_off[op] = ops_off.get(op, 0) + n
        elsewhere = ", ".join(f"{n} on {eps.ep_alias(k)}" for k, n in sorted(off.items()))
        out.append(
            (
                s.stage,
                f"{where}: {sum(off.values())} of {p.nodes} nodes would not run there ({elsewhere}): {ops_text(ops_off)}",
            )
        )
    return out


def enforce_strict(route: Route) -> None:
    """BenchmarkFailure (exit 1) when a forced stage of ``route`` has nodes off its EP (or no placement)."""
    config_route = (route.requested or route.label) == "config"
    problems = strict_violations(route.stages, config_route)
    if not problems:
        return
    failing = {stage for stage, _ in problems}
    whole = [s.stage for s in _held(route.stages, config_route) if s.stage not in failing and s.forced]
    hint = f" (these forced stages run whole on it: --stages {','.join(whole)})" if whole else ""
    raise BenchmarkFailure(
        f"--strict: route {route.effective or route.label} would run nodes off the EP their stage asks for: "
        + "; ".join(why for _, why in problems),
        "drop --strict to measure the mixed route as it is, limit the route with --stages"
        + hint
        + ", or pick an EP with kernels for these ops",
    )


# -- measuring ---------------------------------------------------------------------------------------
def stage_session_options(config: GenaiConfig, stage: Stage) -> dict[str, Any]:
    """The genai session_options a stage runs with (its own, else the decoder's)."""
    decoder = config.raw["model"]["decoder"]
    if config.kind == "flat":
        return dict(decoder.get("session_options") or {})
    pipeline = decoder["pipeline"]
    nodes = {
        name: node for group in (pipeline if isinstance(pipeline, list) else [pipeline]) for name, node in group.items()
    }
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


_MEMO: dict[tuple[Any, ...], StagePlacement] = {}


def stage_session(
    folder: Path, config: GenaiConfig, stage: Stage
) -> tuple[Path, str, dict[str, Any], dict[str, Any], str | None]:
    """How genai opens a stage: model path, EP, provider options, session config entries, optimisation level."""
    so_dict = stage_session_options(config, stage)
    ep_options = {k: str(v) for k, v in (stage.ep_options or {}).items()}
    level = so_dict.get("graph_optimization_level")
    return Path(folder) / stage.filename, stage.ep, ep_options, config_entries(so_dict), level


def measure_stage(folder: Path, config: GenaiConfig, stage: Stage) -> StagePlacement:
    """Open the stage's model as its config says and read where onnxruntime placed each node."""
    model, ep, ep_options, entries, level = stage_session(folder, config, stage)
    st = model.stat()
    memo_key = (
        str(model.resolve()),
        st.st_size,
        st.st_mtime_ns,
        ep,
        json.dumps(ep_options, sort_keys=True),
        json.dumps(entries, sort_keys=True),
        str(level),
    )
    if memo_key not in _MEMO:
        measured = _measure(model, ep, ep_options, entries, level)
        source = _compiled_from(Path(folder), stage.filename) if _has_partitions(measured) else None
        if source is not None:  # count the nodes inside the EPContext partitions, not the partitions
            measured = _nodes_of_compiled(measured, _measure(source, ep, ep_options, entries, level))
        _MEMO[memo_key] = measured
    return replace(_MEMO[memo_key], stage=stage.name, files=stage.files)


EPCONTEXT = "com.microsoft.EPContext"


def _has_partitions(p: StagePlacement) -> bool:
    return p.status == OK and any(EPCONTEXT in ops for ops in p.op_types_per_ep.values())


def _compiled_from(folder: Path, filename: str) -> Path | None:
    """The source model a compiled stage file was made from (the derived bundle's manifest says)."""
    try:
        manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    for outcome in manifest.get("compile") or []:
        if isinstance(outcome, dict) and outcome.get("output") == filename and isinstance(outcome.get("source"), str):
            return folder / str(outcome["source"])
    return None


def _nodes_of_compiled(compiled: StagePlacement, source: StagePlacement) -> StagePlacement:
    """The compiled model's placement counted in nodes: each EPContext node stands for the nodes the
    source model's session put on that EP. Kept as measured when the two sessions disagree on what
    stayed off the EP (then the partitions are shown as they are: com.microsoft.EPContext)."""
    if source.status != OK:
        return compiled
    outside = {ep: {op: n for op, n in ops.items() if op != EPCONTEXT} for ep, ops in compiled.op_types_per_ep.items()}
    off_ep = {ep: ops for ep, ops in outside.items() if ep != compiled.ep and ops}
    source_off = {ep: ops for ep, ops in source.op_types_per_ep.items() if ep != compiled.ep}
    if off_ep != source_off:
        return compiled
    return replace(compiled, nodes_per_ep=dict(source.nodes_per_ep), op_types_per_ep=dict(source.op_types_per_ep))


def _measure(
    model: Path, ep: str, ep_options: dict[str, Any], entries: dict[str, Any], level: str | None
) -> StagePlacement:
    nodes = assigned_nodes(model, ep, ep_options, entries, level)
    if isinstance(nodes, StagePlacement):
        return nodes
    assigned, used, session_ms = nodes
    return summarize("", (), ep, [(e, op, domain) for e, _name, op, domain in assigned], used, session_ms)


def assigned_nodes(
    model: Path, ep: str, ep_options: dict[str, Any], entries: dict[str, Any], level: str | None
) -> tuple[list[tuple[str, str, str, str]], tuple[str, ...], float] | StagePlacement:
    """(EP, node name, op type, domain) per node as the session assigned it, the session's providers and
    its creation ms; or a StagePlacement saying why no session opened."""
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
            return StagePlacement(
                "", (), ep, UNAVAILABLE, error=f"onnxruntime offers no device for {ep} in this process"
            )
    t0 = time.perf_counter()
    try:
        with warnings.catch_warnings():  # onnxruntime's own retry on CPU warns about providers; we record it
            warnings.simplefilter("ignore")
            session = ort.InferenceSession(str(model), sess_options=so, providers=providers)
        session_ms = round((time.perf_counter() - t0) * 1000.0, 3)
        assigned = [
            (sub.ep_name, n.name, n.op_type, n.domain)
            for sub in session.get_provider_graph_assignment_info()
            for n in sub.get_nodes()
        ]
        used = tuple(session.get_providers())
    except Exception as exc:  # recorded per stage: genai's own load reports it too, strict fails on it
        text = " ".join(str(exc).split())
        return StagePlacement("", (), ep, ERROR, error=f"{type(exc).__name__}: {text[:_ERROR_CHARS]}")
    del session
    return assigned, used, session_ms


def _ep_devices(ep: str, device_type: str | None) -> list[Any]:
    import onnxruntime as ort

    own = [d for d in ort.get_ep_devices() if d.ep_name == ep]
    if device_type:
        wanted = [
            d
            for d in own
            if str(getattr(d.device.type, "name", d.device.type)).rsplit(".", 1)[-1].lower() == device_type.lower()
        ]
        return wanted or own
    return own


def measure_config(
    config: GenaiConfig, folder: Path | None = None, stages: Sequence[str] | None = None
) -> list[StagePlacement]:
    """Placement of ``stages`` (default: all) of ``config``, whose files lie in ``folder`` (default: its bundle).
    Plugin EPs are registered first when a stage asks for an EP other than CPU."""
    chosen = [s for s in config.stages if stages is None or s.name in stages]
    if any(s.ep != CPU for s in chosen):
        from winml_perf.ep.plugins import registered_plugins

        registered_plugins()  # the registry registers the plugin EPs once per process
    return [measure_stage(Path(folder or config.bundle), config, s) for s in chosen]


# -- the cached placement of a derived bundle ---------------------------------------------------------------
def ep_identity(ep_names: Sequence[str]) -> dict[str, Any]:
    """What besides the model decides placement: each non-CPU EP's plugin library file and devices."""
    from winml_perf.ep import devices as devs
    from winml_perf.ep.plugins import registered_plugins

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


def placement_key(derive_key: str, identity: Mapping[str, Any]) -> str:
    text = json.dumps({"format_version": FORMAT_VERSION, "derive_key": derive_key, "eps": identity}, sort_keys=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def derived_placement(folder: Path, derive_key: str, config: GenaiConfig) -> RoutePlacement:
    """Placement of every stage of the derived bundle ``folder`` (``config``: its genai config): from
    its placement.json when that was made under the same key, else measured and saved (unless an EP
    was unavailable here)."""
    t0 = time.perf_counter()
    folder = Path(folder)
    needed = [s.ep for s in config.stages]
    key = placement_key(derive_key, ep_identity(needed))
    cached, problem = json_shapes.read_json(folder / PLACEMENT_FILE, PLACEMENT_SHAPE, sealed=True)
    if (
        cached is not None
        and cached["key"] == key
        and [s["stage"] for s in cached["stages"]] == list(config.stage_names)
    ):
        stages = tuple(StagePlacement.from_dict(s) for s in cached["stages"])
        return RoutePlacement(stages, "hit", f"{PLACEMENT_FILE} made under this key", _ms(t0), key)
    if cached is not None:
        why = (
            "made under another key (plugin library, EP devices or format changed)"
            if cached["key"] != key
            else "made for other stages"
        )
    else:
        assert problem is not None  # read_json says why whenever it gives no data
        why = "none yet" if problem == f"{PLACEMENT_FILE} is missing" else problem
    stages = tuple(measure_config(config, folder))
    transient = _transient(stages)
    if transient:
        return RoutePlacement(stages, None, f"measured ({why}); not saved: {transient}", _ms(t0), key)
    saved = json_shapes.write_sealed(
        folder / PLACEMENT_FILE,
        {
            "format_version": FORMAT_VERSION,
            "key": key,
            "derive_key": derive_key,
            "stages": [s.to_dict() for s in stages],
        },
    )
    return RoutePlacement(
        stages, "miss", f"measured: {why}" + ("" if saved is None else f"; not saved: {saved}"), _ms(t0), key
    )


def saved_shares(folder: Path) -> dict[str, tuple[str, int, int]]:
    """stage -> (its EP, nodes on that EP, all nodes) from the derived bundle ``folder``'s placement.json
    (as ``derived_placement`` last measured it); empty without a readable one."""
    cached, _ = json_shapes.read_json(Path(folder) / PLACEMENT_FILE, PLACEMENT_SHAPE, sealed=True)
    shares = {}
    for s in (cached or {}).get("stages", ()):
        p = StagePlacement.from_dict(s)
        if p.status == OK and p.nodes:
            shares[p.stage] = (p.ep, int(p.nodes_per_ep.get(p.ep, 0)), int(p.nodes))
    return shares


def _transient(stages: Sequence[StagePlacement]) -> str | None:
    """Why these results describe this process's environment rather than the model (so are not saved)."""
    for p in stages:
        if p.status == UNAVAILABLE:
            return f"stage `{p.stage}`: {p.error}"
        if p.status == OK and p.ep != CPU and p.ep not in p.providers:
            return f"stage `{p.stage}`: {eps.ep_alias(p.ep)} did not start here (onnxruntime fell back to {', '.join(p.providers)})"
    return None


def _ms(t0: float) -> float:
    return round((time.perf_counter() - t0) * 1000.0, 3)
