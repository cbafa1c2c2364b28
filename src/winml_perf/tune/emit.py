"""--emit DIR: the winning route written as a bundle folder that `winml perf DIR` measures as its config.

The route's folder (the derived bundle under _compiled/, or the source bundle for config) gives its
genai_config.json, copied, with the per-stage provider options the route runs with; every other
file is hard-linked to its resolved target (copied when the file system refuses a link), so the
weights are not duplicated and nothing is written outside DIR. The derive step's own bookkeeping
(manifest.json, placement.json, _compiled/) stays behind. tune.json says where the folder came from.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from winml_perf.support.errors import UsageError

LEFT_BEHIND = {"manifest.json", "placement.json", "_compiled"}
CONFIG_FILE = "genai_config.json"


def check_emit_dir(dest: Path) -> None:
    """Before any measuring: DIR must not exist yet (or be an empty folder), and its parent must."""
    if dest.is_symlink() or (dest.exists() and (not dest.is_dir() or any(dest.iterdir()))):
        raise UsageError(f"--emit {dest}: exists and is not an empty folder", "pass a new folder for the bundle")
    if not dest.parent.is_dir():
        raise UsageError(f"--emit {dest}: its parent folder {dest.parent} does not exist", "create it first")


def emit_bundle(route_folder: Path, dest: Path, about: Mapping[str, Any]) -> list[str]:
    """Write the bundle at ``route_folder`` into ``dest``; the files written. On any error ``dest``
    is removed again (nothing half-written)."""
    check_emit_dir(dest)
    created = not dest.exists()
    dest.mkdir(exist_ok=True)
    written: list[str] = []
    try:
        for src in sorted(route_folder.rglob("*")):
            rel = src.relative_to(route_folder)
            if rel.parts[0] in LEFT_BEHIND or src.is_dir():
                continue
            target = dest / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            if rel == Path(CONFIG_FILE):
                shutil.copyfile(src, target)
            else:
                _link(Path(os.path.realpath(src)), target)
            written.append(str(rel))
        (dest / "tune.json").write_text(json.dumps(dict(about), indent=2) + "\n", encoding="utf-8")
        written.append("tune.json")
    except BaseException:
        shutil.rmtree(dest, ignore_errors=True) if created else _empty(dest)
        raise
    return written


def _link(src: Path, dst: Path) -> None:
    """A hard link to the resolved file, else a copy (another file system)."""
    try:
        os.link(src, dst)
    except OSError:
        shutil.copyfile(src, dst)


def _empty(dest: Path) -> None:
    for child in dest.iterdir():
        shutil.rmtree(child, ignore_errors=True) if child.is_dir() else child.unlink(missing_ok=True)
