"""One artifact cache, for derived bundles and prepared ONNX models alike.

An artifact is a folder ``<root>/<prefix>-<key12>/`` holding what one build wrote and a
``manifest.json``. Its key is the sha256 of its components: what the caller says decides the content
(route, EP, options...), the identities of its source files (of a symlink's resolved target: st_dev,
st_ino, size, mtime_ns; plus sha256 when asked), the runtime versions and ``FORMAT_VERSION``.

A folder is trusted only after it is checked: its manifest has the expected shape and key, every
file it holds is what the manifest recorded (cache_contents.py: digests of what the build wrote,
identities of what it linked), and the caller's own check passes (e.g. a compiled model still suits
the devices here). Anything else is a miss whose reason says what was wrong or which component
changed since the newest sibling of the same prefix.

A build writes into ``.tmp-<name>-<pid>-<rand>/`` while holding the artifact's lock and is renamed
into place only when it returned; a build that raises leaves nothing behind. Builds hold the root's
lock shared and ``clean`` holds it exclusive, so a clean never removes a folder under a build; a run
holds it shared while it measures from a derived folder (``holding``), so neither under a run.

Root: ``<source folder>/_compiled`` when that folder is writable, else a per-source folder under
``$WINML_PERF_CACHE_DIR`` (default ``~/.cache/winml-perf``); the source folder is never written.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import re
import shutil
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from winml_perf.bundle import cache_contents, no_follow
from winml_perf.ep.table import runtime_distributions
from winml_perf.support import json_shapes
from winml_perf.support.errors import BundleError

FORMAT_VERSION = 2  # 2: manifests record and verify their contents; identities carry st_dev
COMPILED_DIR = "_compiled"
MANIFEST = "manifest.json"
CACHE_ENV = "WINML_PERF_CACHE_DIR"
ROOT_LOCK = ".lock"
_HASH_CHUNK = 1 << 20
#: The key's name for each runtime's version, and the runtime (its builds come from ep/table.py).
_VERSION_KEYS = {"onnxruntime": "onnxruntime", "onnxruntime_genai": "onnxruntime-genai"}
# What every manifest holds, and the type each entry must have.
MANIFEST_SHAPE: Mapping[str, object] = {
    "format_version": int,
    "key": str,
    "name": str,
    "components": dict,
    "source": dict,
    "files": list,
    **cache_contents.SHAPE,
}

Check = Callable[[Path, dict[str, Any]], "str | None"]
#: builds an artifact into a temporary folder and returns its manifest fields
Builder = Callable[[Path], dict[str, Any]]


# -- key ------------------------------------------------------------------------------------------
def runtime_versions() -> dict[str, str]:
    """Installed onnxruntime and onnxruntime-genai versions (any of their distributions)."""
    found = {}
    for key, runtime in _VERSION_KEYS.items():
        found[key] = "absent"
        for dist in runtime_distributions(runtime):
            try:
                found[key] = metadata.version(dist)
                break
            except metadata.PackageNotFoundError:
                continue
    return found


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_HASH_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def text_sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def source_identities(folder: Path, files: Sequence[str], verify: bool = False) -> list[dict[str, Any]]:
    """Identity of each file (relative to ``folder``; a symlink's resolved target): size, mtime_ns,
    inode, device, and sha256 with ``verify``."""
    out = []
    for rel in files:
        path = Path(folder) / rel
        try:
            st = path.stat()  # follows links: the identity is the target's
            ident = {"file": rel, "size": st.st_size, "mtime_ns": st.st_mtime_ns, "inode": st.st_ino, "dev": st.st_dev}
            if verify:
                ident["sha256"] = file_sha256(path)
        except OSError as exc:
            raise BundleError(
                f"{path}: cannot be read ({exc.strerror})", "fix the source's files or permissions"
            ) from exc
        out.append(ident)
    return out


@dataclass(frozen=True)
class Request:
    """One artifact asked for: where its sources are, its family, and what decides its content."""

    source_dir: Path  # the folder the artifact is derived from (a bundle, or a model's folder)
    prefix: str  # family; miss reasons compare with the newest sibling of the same prefix
    what: str  # what the artifact is, for messages: "derived bundle", "prepared model"
    settings: Mapping[str, Any]  # what the caller decides the content by (route, EP, options...)
    sources: list[dict[str, Any]]  # source_identities(...) of every file the build reads
    labels: Mapping[str, str] = field(default_factory=dict)  # component -> words for miss reasons
    shape: Mapping[str, object] = field(default_factory=dict)  # the caller's own required manifest entries

    @property
    def components(self) -> dict[str, Any]:
        return {
            "format_version": FORMAT_VERSION,
            **self.settings,
            "sources_sha256": text_sha256(json.dumps(self.sources, sort_keys=True)),
            "versions": runtime_versions(),
        }


@dataclass(frozen=True)
class Entry:
    """A trusted artifact folder: found fresh ("hit") or just built ("miss"), and why."""

    folder: Path
    key: str
    cache: str  # "hit" | "miss"
    reason: str
    manifest: dict[str, Any]
    manifest_bytes: int = 0  # size of manifest.json when this call wrote it


# -- where ----------------------------------------------------------------------------------------
def _writable(folder: Path) -> bool:
    compiled = folder / COMPILED_DIR
    return os.access(compiled if compiled.exists() else folder, os.W_OK | os.X_OK)


def fallback_root(source_dir: Path) -> Path:
    base = Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "winml-perf")
    resolved = Path(source_dir).resolve()
    return base / f"{resolved.name}-{text_sha256(str(resolved))[:8]}"


def root_for(source_dir: Path) -> Path:
    """``<source_dir>/_compiled`` when the folder is writable, else its folder under $WINML_PERF_CACHE_DIR."""
    source_dir = Path(source_dir)
    return source_dir / COMPILED_DIR if _writable(source_dir) else fallback_root(source_dir)


# -- locks ----------------------------------------------------------------------------------------
@contextlib.contextmanager
def _flock(path: Path, exclusive: bool, on_wait: Callable[[], None] | None = None) -> Iterator[None]:
    """Hold ``path`` locked (shared or exclusive). The file may be removed by an exclusive holder
    (clean): a waiter that then wakes on the removed file retries on a fresh one. ``on_wait`` is
    called once if the lock is held elsewhere, before waiting for it. The lock's folder (the root) is
    made first, at every try, and never through a link (``_make_root``)."""
    while True:
        _make_root(path.parent)
        try:
            import fcntl
        except ImportError:  # Windows: one exclusive lock serves both modes
            from filelock import FileLock

            with FileLock(str(path)):
                yield
            return
        try:
            fd = no_follow.open_lock_file(path)
        except FileNotFoundError:  # the folder went between mkdir and open
            continue
        try:
            mode = fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH
            try:
                fcntl.flock(fd, mode | fcntl.LOCK_NB)
            except BlockingIOError:
                if on_wait is not None:
                    on_wait()
                    on_wait = None
                fcntl.flock(fd, mode)
            try:
                same = os.stat(path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if same:
                yield
                return
        finally:
            os.close(fd)  # closing releases the lock


def _make_root(root: Path) -> None:
    """Create the artifact root; a root that is a symbolic link is refused (never followed)."""
    no_follow.refuse_link(root)
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BundleError(
            f"cannot create {root}: {exc.strerror}", f"free space or set {CACHE_ENV} to a writable folder"
        ) from exc
    no_follow.refuse_link(root)  # planted between the check and mkdir


def _root_lock(
    root: Path, exclusive: bool, on_wait: Callable[[], None] | None = None
) -> contextlib.AbstractContextManager[None]:
    return _flock(root / ROOT_LOCK, exclusive, on_wait)


def _artifact_lock(root: Path, name: str) -> contextlib.AbstractContextManager[None]:
    return _flock(root / f".{name}.lock", True)


@contextlib.contextmanager
def holding(source_dir: Path) -> Iterator[None]:
    """Keep ``clean`` away from the artifacts of ``source_dir`` meanwhile (its root's lock, shared):
    for work on an artifact after ``get_or_build`` returned it (placement read and saved, a run
    measuring from it)."""
    root = root_for(source_dir)
    made = not os.path.lexists(root)
    try:
        with _root_lock(root, exclusive=False):  # which makes the root
            yield
    finally:
        if made:  # a refused or empty run leaves no root behind
            _drop_if_bare(root)


def _drop_if_bare(root: Path) -> None:
    """Remove ``root`` when it holds nothing but its lock and no one else holds that lock (taken
    exclusive at once, as ``clean`` takes it; a waiter on the removed lock retries on a fresh one)."""
    try:
        import fcntl
    except ImportError:  # Windows: the lock file cannot go while it is open elsewhere; the root stays
        return
    lock = root / ROOT_LOCK
    try:
        if [p.name for p in root.iterdir()] != [ROOT_LOCK]:
            return
        fd = os.open(lock, os.O_RDWR | os.O_NOFOLLOW)  # never made here, never through a link
    except OSError:  # gone, or a link planted meanwhile: not this hold's to remove
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:  # another run holds it: it is theirs now
            return
        if os.stat(lock).st_ino == os.fstat(fd).st_ino and [p.name for p in root.iterdir()] == [ROOT_LOCK]:
            lock.unlink()
            root.rmdir()
    except OSError:  # gone or changed meanwhile: whoever changed it keeps it
        return
    finally:
        os.close(fd)


# -- manifest -------------------------------------------------------------------------------------
def read_manifest(folder: Path, shape: Mapping[str, Any] = MANIFEST_SHAPE) -> tuple[dict[str, Any] | None, str | None]:
    """(manifest, None) when ``folder/manifest.json`` is a JSON object of ``shape``, else (None, what is wrong)."""
    data, problem = json_shapes.read_json(Path(folder) / MANIFEST, shape)
    if data is not None and not all(isinstance(f, str) for f in data.get("files", [])):
        return None, f"{MANIFEST} lists a file that is not a string"
    return data, problem


def check_folder(
    folder: Path, key: str, shape: Mapping[str, object] = MANIFEST_SHAPE, check: Check | None = None
) -> tuple[dict[str, Any] | None, str | None]:
    """(manifest, None) when ``folder`` can be trusted as the artifact ``key``, else (None, why not)."""
    if folder.is_symlink():
        return None, f"{folder.name} is a symbolic link (nothing under {COMPILED_DIR}/ is followed); replacing it"
    if not folder.exists():
        return None, "absent"
    if (folder / MANIFEST).is_symlink():
        return None, f"{folder.name}/{MANIFEST} is a symbolic link (nothing is followed); rebuilding"
    manifest, problem = read_manifest(folder, {**MANIFEST_SHAPE, **shape})
    if manifest is None:
        return None, f"{folder.name} has no valid manifest ({problem}); rebuilding"
    if manifest["key"] != key:
        return None, f"{folder.name} has no valid manifest (its key is not this artifact's); rebuilding"
    problem = cache_contents.verify(folder, manifest["contents"], file_sha256)
    if problem:
        return None, f"{folder.name} {problem}; rebuilding" if problem.startswith(
            "lacks"
        ) else f"{folder.name}: {problem}; rebuilding"
    if check is not None:
        problem = check(folder, manifest)
        if problem:
            return None, problem
    return manifest, None


def miss_reason(root: Path, request: Request, components: dict[str, Any], stale: str) -> str:
    """Why there was no fresh artifact: what was wrong with the folder, or what changed since the
    newest sibling of the same prefix."""
    if stale != "absent":
        return stale
    sibling = re.compile(rf"^{re.escape(request.prefix)}-[0-9a-f]{{12}}$")
    olds = []
    for folder in root.glob(f"{request.prefix}-*") if root.exists() else ():
        own = sibling.match(folder.name) and not folder.is_symlink()
        manifest, _ = read_manifest(folder) if own else (None, None)
        if manifest is not None:
            olds.append((folder.stat().st_mtime, folder.name, manifest))
    if not olds:
        return f"no {request.what} for this route yet"
    _, other, manifest = max(olds, key=lambda t: t[0])
    old = manifest["components"]
    changed = [k for k in {**old, **components} if old.get(k) != components.get(k)]
    parts = [_change(k, old.get(k), components.get(k), request, manifest) for k in changed]
    return "; ".join(parts or ["key changed"]) + f" (compared with {other})"


def _change(name: str, old: Any, new: Any, request: Request, manifest: dict[str, Any]) -> str:
    label = request.labels.get(name) or {
        "sources_sha256": "source files",
        "versions": "runtime versions",
        "format_version": "cache format",
    }.get(name, name)
    if name == "sources_sha256":
        before = {i.get("file"): i for i in manifest["source"].get("files", []) if isinstance(i, dict)}
        now = {i["file"]: i for i in request.sources}
        files = sorted(f for f in before.keys() | now.keys() if before.get(f) != now.get(f) and isinstance(f, str))
        detail = ", ".join(files[:5])
    elif isinstance(old, dict) and isinstance(new, dict):
        detail = ", ".join(f"{k} {old.get(k)} -> {new.get(k)}" for k in {**old, **new} if old.get(k) != new.get(k))
    elif isinstance(old, (str, int, float, type(None))) and isinstance(new, (str, int, float, type(None))):
        detail = f"{old} -> {new}"
    else:
        detail = ""
    return f"{label} changed" + (f": {detail}" if detail else "")


# -- get or build ---------------------------------------------------------------------------------
def publish(tmp: Path, final: Path) -> None:
    """Make a finished build visible under its final name (one rename)."""
    os.rename(tmp, final)


def get_or_build(request: Request, build: Builder, check: Check | None = None) -> Entry:
    """The artifact for ``request``: reused when it passes the checks, else built and published.

    ``build(tmp)`` writes the artifact's files into ``tmp`` and returns the caller's manifest entries;
    this function adds the common ones (key, name, components, source, files) and writes the manifest.
    """
    components = request.components
    key = text_sha256(json.dumps(components, sort_keys=True))
    root = root_for(request.source_dir)
    name = f"{request.prefix}-{key[:12]}"
    final = root / name
    with _root_lock(root, exclusive=False):  # checked under the lock too: no clean removes files mid-check
        manifest, stale = check_folder(final, key, request.shape, check)
        if manifest is not None:
            return Entry(final, key, "hit", f"fresh: a {request.what} with this key exists", manifest)
        with _artifact_lock(root, name):
            return _rebuild(request, root, name, key, components, build, check)


def _rebuild(
    request: Request, root: Path, name: str, key: str, components: dict[str, Any], build: Builder, check: Check | None
) -> Entry:
    """Under the artifact's lock: reuse what another process just built, else build and publish."""
    final = root / name
    manifest, stale = check_folder(final, key, request.shape, check)
    if manifest is not None:
        return Entry(final, key, "hit", "fresh: another process built it just now", manifest)
    assert stale is not None  # check_folder says why whenever it gives no manifest
    reason = miss_reason(root, request, components, stale)
    for leftover in root.glob(f".tmp-{name}-*"):  # under the lock: left by dead or failed builds
        no_follow.remove_quietly(leftover)
    if os.path.lexists(final):
        no_follow.remove(final)  # a planted link goes, its target stays
    manifest, size = _build(request, root, name, key, components, build)
    return Entry(final, key, "miss", reason, manifest, size)


def _build(
    request: Request, root: Path, name: str, key: str, components: dict[str, Any], build: Builder
) -> tuple[dict[str, Any], int]:
    tmp = root / f".tmp-{name}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        tmp.mkdir()
        body = build(tmp)
        written = sorted(os.path.relpath(os.path.join(d, f), tmp) for d, _, fs in os.walk(tmp) for f in fs)
        files = sorted(set(written) | {MANIFEST})
        contents = cache_contents.record(tmp, written, _linked_from(request), file_sha256)
        manifest = {
            **body,
            "format_version": FORMAT_VERSION,
            "key": key,
            "name": name,
            "components": components,
            "source": {
                **body.get("source", {}),
                "folder": str(Path(request.source_dir).resolve()),
                "files": request.sources,
            },
            "files": files,
            "contents": contents,
            "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        data = json.dumps(manifest, indent=2)
        (tmp / MANIFEST).write_text(data, encoding="utf-8")
        publish(tmp, root / name)
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise BundleError(
            f"cannot write {root / name}: {exc.strerror or exc}",
            f"free disk space, or set {CACHE_ENV} to another folder; nothing half-made was kept",
        ) from exc
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return manifest, len(data.encode("utf-8"))


def _linked_from(request: Request) -> dict[tuple[int, int], str]:
    """(st_dev, st_ino) -> real path of every source, so a hard link in an artifact names its target."""
    out = {}
    for ident in request.sources:
        if "dev" in ident:
            out[(ident["dev"], ident["inode"])] = os.path.realpath(Path(request.source_dir) / ident["file"])
    return out


# -- clean ----------------------------------------------------------------------------------------
def roots_of(source_dir: Path) -> list[Path]:
    """Every place artifacts of ``source_dir`` may be: its ``_compiled/`` and its fallback folder."""
    return [Path(source_dir) / COMPILED_DIR, fallback_root(source_dir)]


def clean(source_dir: Path, family: str | None = None, on_wait: Callable[[Path], None] | None = None) -> list[Path]:
    """Remove the artifacts of ``source_dir``: whole roots, or with ``family`` (a regular expression
    a prefix must match whole) only those artifacts with their locks and temp folders. Each root's
    lock is held exclusive meanwhile, so no build or measurement is under way: ``on_wait(root)`` is
    called when clean has to wait for one. Returns what went."""
    removed = []
    for root in roots_of(source_dir):
        if root.is_symlink():  # planted: the link goes, never what it points at
            _remove_from(root.parent, root)
            removed.append(root)
            continue
        if not root.is_dir():
            continue
        if (root / ROOT_LOCK).is_symlink():
            _remove_from(root, root / ROOT_LOCK)
        with _root_lock(root, exclusive=True, on_wait=functools.partial(on_wait, root) if on_wait else None):
            try:
                if family is None:
                    shutil.rmtree(root)
                    removed.append(root)
                    continue
                mine = re.compile(rf"^(\.tmp-|\.)?(?:{family})-[0-9a-f]{{12}}(\.lock|-.*)?$")
                for path in sorted(root.iterdir()):
                    if mine.match(path.name):
                        no_follow.remove(path)
                        removed.append(path)
                if [p.name for p in root.iterdir()] == [ROOT_LOCK]:
                    (root / ROOT_LOCK).unlink()  # held: a waiter on it retries on a fresh one
            except OSError as exc:
                raise _cannot_remove(root, exc) from exc
    return removed


def _remove_from(folder: Path, path: Path) -> None:
    try:
        no_follow.remove(path)
    except OSError as exc:
        raise _cannot_remove(folder, exc) from exc


def _cannot_remove(root: Path, exc: OSError) -> BundleError:
    return BundleError(
        f"cannot remove from {root}: {exc.strerror}",
        "make the bundle folder writable (a read-only bundle keeps its derived bundles in "
        f"{CACHE_ENV}, default ~/.cache/winml-perf) and rerun",
    )
