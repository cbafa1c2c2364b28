"""Writing a command's result to ``-o PATH``: checked before the work, written whole or not at all.

What ``PATH`` is decides how it is written:

- a regular file, or nothing yet: a temporary file in the same folder renamed over it (atomic;
  an existing file keeps its permission bits);
- a symlink: followed; its target is written as above, and the link stays a link;
- a FIFO or a character device (``/dev/null``, ``/dev/stdout``, a terminal): opened and written
  in place, never replaced, the way a shell's ``>`` does;
- a folder, a block device, a socket, or anything under ``/proc`` or ``/sys``: refused, because
  writing a JSON document there replaces a disk or makes no sense;
- ``-``: standard output, where the command leaves it free for this output (`winml results export
  -o -`); where stdout carries the command's own output (`winml perf`, `serve`, `tune`), refused,
  saying which ``--format`` puts this output there. This is the one rule for ``-``.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from pathlib import Path

from winml_perf.support.errors import UsageError

#: Pseudo filesystems: what is written there is not a file anyone can read back.
PSEUDO_ROOTS = (Path("/proc"), Path("/sys"))


def _target(path: Path) -> Path:
    """Where writing ``path`` lands: symlinks followed (a dangling one names the file to create)."""
    return Path(os.path.realpath(path))


def _refuse(flag: str, path: Path, why: str) -> UsageError:
    return UsageError(f"{flag} {path}: {why}", f"pass {flag} with a writable file path")


def _in_place(mode: int) -> bool:
    return stat.S_ISFIFO(mode) or stat.S_ISCHR(mode)


STDOUT = "-"  # the output path that names standard output


def names_stdout(path: Path | str) -> bool:
    return str(path) == STDOUT


def refuse_stdout_folder(path: Path | str | None, flag: str) -> None:
    """Exit 2 for ``-`` where a command writes a folder (a dashboard's site, a bundle): standard
    output holds one stream, not a folder (``-`` was made a folder of that name)."""
    if path is not None and names_stdout(path):
        raise UsageError(f"{flag} -: this writes a folder, which standard output cannot hold", f"give {flag} a folder")


def check_output(path: Path, flag: str = "-o", *, stdout_ok: bool = False, instead: str = "") -> None:
    """Refuse (exit 2) an output path that cannot take the result; create its folder. ``-`` is
    standard output when ``stdout_ok`` (nothing else of the command goes there), else refused, with
    ``instead`` saying how to have this output on stdout (``--format json``)."""
    if names_stdout(path):
        if stdout_ok:
            return
        raise UsageError(
            f"{flag} -: standard output already carries this command's output (--format)",
            f"{instead + ', or ' if instead else ''}give {flag} a file",
        )
    path = Path(path)
    try:
        target = _target(path)
    except FileNotFoundError:  # a relative path, and the working folder is gone
        raise _refuse(flag, path, "is relative to the working folder, which no longer exists") from None
    if any(target == root or root in target.parents for root in PSEUDO_ROOTS):
        raise _refuse(flag, path, f"{target} is on a pseudo filesystem ({target.parts[1]})")
    try:
        mode = target.stat().st_mode
    except FileNotFoundError:
        mode = None
    except OSError as exc:
        raise _refuse(flag, path, f"cannot be looked at ({exc.strerror or exc})") from None
    if mode is not None:
        if stat.S_ISDIR(mode):
            raise _refuse(flag, path, "is a folder")
        if _in_place(mode):
            if not os.access(target, os.W_OK):
                raise _refuse(flag, path, "is not writable")
            return
        if not stat.S_ISREG(mode):
            raise _refuse(flag, path, "is a special file (block device or socket) a result cannot be written to")
        if not os.access(target, os.W_OK):
            raise _refuse(flag, path, "is not writable")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _refuse(flag, path, f"cannot create its folder ({exc.strerror or exc})") from None
    if not os.access(target.parent, os.W_OK | os.X_OK):
        raise _refuse(flag, path, "its folder is not writable")


def write_output(path: Path, text: str, flag: str = "-o") -> None:
    """Write ``text`` to ``path`` as the module doc says; UsageError when it cannot be written."""
    write_output_chunks(path, [text], flag)


def write_output_chunks(path: Path, chunks: Iterable[str], flag: str = "-o") -> None:
    """``write_output`` of the text ``chunks`` make, one after another (a long run's record is
    never one string in memory); ``-`` (checked by ``check_output``): standard output."""
    if names_stdout(path):
        import sys

        sys.stdout.writelines(chunks)
        sys.stdout.flush()
        return
    target = _target(Path(path))
    try:
        mode = target.stat().st_mode
    except OSError:
        mode = None
    try:
        if mode is not None and _in_place(mode):
            with open(target, "w", encoding="utf-8") as fh:
                fh.writelines(chunks)
            return
        _replace(target, chunks, mode)
    except OSError as exc:
        raise UsageError(
            f"{flag} {path}: cannot write ({exc.strerror or exc})", f"pass {flag} with a writable path"
        ) from None


def _replace(target: Path, chunks: Iterable[str], old_mode: int | None) -> None:
    from winml_perf.support.safe_write import temp_name

    tmp = temp_name(target)  # unique to the process and the call: concurrent writers never share one
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.writelines(chunks)
            fh.flush()
            os.fsync(fh.fileno())
        if old_mode is not None:
            os.chmod(tmp, stat.S_IMODE(old_mode))
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
