"""Derived bundles: ``<bundle>/_compiled/<ep-alias>-<hash12>/``, cached by a key, published atomically.

The key (sha256) covers the rewritten config, the identity of every source file (size, mtime_ns,
inode; plus a content hash with ``verify_sources``), the onnxruntime and onnxruntime-genai versions,
the compile settings and ``FORMAT_VERSION``. Every source file is linked (hard link, else symlink,
else copy), so deriving costs the same for a 1 MB or a 10 GB bundle. A derivation writes into
``.tmp-<name>-<pid>-<rand>/`` and renames it into place while holding ``.<name>.lock``; a folder at
the final name is trusted only when its manifest.json carries the expected key and every file it
lists is present. The source bundle is never written: when its folder is not writable, derived
bundles go to ``$WINML_PERF_CACHE_DIR`` (default ``~/.cache/winml-perf``).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from filelock import FileLock

from winml_perf import eps
from winml_perf.bundle import compile as compiler
from winml_perf.bundle.config import CONFIG_NAME
from winml_perf.bundle.routing import RoutePlan
from winml_perf.errors import BundleError

FORMAT_VERSION = 1
COMPILED_DIR = "_compiled"
MANIFEST = "manifest.json"
CACHE_ENV = "WINML_PERF_CACHE_DIR"
PAUSE_ENV = "WINML_PERF_TEST_DERIVE_PAUSE"  # test hook: touch this path, then sleep before publishing
_HASH_CHUNK = 1 << 20


@dataclass(frozen=True)
class DeriveResult:
    path: Path
    key: str
    cache: str  # "hit" | "miss"
    reason: str
    derive_ms: float
    compile_ms: float
    bytes_written: int
    links: dict = field(default_factory=dict)
    compile: tuple[dict, ...] = ()
    warnings: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        return {
            "path": str(self.path), "key": self.key, "cache": self.cache, "reason": self.reason,
            "derive_ms": self.derive_ms, "compile_ms": self.compile_ms, "bytes_written": self.bytes_written,
            "links": dict(self.links), "compile": [dict(c) for c in self.compile], "warnings": list(self.warnings),
        }


# -- key ------------------------------------------------------------------------------------------
def runtime_versions() -> dict[str, str]:
    """Installed onnxruntime and onnxruntime-genai versions (any of their distributions)."""
    from importlib import metadata

    found = {}
    for key, dists in (
        ("onnxruntime", ("onnxruntime", "onnxruntime-gpu", "onnxruntime-qnn", "onnxruntime-openvino", "onnxruntime-directml", "onnxruntime-winml")),
        ("onnxruntime_genai", ("onnxruntime-genai", "onnxruntime-genai-cuda", "onnxruntime-genai-directml", "onnxruntime-genai-winml")),
    ):
        for dist in dists:
            try:
                found[key] = metadata.version(dist)
                break
            except metadata.PackageNotFoundError:
                continue
        else:
            found[key] = "absent"
    return found


def source_files(bundle: Path) -> list[str]:
    """Relative paths of every file of the bundle, outside ``_compiled/``, sorted."""
    out = []
    for dirpath, dirnames, filenames in os.walk(bundle):
        rel_dir = os.path.relpath(dirpath, bundle)
        if rel_dir == ".":
            dirnames[:] = [d for d in dirnames if d != COMPILED_DIR]
        dirnames.sort()
        for name in filenames:
            out.append(os.path.normpath(os.path.join(rel_dir, name)) if rel_dir != "." else name)
    return sorted(out)


def source_identities(bundle: Path, verify: bool = False) -> list[dict]:
    identities = []
    for rel in source_files(bundle):
        path = bundle / rel
        try:
            st = path.stat()
        except OSError as exc:
            raise BundleError(f"{path}: cannot be read ({exc.strerror})", "fix the bundle's files or permissions") from exc
        ident = {"file": rel, "size": st.st_size, "mtime_ns": st.st_mtime_ns, "inode": st.st_ino}
        if verify:
            ident["sha256"] = _file_sha256(path)
        identities.append(ident)
    return identities


def key_components(plan: RoutePlan, identities: list[dict], jobs: list) -> dict:
    return {
        "format_version": FORMAT_VERSION,
        "config_sha256": _sha256_text(json.dumps(plan.config.raw, sort_keys=True)),
        "sources_sha256": _sha256_text(json.dumps(identities, sort_keys=True)),
        "versions": runtime_versions(),
        "compile": [job.key_dict() for job in jobs],
    }


def cache_key(components: dict) -> str:
    return _sha256_text(json.dumps(components, sort_keys=True))


# -- where ----------------------------------------------------------------------------------------
def _bundle_writable(bundle: Path) -> bool:
    compiled = bundle / COMPILED_DIR
    target = compiled if compiled.exists() else bundle
    return os.access(target, os.W_OK | os.X_OK)


def cache_root(bundle: Path) -> Path:
    base = Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "winml-perf")
    return base / f"{bundle.resolve().name}-{_sha256_text(str(bundle.resolve()))[:8]}"


def derived_root(bundle: Path) -> Path:
    """``<bundle>/_compiled`` when the bundle folder is writable, else a per-bundle cache folder."""
    bundle = Path(bundle)
    return bundle / COMPILED_DIR if _bundle_writable(bundle) else cache_root(bundle)


def clean(bundle: Path) -> list[Path]:
    """Remove every derived bundle of ``bundle`` (``_compiled/`` and its cache folder). Returns what went."""
    bundle = Path(bundle)
    removed = []
    for root in (bundle / COMPILED_DIR, cache_root(bundle)):
        if root.exists():
            try:
                shutil.rmtree(root)
            except OSError as exc:
                raise BundleError(f"cannot remove {root}: {exc.strerror}", "check its permissions") from exc
            removed.append(root)
    return removed


# -- derive ---------------------------------------------------------------------------------------
def derive_bundle(plan: RoutePlan, *, verify_sources: bool = False, compile: bool = False, compile_timeout_s: float = 600.0) -> DeriveResult:
    """The derived bundle for ``plan``: reused when fresh, else built and published atomically."""
    t0 = time.perf_counter()
    bundle = Path(plan.config.bundle)
    identities = source_identities(bundle, verify_sources)
    jobs, _notes = compiler.compile_jobs(plan) if compile else ([], [])
    components = key_components(plan, identities, jobs)
    key = cache_key(components)
    root = derived_root(bundle)
    name = f"{eps.ep_alias(plan.ep) if plan.ep else 'config'}-{key[:12]}"
    final = root / name
    stale = _fresh_problem(final, key, jobs)
    if stale is None:
        return _hit(final, key, t0, "fresh: a derived bundle with this key exists")
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BundleError(f"cannot create {root}: {exc.strerror}", f"free space or set {CACHE_ENV} to a writable folder") from exc
    with FileLock(str(root / f".{name}.lock")):
        stale = _fresh_problem(final, key, jobs)
        if stale is None:
            return _hit(final, key, t0, "fresh: another process derived it just now")
        reason = _miss_reason(root, name, components, identities, stale)
        _remove_leftovers(root, name, final)
        return _build(plan, bundle, root, name, key, components, identities, jobs, reason, t0, compile_timeout_s)


def _hit(final: Path, key: str, t0: float, reason: str) -> DeriveResult:
    manifest = _read_manifest(final) or {}
    return DeriveResult(final, key, "hit", reason, _ms(t0), 0.0, 0, manifest.get("links", {}), tuple(manifest.get("compile", [])))


def _build(plan, bundle, root, name, key, components, identities, jobs, reason, t0, timeout_s) -> DeriveResult:
    tmp = root / f".tmp-{name}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        tmp.mkdir()
        links, written = _link_tree(bundle, tmp, [i["file"] for i in identities])
        config = plan.config
        outcomes, compile_ms = [], 0.0
        if jobs:
            outcomes = compiler.run_jobs(jobs, bundle, tmp, timeout_s)
            compile_ms = sum(o.compile_ms for o in outcomes)
            config = config.replace_filenames(compiler.filename_updates(outcomes))
            written += sum((tmp / o.output).stat().st_size for o in outcomes if o.status == "compiled")
        (tmp / CONFIG_NAME).unlink(missing_ok=True)  # a link to the source config: replace, never write through
        text = config.dumps()
        (tmp / CONFIG_NAME).write_text(text, encoding="utf-8")
        written += len(text.encode("utf-8"))
        manifest = {
            "format_version": FORMAT_VERSION, "key": key, "name": name, "components": components,
            "route": plan.route, "plan": plan.to_dict(),
            "source": {"bundle": str(bundle.resolve()), "files": identities},
            "files": sorted(set(os.path.relpath(os.path.join(d, f), tmp) for d, _, fs in os.walk(tmp) for f in fs) | {MANIFEST}),
            "links": links, "compile": [o.to_dict() for o in outcomes],
            "timings": {"derive_ms": _ms(t0), "compile_ms": compile_ms},
            "bytes_written": written, "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        data = json.dumps(manifest, indent=2)  # bytes_written in it counts everything but itself
        (tmp / MANIFEST).write_text(data, encoding="utf-8")
        written += len(data.encode("utf-8"))
        _test_pause()
        os.rename(tmp, root / name)
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise BundleError(f"cannot write derived bundle {root / name}: {exc.strerror or exc}", f"free disk space, or set {CACHE_ENV} to another folder; nothing half-made was kept") from exc
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    warnings = tuple(f"compile {o.output or o.source} ({', '.join(o.stages)}): {o.status}: {o.reason}" for o in outcomes if o.status in ("failed", "timeout"))
    return DeriveResult(root / name, key, "miss", reason, _ms(t0), compile_ms, written, links, tuple(o.to_dict() for o in outcomes), warnings)


def _link_tree(bundle: Path, dest: Path, files: list[str]) -> tuple[dict, int]:
    counts = {"hardlink": 0, "symlink": 0, "copy": 0}
    written = 0
    for rel in files:
        src, dst = bundle / rel, dest / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(src, dst)
            counts["hardlink"] += 1
            continue
        except OSError:
            pass
        try:
            os.symlink(src.resolve(), dst)
            counts["symlink"] += 1
            continue
        except OSError:
            pass
        shutil.copy2(src, dst)
        counts["copy"] += 1
        written += dst.stat().st_size
    return counts, written


# -- freshness ------------------------------------------------------------------------------------
def _read_manifest(folder: Path) -> dict | None:
    try:
        return json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _fresh_problem(final: Path, key: str, jobs: list) -> str | None:
    """None when ``final`` can be trusted, else why not."""
    if not final.exists():
        return "absent"
    manifest = _read_manifest(final)
    if manifest is None or manifest.get("key") != key:
        return f"{final.name} has no valid manifest (left by an interrupted or foreign derivation); rebuilding"
    missing = [f for f in manifest.get("files", []) if not os.path.lexists(final / f)]
    if missing:
        return f"{final.name} lacks {missing[0]}; rebuilding"
    for outcome in manifest.get("compile", []):
        if outcome.get("status") == "compiled":
            status, detail = compiler.compatibility(final / outcome["output"], outcome["ep"])
            if status in compiler.RECOMPILE_STATUSES:
                return f"compiled stage `{outcome['stages'][0]}` ({outcome['output']}) is {status} for the {eps.ep_alias(outcome['ep'])} devices here ({detail}); recompiling"
    return None


def _miss_reason(root: Path, name: str, comps: dict, identities: list[dict], stale: str) -> str:
    if stale != "absent":
        return stale
    alias = name.rsplit("-", 1)[0]
    best = None
    for folder in root.glob(f"{alias}-*"):
        manifest = _read_manifest(folder)
        if manifest and manifest.get("components") and (best is None or folder.stat().st_mtime > best[0]):
            best = (folder.stat().st_mtime, folder.name, manifest)
    if best is None:
        return "no derived bundle for this route yet"
    _, other, manifest = best
    old = manifest["components"]
    if old.get("format_version") != comps["format_version"]:
        return f"derivation format changed since {other} ({old.get('format_version')} -> {comps['format_version']})"
    if old.get("versions") != comps["versions"]:
        diffs = [f"{k} {old.get('versions', {}).get(k)} -> {v}" for k, v in comps["versions"].items() if old.get("versions", {}).get(k) != v]
        return f"runtime version changed since {other}: {', '.join(diffs)}"
    if old.get("sources_sha256") != comps["sources_sha256"]:
        before = {i["file"]: i for i in manifest.get("source", {}).get("files", [])}
        now = {i["file"]: i for i in identities}
        changed = sorted(f for f in before.keys() | now.keys() if before.get(f) != now.get(f))
        return f"source files changed since {other}: {', '.join(changed[:5]) or 'identities differ'}"
    if old.get("config_sha256") != comps["config_sha256"]:
        return f"rewritten config differs from {other} (genai_config.json or the route changed)"
    if old.get("compile") != comps["compile"]:
        return f"compile settings differ from {other}"
    return f"key differs from {other}"


def _remove_leftovers(root: Path, name: str, final: Path) -> None:
    """Under the lock: temp folders of this name belong to dead or failed derivations."""
    for tmp in root.glob(f".tmp-{name}-*"):
        shutil.rmtree(tmp, ignore_errors=True)
    if final.exists():
        shutil.rmtree(final)


def _test_pause() -> None:
    marker = os.environ.get(PAUSE_ENV)
    if marker:
        Path(marker).write_text(str(os.getpid()))
        time.sleep(3600)


def _file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_HASH_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def _sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _ms(t0: float) -> float:
    return round((time.perf_counter() - t0) * 1000.0, 3)
