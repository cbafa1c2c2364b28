"""Keep stdout for our own output: native libraries that print on fd 1 are sent to stderr.

libQnnHtp prints a " # LIBNATIVE: ..." line on **stdout** when it loads (LIBNATIVE_CONFIG does not
silence it), which broke every ``--format json``. ``own_stdout()`` duplicates fd 1, points fd 1 at
a pipe whose thread copies each line to stderr for as long as it is held (so whatever a library, or
a child process inheriting fd 1, writes there lands on stderr, the LIBNATIVE line left out) and
makes ``sys.stdout`` write to the duplicate: what we print still reaches the real stdout, and
nothing else does. On exit fd 1 and ``sys.stdout`` are put back.

It acts only when ``sys.stdout`` is this process's own fd 1 (not a test's StringIO or a pipe wrapper).
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import sys
import threading
from collections.abc import Iterable, Iterator
from typing import Any, TextIO

#: Lines native libraries print that say nothing to a user of this tool: libQnnHtp's
#: " # LIBNATIVE: No alternate configuration present in libnative_tls.conf ..." on every QNN load
#: (its log settings do not reach it: LIBNATIVE_CONFIG changes what it reads, not that it prints).
NATIVE_NOISE = re.compile(r"^\s*# LIBNATIVE: ")


def without_native_noise(text: str) -> str:
    """``text`` without the lines of NATIVE_NOISE (a child's captured stderr or stdout)."""
    if "LIBNATIVE" not in text:
        return text
    return "".join(line for line in text.splitlines(keepends=True) if not NATIVE_NOISE.match(line))


class _NativeFilter:
    """A pipe whose reading thread copies every line to stderr (fd 2) but NATIVE_NOISE's."""

    def __init__(self) -> None:
        self.read_fd, self.write_fd = os.pipe()
        self._thread = threading.Thread(target=self._pump, name="winml-native-stdout", daemon=True)
        self._thread.start()

    def _pump(self) -> None:
        with os.fdopen(self.read_fd, "rb", buffering=0) as pipe:
            pending = b""
            while chunk := pipe.read(65536):
                pending += chunk
                *lines, pending = pending.split(b"\n")
                self._write(b"".join(line + b"\n" for line in lines if not _noise(line)))
            if pending and not _noise(pending):
                self._write(pending)

    @staticmethod
    def _write(data: bytes) -> None:
        while data:
            try:
                data = data[os.write(2, data) :]
            except OSError:  # stderr is gone: what a library printed goes nowhere
                return

    def join(self) -> None:
        """Wait for what was written before fd 1 was put back (a child still holding the pipe
        open keeps it going: wait a moment, not for the child)."""
        self._thread.join(timeout=1.0)


def _noise(line: bytes) -> bool:
    return NATIVE_NOISE.match(line.decode("utf-8", "replace")) is not None


def _is_fd1(stream: TextIO | None) -> bool:
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
    native = _NativeFilter()  # fd 1 now feeds a thread that passes lines on to stderr, the noise left out
    os.dup2(native.write_fd, 1)
    os.close(native.write_fd)
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
        os.dup2(real, 1)  # the pipe's last writer here is gone: the thread reads to its end
        native.join()
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

    def __init__(self, stream: TextIO) -> None:
        self.unguarded = stream

    def write(self, text: str) -> int:
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        from winml_perf.support.secrets import mask
        from winml_perf.support.terminal_text import clean

        self.unguarded.write(clean(mask(text)))
        return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:  # every other attribute is the stream's
        if name == "buffer":
            raise AttributeError(name)
        return getattr(self.unguarded, name)


def unguarded(stream: TextIO) -> TextIO:
    """The stream under a GuardedText (or ``stream`` itself)."""
    under: TextIO = getattr(stream, "unguarded", stream)
    return under


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
