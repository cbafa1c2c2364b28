"""Derived bundles: ``<bundle>/_compiled/<ep-alias>-<hash12>/``, kept in the artifact cache (cache.py).

What decides a derived bundle: the rewritten config (every stage's EP and options: a per-stage route's
whole mapping), the route's decided options (ep/effective.py: the user's ``--ep-option`` keys,
``device_type``, the EP name taken; each EP's for a per-stage route), the identity of every source file (size,
mtime_ns, inode; plus a content hash with ``verify_sources``), the compile settings, and what the
cache adds (runtime versions, its format). Every source file is linked (hard link, else symlink,
else copy), so deriving costs the same for a 1 MB or a 10 GB bundle; the config is written anew,
never through a link. A source that is a symlink (a Hugging Face snapshot's link into ``blobs/``,
a file in a linked sub-folder) is linked as its resolved target, never as the link itself.

A compiled stage is trusted only while it is fit to reuse here (bundle/epcontext/compat.py: onnxruntime's answer,
else a session with the run's options, kept in compat.json). A compile that fails is never published: the route then runs the
derived bundle without compiled stages (its own artifact), and the outcomes say which compile
failed; the next run tries the compile again. The source bundle is never written.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from winml_perf.bundle import cache
from winml_perf.bundle.config import CONFIG_NAME
from winml_perf.bundle.epcontext import compat
from winml_perf.bundle.epcontext import compile as compiler
from winml_perf.bundle.routing import RoutePlan
from winml_perf.ep import table as eps
from winml_perf.model.route import COMPILE_FAILURES, CompileOutcome, CompileStatus
from winml_perf.support.json_shapes import NUMBER, ListOf, Opt

LABELS = {
    "config_sha256": "the rewritten config (genai_config.json or the route)",
    "compile": "compile settings",
    "options": "the route's options (--ep-option, device_type, EP name)",
    "plugins": "plugin EP (package, version, SDK, library digest)",
}
OUTCOME_SHAPE = {
    "stages": ListOf(str),
    "source": str,
    "ep": str,
    "output": Opt(str),
    "status": str,
    "reason": Opt(str),
    "compile_ms": Opt(NUMBER),
}
SHAPE = {"links": {"hardlink": int, "symlink": int, "copy": int}, "compile": ListOf(OUTCOME_SHAPE), "plan": dict}


class _CompileFailed(Exception):
    """A compile job of the build failed: the build is dropped, nothing is published."""

    def __init__(self, outcomes: list[CompileOutcome], compile_ms: float) -> None:
        super().__init__("compile failed")
        self.outcomes, self.compile_ms = outcomes, compile_ms


@dataclass(frozen=True)
class DeriveResult:
    path: Path
    key: str
    cache: str  # "hit" | "miss"
    reason: str
    derive_ms: float
    compile_ms: float
    bytes_written: int
    links: dict[str, Any] = field(default_factory=dict)
    #: each compile job's outcome, a compiled stage's with its verdict as this route finds it (``_shown``)
    compile: tuple[CompileOutcome, ...] = ()
    warnings: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "key": self.key,
            "cache": self.cache,
            "reason": self.reason,
            "derive_ms": self.derive_ms,
            "compile_ms": self.compile_ms,
            "bytes_written": self.bytes_written,
            "links": dict(self.links),
            "compile": [c.to_dict() for c in self.compile],
            "warnings": list(self.warnings),
        }


def plugin_identities(plan: RoutePlan, plugins: Mapping[str, Mapping[str, Any]] | None) -> dict[str, Any]:
    """EP -> what its plugin library is (package, version, SDK version, library sha256), for the plan's
    non-CPU EPs served by a plugin here (``plugins``: what the caller registered, ep/plugins.py
    ``plugins_here``; None: asked here, EP by EP, for a caller that did not say): a new onnxruntime-qnn
    or QNN SDK makes a new derived bundle, so no caller can leave the identity out of the key."""
    from winml_perf.ep.plugins import plugin_identity

    out = {}
    for ep in sorted({s.ep_after for s in plan.stages if s.ep_after and s.ep_after != eps.CPU_EP}):
        ident = plugin_identity(ep) if plugins is None else plugins.get(ep)
        if ident is not None:
            out[ep] = {k: ident.get(k) for k in ("package", "version", "sdk_version", "library_sha256")}
    return out


def _options_key(plan: RoutePlan) -> dict[str, Any] | None:
    """The decided options the key holds: the forced EP's, or each EP's of a per-stage route."""
    if plan.options is not None:
        return plan.options.key_dict()
    return {o.ep: o.key_dict() for o in plan.options_per_ep} or None


def _folder_prefix(plan: RoutePlan) -> str:
    """The derived folder's name before its hash: the forced EP, ``stages`` for a per-stage route, else ``config``."""
    return plan.ep_alias or ("stages" if plan.assignment else "config")


def source_files(bundle: Path) -> list[str]:
    """Relative paths of every file of the bundle, outside ``_compiled/``, sorted. Linked sub-folders
    are followed (each real folder once, so a link loop ends)."""
    out, seen = [], set()
    for dirpath, dirnames, filenames in os.walk(bundle, followlinks=True):
        rel_dir = os.path.relpath(dirpath, bundle)
        seen.add(os.path.realpath(dirpath))
        if rel_dir == ".":
            dirnames[:] = [d for d in dirnames if d != cache.COMPILED_DIR]
        dirnames[:] = sorted(d for d in dirnames if os.path.realpath(os.path.join(dirpath, d)) not in seen)
        for name in filenames:
            out.append(os.path.normpath(os.path.join(rel_dir, name)) if rel_dir != "." else name)
    return sorted(out)


def clean(bundle: Path, on_wait: Callable[[Path], None] | None = None) -> list[Path]:
    """Remove every derived bundle of ``bundle`` (``_compiled/`` and its cache folder). Returns what went."""
    return cache.clean(Path(bundle), on_wait=on_wait)


# -- derive ---------------------------------------------------------------------------------------
def derive_bundle(
    plan: RoutePlan,
    *,
    plugins: Mapping[str, Mapping[str, Any]] | None = None,
    verify_sources: bool = False,
    jobs: Sequence[compiler.CompileJob] = (),
    compile_timeout_s: float = 600.0,
    runner: compiler.JobRunner | None = None,
    no_recompile: bool = False,
) -> DeriveResult:
    """The derived bundle for ``plan``: reused when fresh, else built and published atomically.
    ``plugins``: what each plugin EP library the caller registered is, by EP name (ep/plugins.py
    ``plugins_here``; None: asked here), of which the key holds the plan's EPs' (``plugin_identities``).
    ``jobs``: the plan's compile jobs (compile.compile_jobs; none: nothing is compiled); ``runner``
    compiles them (default compile.run_jobs; device_free.runner compiles with no device);
    ``no_recompile``: a route with stages to compile and no fresh derived bundle is refused (exit 2).
    A compile that fails leaves the uncompiled derived bundle, made from the same sources."""
    t0 = time.perf_counter()
    bundle = Path(plan.config.bundle)
    keyed = plugin_identities(plan, plugins)  # the compiled stages' checks read it from here
    options = {s.name: {str(k): str(v) for k, v in (s.ep_options or {}).items()} for s in plan.config.stages}
    sources = _Sources(bundle, cache.source_identities(bundle, source_files(bundle), verify_sources), keyed, options)
    try:
        return _derived(plan, sources, jobs, compile_timeout_s, runner, no_recompile, t0)
    except _CompileFailed as failed:  # the sources are not read again (nor hashed, with verify_sources)
        plain = _derived(plan, sources, (), compile_timeout_s, None, False, time.perf_counter())
        return _without_compile(plain, failed, t0)


@dataclass(frozen=True)
class _Sources:
    """What a route's derived bundles are made from besides the plan, read once a route: the source
    bundle, the identity of each of its files, each EP's plugin identity (``plugin_identities``), and
    each stage's provider options in the plan's config, which the derived bundle's config is written
    from (its first provider's, as Stage.ep_options holds them from the parse): what a compiled stage's
    checks and reports read."""

    bundle: Path
    identities: list[dict[str, Any]]
    plugins: dict[str, Any]
    options: dict[str, dict[str, str]]


def _derived(
    plan: RoutePlan,
    sources: _Sources,
    jobs: Sequence[compiler.CompileJob],
    compile_timeout_s: float,
    runner: compiler.JobRunner | None,
    no_recompile: bool,
    t0: float,
) -> DeriveResult:
    """``derive_bundle`` from ``sources``: _CompileFailed when a compile job fails (nothing published)."""
    bundle, plugins = sources.bundle, sources.plugins
    settings = {
        "config_sha256": cache.text_sha256(json.dumps(plan.config.raw, sort_keys=True)),
        "compile": [job.key_dict() for job in jobs],
        "options": _options_key(plan),
        "plugins": plugins,
    }
    request = cache.Request(bundle, _folder_prefix(plan), "derived bundle", settings, sources.identities, LABELS, SHAPE)
    built: dict[str, Any] = {}
    verdicts: dict[str, dict[str, Any]] = {}  # filled by the freshness check: a hit hands them on
    fit = functools.partial(_compiled_stages_fit, sources, verdicts)
    if no_recompile and jobs:
        from winml_perf.bundle.epcontext.travel import require_fresh

        require_fresh(request, fit)

    def build(tmp: Path) -> dict[str, Any]:
        built.update(_write(plan, sources, tmp, list(jobs), compile_timeout_s, runner or compiler.run_jobs))
        if any(o.status in COMPILE_FAILURES for o in built["outcomes"]):
            raise _CompileFailed(built["outcomes"], built["compile_ms"])
        return {
            "route": plan.route,
            "plan": plan.to_dict(),
            "source": {"bundle": str(bundle.resolve())},
            "links": built["links"],
            "compile": [o.to_dict() for o in built["outcomes"]],
            "timings": {"derive_ms": _ms(t0), "compile_ms": built["compile_ms"]},
            "bytes_written": built["written"],
        }

    # A device-free runner's hit is trusted on its key and contents: checking a compiled stage opens the EP's device.
    on_device = getattr(runner, "checks_on_device", True)
    entry = cache.get_or_build(request, build, fit if on_device else None)
    manifest, hit = entry.manifest, entry.cache == "hit"
    outcomes = tuple(CompileOutcome.from_dict(c) for c in manifest["compile"])  # the manifest keeps dicts
    # a hit on a device shows its freshness check's verdicts; one just compiled (the compile child's) or device-free is not checked
    shown = _shown(outcomes, entry.folder, sources, verdicts if hit and on_device else None)
    if hit:
        return DeriveResult(entry.folder, entry.key, "hit", entry.reason, _ms(t0), 0.0, 0, manifest["links"], shown)
    return DeriveResult(
        entry.folder,
        entry.key,
        "miss",
        entry.reason,
        _ms(t0),
        built["compile_ms"],
        built["written"] + entry.manifest_bytes,
        built["links"],
        shown,
    )


def _shown(
    outcomes: tuple[CompileOutcome, ...],
    folder: Path,
    sources: _Sources,
    checked: Mapping[str, Mapping[str, Any]] | None,
) -> tuple[CompileOutcome, ...]:
    """Each compiled stage's verdict: with ``checked`` (a hit on a device) as this reuse's freshness check
    found it (onnxruntime's answer, or the kept session verdict); else as it stands (just compiled: the
    compile child's; device-free: None, not checked). A stage prepared device-free also says how it was
    made and whether this run matches ("prepared"), with the stage's options and each EP's plugin identity
    as ``sources`` holds them (the derived bundle's config is not read for them)."""
    from winml_perf.bundle.epcontext import device_free

    made = device_free.read_prepared(folder)
    out = []
    for o in outcomes:
        if o.status != "compiled" or not (checked is not None or o.compiled_output in made):
            out.append(o)
            continue
        if checked is not None:  # every compiled stage of a hit on a device was checked before it was reused
            verdict: dict[str, Any] | None = dict(checked[o.compiled_output])
        else:
            verdict = dict(o.compatibility) if isinstance(o.compatibility, dict) else None
        shown = verdict or {
            "verdict": "unknown",
            "source": "none",
            "status": "NOT_CHECKED",
            "info": made[o.compiled_output].get("compatibility_info"),
            "detail": "prepared device-free: no device here to check it on",
        }
        if o.compiled_output in made:
            options = sources.options.get(o.stages[0], {})
            shown["prepared"] = device_free.reuse_report_of(
                made[o.compiled_output], sources.plugins.get(o.ep), options, verdict
            )
        out.append(replace(o, compatibility=shown))
    return tuple(out)


def _without_compile(plain: DeriveResult, failed: _CompileFailed, t0: float) -> DeriveResult:
    """The uncompiled derived bundle ``plain``, reported with the outcomes of the compile that failed."""
    bad = [o for o in failed.outcomes if o.status in COMPILE_FAILURES]
    names = "; ".join(f"{', '.join(o.stages)}: {o.status}" for o in bad)
    discarded = "compiled, but not used: another compile of this route failed and nothing was published"
    outcomes = tuple(
        o
        if o.status != "compiled"  # failed, timed out, or nothing to compile: said as it was
        else replace(o, output=None, status=CompileStatus.DISCARDED, reason=discarded)
        for o in failed.outcomes
    )
    warnings = tuple(f"compile {o.source} ({', '.join(o.stages)}): {o.status}: {o.reason}" for o in bad)
    reason = f"compile failed ({names}), so nothing compiled was published; the route runs its source models ({plain.reason})"
    return DeriveResult(
        plain.path,
        plain.key,
        plain.cache,
        reason,
        _ms(t0),
        failed.compile_ms,
        plain.bytes_written,
        plain.links,
        outcomes,
        warnings + plain.warnings,
    )


def _write(
    plan: RoutePlan, sources: _Sources, tmp: Path, jobs: list[Any], timeout_s: float, runner: compiler.JobRunner
) -> dict[str, Any]:
    """Fill ``tmp``: links to the sources, compiled stages, the rewritten config."""
    bundle = sources.bundle
    links, written = _link_tree(bundle, tmp, [i["file"] for i in sources.identities])
    config, outcomes, compile_ms = plan.config, [], 0.0
    if jobs:
        outcomes = runner(jobs, bundle, tmp, timeout_s)
        compile_ms = sum(o.compile_ms for o in outcomes)
        config = config.replace_filenames(compiler.filename_updates(outcomes))
        # the compile children's session verdicts: a hit needs no session
        compat.remember(tmp, outcomes, sources.options, sources.plugins)
        written += sum((tmp / o.compiled_output).stat().st_size for o in outcomes if o.status == "compiled")
    (tmp / CONFIG_NAME).unlink(missing_ok=True)  # a link to the source config: replace, never write through
    text = config.dumps()
    (tmp / CONFIG_NAME).write_text(text, encoding="utf-8")
    return {
        "links": links,
        "outcomes": outcomes,
        "compile_ms": compile_ms,
        "written": written + len(text.encode("utf-8")),
    }


def _link_tree(bundle: Path, dest: Path, files: list[str]) -> tuple[dict[str, Any], int]:
    """Link each source's resolved target into ``dest``: a hard link, else a symlink relative to the
    real folder (it stays valid when the bundle and its ``_compiled/`` move together), else a copy."""
    counts = {"hardlink": 0, "symlink": 0, "copy": 0}
    written = 0
    for rel in files:
        src, dst = Path(os.path.realpath(bundle / rel)), dest / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(src, dst)  # src is resolved: this links the file, not a link to it
            counts["hardlink"] += 1
            continue
        except OSError:
            pass
        try:
            os.symlink(os.path.relpath(src, os.path.realpath(dst.parent)), dst)
            counts["symlink"] += 1
            continue
        except OSError:
            pass
        shutil.copy2(src, dst)
        counts["copy"] += 1
        written += dst.stat().st_size
    return counts, written


# -- freshness ------------------------------------------------------------------------------------
def _compiled_stages_fit(
    sources: _Sources, verdicts: dict[str, dict[str, Any]], folder: Path, manifest: dict[str, Any]
) -> str | None:
    """None while every compiled stage is fit to reuse here (bundle/epcontext/compat.py), else why it must be
    recompiled: each checked with its options and its EP's plugin identity as ``sources`` holds them (the
    folder's config, verified with its contents, is the plan's: not read for them; the identity is the
    one the derived bundle is keyed under: not asked again). ``verdicts`` is refilled with each compiled
    output's verdict, which a hit hands on (not checked again)."""
    verdicts.clear()
    for outcome in manifest["compile"]:  # of OUTCOME_SHAPE: the cache checked it
        if outcome["status"] in COMPILE_FAILURES:
            return f"{folder.name} records a failed compile ({', '.join(outcome['stages'])}); recompiling"
        if outcome["status"] != "compiled":
            continue
        output, ep, stages = outcome.get("output"), outcome["ep"], outcome["stages"]
        if not output or not stages or output not in manifest["files"]:
            return f"{folder.name} has no valid manifest (a compiled stage lacks its output or stages); rebuilding"
        stage = stages[0]
        verdict = compat.check_stage_with(folder, output, ep, sources.options.get(stage, {}), sources.plugins.get(ep))
        verdicts[output] = verdict.to_dict()
        if not verdict.fit:
            return (
                f"compiled stage `{stage}` ({output}) cannot be reused on the {eps.ep_alias(ep)} devices here "
                f"({verdict.verdict} by {verdict.source}, {verdict.status}: {verdict.detail}); recompiling"
            )
    return None


def _ms(t0: float) -> float:
    return round((time.perf_counter() - t0) * 1000.0, 3)
