"""A bundle's bytes, mtimes and links as one comparable value: commands must leave a source bundle as they found it.

``tree_state(folder)`` walks without following links (a link is recorded as its target text, so a
command that replaced a link by a file, or wrote through one, shows) and skips ``_compiled/`` at the
top, the cache's own folder. ``assert_unchanged(before, folder)`` names what differs.
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

COMPILED = "_compiled"


def tree_state(folder: Path) -> dict[str, tuple]:
    """rel path -> ("file", size, mtime_ns, mode, sha256) | ("link", target) | ("dir", mode)."""
    folder = Path(folder)
    out: dict[str, tuple] = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        rel_dir = os.path.relpath(dirpath, folder)
        if rel_dir == ".":
            dirnames[:] = [d for d in dirnames if d != COMPILED]
        for name in sorted(dirnames + filenames):
            path = os.path.join(dirpath, name)
            rel = os.path.normpath(os.path.join(rel_dir, name))
            st = os.lstat(path)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", os.readlink(path))
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("dir", stat.S_IMODE(st.st_mode))
            else:
                digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()
                out[rel] = ("file", st.st_size, st.st_mtime_ns, stat.S_IMODE(st.st_mode), digest)
    return out


def assert_unchanged(before: dict[str, tuple], folder: Path) -> None:
    after = tree_state(folder)
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    assert not changed, f"{folder} changed: " + ", ".join(
        f"{k} ({'added' if k not in before else 'removed' if k not in after else 'modified'})" for k in changed[:10]
    )
