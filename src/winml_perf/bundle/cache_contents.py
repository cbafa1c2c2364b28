"""What an artifact folder holds, recorded when it is built and verified before it is reused.

Each file but the manifest gets one entry in the manifest's ``contents``:

- a file the build wrote, up to ``DIGEST_LIMIT`` bytes (a rewritten config, a compiled EPContext
  model): its size and sha256, so an edit or a truncation is seen;
- a link to a source (hard link, or symlink to the resolved target): the target's real path and its
  identity (st_dev, st_ino, size, mtime_ns), so a dangling link or a changed target is seen;
- a written file over the limit (a large context binary or weights file): its identity.

Verifying costs one ``stat`` per file plus hashing the small written files: well under a millisecond
for the tiny bundles (docs/benchmarks.md). A symlink's target is recorded resolved, so the source's
own links (a Hugging Face snapshot into ``blobs/``) never leave a relative link dangling here.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from winml_perf.support.json_shapes import NUMBER, ListOf, Opt

DIGEST_LIMIT = 8 << 20  # bytes: written files up to this size are hashed on every reuse
ENTRY = {
    "file": str,
    "size": int,
    "sha256": Opt(str),
    "target": Opt(str),
    "dev": Opt(int),
    "ino": Opt(int),
    "mtime_ns": Opt(NUMBER),
}
SHAPE = {"contents": ListOf(ENTRY)}


def identity(st: os.stat_result) -> dict[str, Any]:
    return {"dev": st.st_dev, "ino": st.st_ino, "size": st.st_size, "mtime_ns": st.st_mtime_ns}


def record(
    folder: Path, files: Iterable[str], linked_from: Mapping[tuple[int, int], str], sha256: Callable[[Path], str]
) -> list[dict[str, Any]]:
    """The ``contents`` entries of ``files`` (relative to ``folder``); ``linked_from`` maps a source's
    (st_dev, st_ino) to its real path, so a hard link names what it links."""
    out = []
    for rel in sorted(files):
        path = Path(folder) / rel
        lst = os.lstat(path)
        if stat.S_ISLNK(lst.st_mode):
            out.append({"file": rel, "target": os.path.realpath(path), **identity(os.stat(path))})
        elif (lst.st_dev, lst.st_ino) in linked_from:
            out.append({"file": rel, "target": linked_from[(lst.st_dev, lst.st_ino)], **identity(lst)})
        elif lst.st_size > DIGEST_LIMIT:
            out.append({"file": rel, **identity(lst)})
        else:
            out.append({"file": rel, "size": lst.st_size, "sha256": sha256(path)})
    return out


def verify(folder: Path, contents: list[dict[str, Any]], sha256: Callable[[Path], str]) -> str | None:
    """None when every entry still holds, else what is wrong (naming the file)."""
    for entry in contents:
        rel = entry["file"]
        if os.path.isabs(rel) or ".." in Path(rel).parts:
            return f"the manifest lists {rel!r}, which is outside the folder"
        path = Path(folder) / rel
        try:
            st = os.stat(path)
        except FileNotFoundError:
            if os.path.islink(path):
                return f"lacks {rel} (a dangling link to {os.readlink(path)})"
            return f"lacks {rel}"
        except OSError as exc:
            return f"cannot read {rel} ({exc.strerror})"
        if entry.get("sha256") is not None:
            if not stat.S_ISREG(st.st_mode) or os.path.islink(path):
                return f"{rel} is no longer the file the cache wrote"
            if st.st_size != entry["size"]:
                return f"{rel} was truncated or rewritten ({st.st_size} bytes, the manifest says {entry['size']})"
            if sha256(path) != entry["sha256"]:
                return f"{rel} was edited (its sha256 differs from the manifest's)"
            continue
        now = identity(st)
        changed = [k for k in ("size", "mtime_ns", "ino", "dev") if entry.get(k) != now[k]]
        if changed:
            what = f"its link to {entry['target']}" if entry.get("target") else "it"
            return f"{rel} changed since it was made ({what}: {', '.join(changed)} differ)"
    return None
