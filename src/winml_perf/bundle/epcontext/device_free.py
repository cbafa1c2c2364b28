"""Device-free preparation: compile a route's stages with no EP device, and say on reuse how they were made.

``refuse_unless_possible(ep)`` decides before anything starts: the EP must be a plugin library here
(only a library can be registered as ``<EP>.virtual``), its table entry must not record this package
version as unable (WebGPU 0.4.0 aborts the process), and it must write EPContext models. Otherwise
exit 2 naming the EP, package and version.

``runner(strict)`` replaces compile.run_jobs for derive.py: each job runs in device_free_child.py (a
fresh process registering only ``<EP>.virtual``). A child killed by a signal (an EP version the table
does not know, aborting) is exit 2 naming the EP and version, never a core dump reaching the user.
Each compiled stage's provenance (device-free, registered name, device offered, package, version,
SDK, onnxruntime, target options, compatibility info, node placement) goes to ``prepared.json`` in
the derived bundle; on reuse ``reuse_report_of`` compares it with the EP's plugin identity (a derived
bundle's, from its key; ``reuse_report`` asks it by EP name) and the options of the running process
(``matched``: "ok" or what differs).
"""

from __future__ import annotations

import json
import platform
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from winml_perf.bundle.epcontext.compile import CompileJob, JobRunner, capability_error
from winml_perf.bundle.epcontext.device_free_child import VIRTUAL
from winml_perf.bundle.epcontext.provenance import PREPARED_FILE, TARGET_KEYS, VERSION_KEYS
from winml_perf.ep import child
from winml_perf.ep import table as eps
from winml_perf.model.route import CompileOutcome, CompileStatus
from winml_perf.support.errors import UsageError

CHILD_MODULE = "winml_perf.bundle.epcontext.device_free_child"


def _identity(ep: str) -> dict[str, Any] | None:
    from winml_perf.ep.plugins import plugin_identity

    return plugin_identity(ep)


def _named(ep: str, ident: Mapping[str, Any] | None) -> str:
    alias = eps.ep_alias(ep)
    if not ident or not ident.get("package"):
        return alias
    return f"{alias} ({ident.get('package')} {ident.get('version')})"


def refuse_unless_possible(ep: str) -> dict[str, Any]:
    """The plugin identity of ``ep`` when it can compile device-free here; else UsageError (exit 2)."""
    ident = _identity(ep)
    if ident is None:
        raise UsageError(
            f"--device-free: {eps.ep_alias(ep)} is not served by a plugin EP library here, so it cannot be "
            f"registered as {ep}.virtual",
            "install its plugin package or pass --ep-library NAME=PATH; or prepare without --device-free",
        )
    known = {(d.package, d.version): d for d in eps.ep_info(ep).device_free}
    entry = known.get((ident.get("package") or "", ident.get("version") or ""))
    if entry is not None and not entry.works:
        raise UsageError(
            f"--device-free: {_named(ep, ident)} cannot compile without a device: {entry.why}",
            f"prepare on a machine with a {eps.ep_alias(ep)} device (drop --device-free), "
            f"or install a {entry.package} version with a compile-only mode",
        )
    if not eps.compiles(ep):
        raise UsageError(
            f"--device-free: {_named(ep, ident)} writes no EPContext model, so there is nothing to compile",
            "drop --device-free (and --compile)",
        )
    return ident


def runner(strict: bool) -> JobRunner:
    """A compile.run_jobs replacement for derive.py: every job device-free, provenance in prepared.json."""

    def run(jobs: Sequence[CompileJob], src_dir: Path, out_dir: Path, timeout_s: float) -> list[CompileOutcome]:
        outcomes: list[CompileOutcome] = []
        made: dict[str, Any] = {}
        for job in jobs:
            out = Path(out_dir) / job.output
            outcome, report = _compile_one(job, Path(src_dir) / job.source, out, timeout_s, strict)
            outcomes.append(outcome)
            if report is not None:
                made[job.output] = report
        if made:
            (Path(out_dir) / PREPARED_FILE).write_text(json.dumps({"stages": made}, indent=2), encoding="utf-8")
        return outcomes

    run.checks_on_device = False  # type: ignore[attr-defined]  # a hit here opens no session: see derive.py
    return run


def _compile_one(
    job: CompileJob, src: Path, out: Path, timeout_s: float, strict: bool, session_config: Mapping[str, Any] = {}
) -> tuple[CompileOutcome, dict[str, Any] | None]:
    ident = _identity(job.ep) or {}
    args = [
        str(src),
        str(out),
        job.ep,
        str(ident.get("library_path")),
        json.dumps(job.provider_options),
        job.graph_optimization_level,
        "1" if strict else "0",
        json.dumps(dict(session_config)),
    ]
    context = child.ChildContext((), {"WINML_PERF_NO_PLUGIN_DISCOVERY": "1"}, tuple(sys.path))
    result = child.run_module(CHILD_MODULE, args, context, timeout_s)
    ms = round(result.wall_s * 1000.0, 3)
    if result.exit.signal is not None and not result.exit.timed_out:
        raise UsageError(
            f"--device-free: {_named(job.ep, ident)} {result.exit.text} while compiling {job.source} on its "
            "virtual device: this EP version cannot compile without a device",
            f"prepare on a machine with a {eps.ep_alias(job.ep)} device (drop --device-free)",
        )
    if result.exit.timed_out or not result.ok or not out.is_file():
        for p in out.parent.glob(out.stem + "*"):
            p.unlink(missing_ok=True)
        status = CompileStatus.TIMEOUT if result.exit.timed_out else CompileStatus.FAILED
        why = (
            result.exit.text
            if result.exit.timed_out
            else capability_error(result.stderr, job.ep, job.ep + VIRTUAL) or result.failure()
        )
        if strict and "fallback to CPU EP has been explicitly disabled" in why:
            why = f"--strict (session.disable_cpu_ep_fallback): {why}"
        return CompileOutcome(job.stages, job.source, job.ep, None, status, f"device-free: {why}", ms), None
    report = _last_json(result.stdout) or {}
    return CompileOutcome(job.stages, job.source, job.ep, job.output, CompileStatus.COMPILED, "", ms), _provenance(
        job, ident, report, strict
    )


def compile_plain(
    model: Path, out: Path, ep: str, level: str, options: Mapping[str, Any], config: Mapping[str, Any], timeout_s: float
) -> float:
    """A plain .onnx model compiled device-free to ``out``; its provenance in ``out``'s folder's prepared.json.
    Returns the compile's milliseconds; a failed compile is a BundleError (exit 2) saying why."""
    from winml_perf.support.errors import BundleError

    job = CompileJob((model.stem,), model.name, ep, {str(k): str(v) for k, v in options.items()}, level)
    strict = str(config.get("session.disable_cpu_ep_fallback")) == "1"
    outcome, report = _compile_one(job, model, out, timeout_s, strict, config)
    if report is None:
        raise BundleError(
            f"{model}: device-free compile for {eps.ep_alias(ep)}: {outcome.reason}", "nothing was written"
        )
    prepared = {"stages": {out.name: report}}
    (out.parent / PREPARED_FILE).write_text(json.dumps(prepared, indent=2), encoding="utf-8")
    return outcome.compile_ms


def _provenance(job: CompileJob, ident: Mapping[str, Any], report: dict[str, Any], strict: bool) -> dict[str, Any]:
    return {
        "made": "device-free",
        "stages": list(job.stages),
        "ep": job.ep,
        "registered_as": report.get("registered_as"),
        "device": report.get("device"),
        **{k: ident.get(k) for k in VERSION_KEYS},
        "onnxruntime": report.get("onnxruntime"),
        "target_options": {k: v for k, v in job.provider_options.items() if k in TARGET_KEYS},
        "compatibility_info": report.get("compatibility_info"),
        "strict": strict,
        "host": platform.node(),
        "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "placement": report.get("placement"),
    }


def _last_json(stdout: str) -> dict[str, Any] | None:
    for line in reversed(stdout.strip().splitlines()):
        try:
            data = json.loads(line)
        except ValueError:
            continue
        if isinstance(data, dict):
            return data
    return None


def read_prepared(folder: Path) -> dict[str, Any]:
    """output file -> provenance, from ``folder``'s prepared.json ({} when none)."""
    try:
        data = json.loads((Path(folder) / PREPARED_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    stages = data.get("stages") if isinstance(data, dict) else None
    return stages if isinstance(stages, dict) else {}


def reuse_report(
    made: Mapping[str, Any], ep: str, options: Mapping[str, str], verdict: Mapping[str, Any] | None
) -> dict[str, Any]:
    """``reuse_report_of`` the plugin library that serves ``ep`` here (a prepared plain model)."""
    return reuse_report_of(made, _identity(ep), options, verdict)


def reuse_report_of(
    made: Mapping[str, Any],
    plugin: Mapping[str, Any] | None,
    options: Mapping[str, str],
    verdict: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """How a compiled stage was made, what runs it now (``plugin``: the running EP's plugin identity,
    None: none), and whether they match ("ok", else what differs)."""
    ident = plugin or {}
    now = {k: str(v) for k, v in options.items() if k in TARGET_KEYS}
    running = {**{k: ident.get(k) for k in VERSION_KEYS}, "target_options": now}
    built = {k: made.get(k) for k in VERSION_KEYS}
    diffs = [f"{k} {built[k]} -> {running[k]}" for k in VERSION_KEYS if built[k] != running[k]]
    before = {k: str(v) for k, v in (made.get("target_options") or {}).items()}
    diffs += [f"{k} {before.get(k)} -> {now.get(k)}" for k in sorted(before | now) if before.get(k) != now.get(k)]
    if verdict is not None and verdict.get("verdict") not in ("compatible", "verified"):
        diffs.append(f"compatibility {verdict.get('verdict')}: {verdict.get('detail')}")
    made_keys = ("made", "registered_as", "host", "created_utc", "onnxruntime", "compatibility_info", "imported_from")
    return {
        "built": {**{k: made.get(k) for k in made_keys}, **built, "target_options": before},
        "running": running,
        "matched": "ok" if not diffs else "mismatch: " + "; ".join(diffs),
    }


def placement_lines(folder: Path) -> list[str]:
    """One line per compiled stage: nodes on the EP, nodes on CPU and their ops (from prepared.json)."""
    lines = []
    for output, made in sorted(read_prepared(folder).items()):
        p = made.get("placement") or {}
        ops = ", ".join(f"{op} x{n}" for op, n in (p.get("cpu_ops") or {}).items()) or "-"
        lines.append(
            f"placement {', '.join(made.get('stages') or [])} ({output}, device-free on {made.get('registered_as')}): "
            f"{p.get('ep_nodes')} node(s) in {p.get('partitions')} EPContext partition(s), "
            f"{p.get('cpu_nodes')} on CPU ({ops})"
        )
    return lines
