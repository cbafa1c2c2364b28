"""Keep stdout for our own output: native libraries that print on fd 1 are sent to stderr.

libQnnHtp prints a " # LIBNATIVE: ..." line on **stdout** when it loads (LIBNATIVE_CONFIG does not
silence it), which broke every ``--format json``. ``own_stdout()`` duplicates fd 1, points fd 1 at
stderr for as long as it is held (so whatever a library, or a child process inheriting fd 1, writes
there lands on stderr) and makes ``sys.stdout`` write to the duplicate: what we print still reaches
the real stdout, and nothing else does. On exit fd 1 and ``sys.stdout`` are put back.

It acts only when ``sys.stdout`` is this process's own fd 1 (not a test's StringIO or a pipe wrapper).
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
from collections.abc import Iterator


def _is_fd1(stream) -> bool:
    try:
        return stream is not None and stream.fileno() == 1
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        return False


@contextlib.contextmanager
def own_stdout() -> Iterator[None]:
    if not _is_fd1(sys.stdout) or not _is_fd1(sys.__stdout__):
        yield
        return
    previous = sys.stdout
    previous.flush()
    real = os.dup(1)
    os.dup2(2, 1)
    stream = io.TextIOWrapper(
        os.fdopen(real, "wb", buffering=0 if previous.line_buffering else -1),
        encoding=previous.encoding,
        errors=previous.errors,
        line_buffering=bool(previous.line_buffering),  # TextIO types it int
        write_through=True,
    )
    sys.stdout = stream
    try:
        yield
    finally:
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
        sys.stdout = previous
        os.dup2(real, 1)
        try:
            stream.close()  # closes the duplicate
        except (OSError, ValueError):  # its reader is gone (`winml ... | head`): what is left goes nowhere
            pass


class GuardedText:
    """A text stream whose every write passes the one redaction (support/secrets.py) and the one
    terminal sanitiser (support/terminal_text.py): where the CLI's text leaves the program.

    ``unguarded`` is the stream underneath, for a writer that emits its own escape codes (rich's
    progress bars) and cleans the names it shows itself. No ``buffer`` is offered, so nothing
    (click's echo) writes bytes past the guard."""

    def __init__(self, stream) -> None:
        self.unguarded = stream

    def write(self, text: str) -> int:
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        from winml_perf.support.secrets import mask
        from winml_perf.support.terminal_text import clean

        self.unguarded.write(clean(mask(text)))
        return len(text)

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str):
        if name == "buffer":
            raise AttributeError(name)
        return getattr(self.unguarded, name)


def unguarded(stream):
    """The stream under a GuardedText (or ``stream`` itself)."""
    return getattr(stream, "unguarded", stream)


@contextlib.contextmanager
def guarded_streams() -> Iterator[None]:
    """sys.stdout and sys.stderr as GuardedText while held; put back on exit."""
    previous = sys.stdout, sys.stderr
    sys.stdout = GuardedText(previous[0])
    sys.stderr = GuardedText(previous[1])
    try:
        yield
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        sys.stdout, sys.stderr = previous
