"""The one safe-write layer: every file the tool writes into a folder it was given goes through here.

- **No link is followed out of the chosen folder.** The folder itself is the user's choice (it may
  be a link); below it, a component that is a symbolic link (a planted ``site/pages`` or a file
  ``dest/x.bin`` pointing at ``~/.bashrc``) is refused with exit 2 naming the link, before anything
  is written when the caller checks its whole plan first (``check_plan``).
- **Whole or not at all, whoever else writes.** A file is written to a temporary name unique to the
  process and the call (``.NAME.PID.RANDOM.tmp``), opened with O_EXCL|O_NOFOLLOW, then renamed
  over its name (atomic); a failed write leaves no temporary file. Concurrent writers of one
  folder (three ``winml dashboard -o site`` at once) each finish whole, the last rename wins.
"""

from __future__ import annotations

import os
import secrets
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import BinaryIO

from winml_perf.support.errors import UsageError


def _link_refused(flag: str, root: Path, link: Path) -> UsageError:
    try:
        target = os.readlink(link)
    except OSError:
        target = "?"
    return UsageError(
        f"{flag} {root}: {link} is a symbolic link (to {target}); nothing is written through a link",
        f"remove the link, or pass {flag} with another folder",
    )


def _below(root: Path, path: Path, flag: str) -> list[Path]:
    """The components of ``path`` below ``root`` (``root`` excluded), nearest first; ``path`` must lie under it."""
    root_abs, path_abs = Path(os.path.abspath(root)), Path(os.path.abspath(path))
    try:
        rel = path_abs.relative_to(root_abs)
    except ValueError:
        raise UsageError(f"{flag} {root}: {path} lies outside it", f"pass {flag} with another folder") from None
    if ".." in rel.parts:
        raise UsageError(f"{flag} {root}: {path} climbs out of it", f"pass {flag} with another folder")
    out, here = [], root_abs
    for part in rel.parts:
        here = here / part
        out.append(here)
    return out


def check_no_link(root: Path, path: Path, flag: str = "-o") -> None:
    """Raise UsageError (exit 2) naming the first symbolic link between ``root`` and ``path`` (``path`` included)."""
    for component in _below(root, path, flag):
        if os.path.islink(component):
            raise _link_refused(flag, Path(root), component)


def check_plan(root: Path, paths: Iterable[Path], flag: str = "-o") -> None:
    """``check_no_link`` for every path a command will write, before it writes the first."""
    for path in paths:
        check_no_link(root, path, flag)


def make_folders(root: Path, folder: Path, flag: str = "-o") -> None:
    """Create ``folder`` (and what lies between it and ``root``), never through a link."""
    Path(root).mkdir(parents=True, exist_ok=True)
    for component in _below(root, folder, flag):
        try:
            os.mkdir(component)
        except FileExistsError:
            pass
        if os.path.islink(component):
            raise _link_refused(flag, Path(root), component)
        if not os.path.isdir(component):
            raise UsageError(f"{flag} {root}: {component} is not a folder", f"remove it, or pass {flag} elsewhere")


def temp_name(path: Path) -> Path:
    """A temporary name beside ``path``, unique to this process and this call."""
    return path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")


def _open_new(tmp: Path) -> BinaryIO:
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    return os.fdopen(fd, "wb")


def _commit(tmp: Path, path: Path, root: Path | None, flag: str) -> None:
    if root is not None:
        check_no_link(root, path, flag)  # planted while we wrote: the rename would replace the link, still refuse
    os.replace(tmp, path)


def write_bytes(path: Path, data: bytes, root: Path | None = None, flag: str = "-o") -> None:
    """Write ``data`` to ``path`` whole (a unique temporary name, then a rename); with ``root``, the
    folders between are made and no link below ``root`` is followed."""
    path = Path(path)
    if root is not None:
        make_folders(root, path.parent, flag)
        check_no_link(root, path, flag)
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_name(path)
    try:
        with _open_new(tmp) as fh:
            fh.write(data)
        _commit(tmp, path, root, flag)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_text(path: Path, text: str, root: Path | None = None, flag: str = "-o") -> None:
    """``write_bytes`` of ``text`` in UTF-8."""
    write_bytes(path, text.encode("utf-8", errors="backslashreplace"), root, flag)


def copy_file(src: Path, path: Path, root: Path | None = None, flag: str = "-o", link: bool = False) -> None:
    """Copy the file ``src`` (links in the source are followed: it is read, not written) to ``path``
    whole; ``link``: a hard link where the file system allows one, else a copy."""
    path = Path(path)
    if root is not None:
        make_folders(root, path.parent, flag)
        check_no_link(root, path, flag)
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_name(path)
    try:
        if link:
            try:
                os.link(os.path.realpath(src), tmp)
            except OSError:
                link = False
        if not link:
            with open(src, "rb") as fin, _open_new(tmp) as fout:
                shutil.copyfileobj(fin, fout, 1 << 20)
            shutil.copystat(src, tmp)
        _commit(tmp, path, root, flag)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
