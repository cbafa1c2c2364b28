"""--emit DIR: the winning route written as a bundle folder that `winml perf DIR` measures as its config.

The route's folder (the derived bundle under _compiled/, or the source bundle for config) gives its
genai_config.json, copied, with the per-stage provider options the route runs with; every other
file is hard-linked to its resolved target (copied when the file system refuses a link), so the
weights are not duplicated and nothing is written outside DIR. The derive step's own bookkeeping
(manifest.json, placement.json, _compiled/) stays behind. tune.json says where the folder came from.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from winml_perf.support import safe_write
from winml_perf.support.errors import UsageError

LEFT_BEHIND = {"manifest.json", "placement.json", "_compiled"}
CONFIG_FILE = "genai_config.json"


def check_emit_dir(dest: Path) -> None:
    """Before any measuring: DIR must not exist yet (or be an empty folder), and the folders it needs
    must be makeable: its nearest existing ancestor a writable folder (the missing ones are made when
    the bundle is written, as every output's folder is)."""
    if dest.is_symlink() or (dest.exists() and (not dest.is_dir() or any(dest.iterdir()))):
        raise UsageError(f"--emit {dest}: exists and is not an empty folder", "pass a new folder for the bundle")
    base = _existing_ancestor(dest)
    if not base.is_dir():
        raise UsageError(f"--emit {dest}: {base} is not a folder", "pass a folder path under a folder")
    if not os.access(base, os.W_OK | os.X_OK):
        raise UsageError(f"--emit {dest}: cannot make folders in {base} (not writable)", "pass a writable location")


def _existing_ancestor(dest: Path) -> Path:
    return next(p for p in Path(os.path.abspath(dest)).parents if p.exists() or p.is_symlink())


def _missing_parents(dest: Path) -> list[Path]:
    """The folders above ``dest`` that do not exist yet, nearest first."""
    return [p for p in Path(os.path.abspath(dest)).parents if not (p.exists() or p.is_symlink())]


def _files(route_folder: Path) -> list[tuple[Path, Path]]:
    """(source file, path relative to the bundle) of every file the emitted bundle needs: linked
    sub-folders and linked files are followed (the bundle is read, not written), each folder once."""
    out: list[tuple[Path, Path]] = []
    seen: set[str] = set()
    for folder, dirs, files in os.walk(route_folder, followlinks=True):
        real = os.path.realpath(folder)
        if real in seen:  # a link cycle
            dirs[:] = []
            continue
        seen.add(real)
        rel_folder = Path(folder).relative_to(route_folder)
        if rel_folder.parts and rel_folder.parts[0] in LEFT_BEHIND:
            dirs[:] = []
            continue
        dirs.sort()
        for name in sorted(files):
            rel = rel_folder / name
            if rel.parts[0] in LEFT_BEHIND:
                continue
            src = Path(folder) / name
            if not os.path.isfile(src):
                raise UsageError(
                    f"--emit: {src} of the bundle is not a readable file (a dangling link?)",
                    "fix the bundle folder, then tune again",
                )
            out.append((src, rel))
    return out


def verify_bundle(dest: Path, expected: list[tuple[Path, Path]]) -> None:
    """Every file of the route's bundle is in ``dest`` at its size, and genai_config.json names no
    file that is missing: an emitted bundle that cannot run is never reported as written."""
    missing = [
        str(rel)
        for src, rel in expected
        if not (dest / rel).is_file()
        or (rel != Path(CONFIG_FILE) and (dest / rel).stat().st_size != Path(src).stat().st_size)
    ]
    config = dest / CONFIG_FILE
    if config.is_file():
        text = config.read_text(encoding="utf-8", errors="replace")
        for name in sorted(set(_named_files(json.loads(text)))):
            if not (dest / name).is_file():
                missing.append(name)
    if missing:
        raise UsageError(
            f"--emit {dest}: the emitted bundle is incomplete (missing or short: {', '.join(missing[:5])})",
            "check the source bundle's files and free disk space, then tune again",
        )


def _named_files(node: Any) -> list[str]:
    """The model files genai_config.json names (every "filename" value)."""
    if isinstance(node, dict):
        found = [v for k, v in node.items() if k == "filename" and isinstance(v, str)]
        return found + [f for v in node.values() for f in _named_files(v)]
    if isinstance(node, list):
        return [f for v in node for f in _named_files(v)]
    return []


def emit_bundle(route_folder: Path, dest: Path, about: Mapping[str, Any]) -> list[str]:
    """Write the bundle at ``route_folder`` into ``dest`` through the safe-write layer, then verify it
    whole; the files written. On any error ``dest`` is removed again (nothing half-written)."""
    check_emit_dir(dest)
    files = _files(route_folder)
    created = not dest.exists()
    made = _missing_parents(dest)
    dest.mkdir(parents=True, exist_ok=True)
    written: list[str] = []
    try:
        for src, rel in files:
            safe_write.copy_file(src, dest / rel, root=dest, flag="--emit", link=rel != Path(CONFIG_FILE))
            written.append(str(rel))
        safe_write.write_text(dest / "tune.json", json.dumps(dict(about), indent=2) + "\n", root=dest, flag="--emit")
        written.append("tune.json")
        verify_bundle(dest, files)
    except BaseException:
        shutil.rmtree(dest, ignore_errors=True) if created else _empty(dest)
        for folder in made:  # the parents made for it, nearest first: nothing is left behind
            with contextlib.suppress(OSError):
                folder.rmdir()
        raise
    return written


def _empty(dest: Path) -> None:
    for child in dest.iterdir():
        shutil.rmtree(child, ignore_errors=True) if child.is_dir() else child.unlink(missing_ok=True)
