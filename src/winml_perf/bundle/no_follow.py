"""Nothing under an artifact root (``_compiled/`` or its cache folder) is followed outside it.

A bundle may come from anywhere, its ``_compiled/`` included: a link planted there (the root
itself, a lock file, an artifact folder, a manifest) would make a build open, write or remove
files at a path the bundle chooses. Every place the cache touches its root goes through here:
a planted link is refused with the reason (the root, a lock file) or removed and rebuilt (an
artifact folder), and removal never follows one.
"""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path

from winml_perf.support.errors import BundleError

REMEDY = "remove it (winml bundle clean BUNDLE removes links without following them)"


def link_refused(path: Path) -> BundleError:
    return BundleError(f"{path} is a symbolic link; nothing under an artifact folder is followed", REMEDY)


def refuse_link(path: Path) -> None:
    """Raise BundleError when ``path`` is a symbolic link (dangling or not)."""
    if os.path.islink(path):
        raise link_refused(path)


def open_lock_file(path: Path) -> int:
    """A descriptor of the lock file ``path``, created if absent, never through a link."""
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise link_refused(path) from None
        if exc.errno == errno.ENOENT:
            raise  # the folder went between mkdir and open: the caller retries
        raise BundleError(
            f"cannot create the lock file {path}: {exc.strerror}",
            "make the folder writable, or set WINML_PERF_CACHE_DIR to a writable folder",
        ) from exc


def remove(path: Path) -> None:
    """Remove ``path``: a link or a file is unlinked (never its target), a folder removed whole."""
    if os.path.islink(path) or not os.path.isdir(path):
        os.unlink(path)
    else:
        shutil.rmtree(path)


def remove_quietly(path: Path) -> None:
    try:
        remove(path)
    except OSError:
        pass


def write_new(path: Path, text: str) -> None:
    """Write ``text`` to a new file ``path``; an existing entry there (a planted link) is unlinked first."""
    if os.path.lexists(path):
        os.unlink(path)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
