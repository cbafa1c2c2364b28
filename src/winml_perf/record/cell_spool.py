"""A sweep's finished cells kept on disk, not in memory (issue 36: memory flat in the number of cells).

``CellSpool`` takes each cell's record as soon as it is final and writes its JSON as one line of a
file in a folder of its own (``tempfile.mkdtemp``: new, private to the user, never an existing
path), opened new with O_EXCL and without following a link; it keeps only where each line starts,
its length, the cell's index and whether it is ok (33 bytes a cell). The first few cells
(KEEP_CELLS, within KEEP_SAMPLES samples) stay in memory instead: a run of one or a few cells
pays nothing for the spool. The folder is removed when the spool is no longer referenced, or at exit.

``SpooledCells`` is the read-only view a ``RunRecord`` carries as its ``cells``: a
``Sequence[CellRecord]`` in cell-index order that decodes a cell when it is asked for, so a
consumer that walks the cells holds one at a time. A decoded cell is the record as ``-o`` writes
and ``CellRecord.from_dict`` reads it: the same ``to_dict()``, the same JSON, byte for byte.
``ok_cells(cells)`` is the ok cells as such a view too (no decoding to find them).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import threading
import weakref
from array import array
from collections.abc import Iterator, Sequence
from typing import IO, Any, overload

from winml_perf.model.record import CellRecord

_FILE = "cells.jsonl"
#: A sweep's first cells stay in memory, as many as this and within KEEP_SAMPLES samples in all:
#: a run of a few cells pays no encoding and no decoding for the spool (its closing output walks
#: the cells about nine times), and memory is still bounded however many cells follow.
KEEP_CELLS = 32
KEEP_SAMPLES = 100_000


def _close_and_remove(handle: IO[bytes], folder: str, owner: int) -> None:
    handle.close()
    if os.getpid() == owner:  # never a copy of this process removing its parent's folder
        shutil.rmtree(folder, ignore_errors=True)


class CellSpool:
    """Finished cells' records, one JSON line each in a private temporary file (module doc)."""

    def __init__(self) -> None:
        self.folder = tempfile.mkdtemp(prefix="winml-perf-cells-")
        flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
        self._file = os.fdopen(os.open(os.path.join(self.folder, _FILE), flags, 0o600), "w+b")
        self._lock = threading.Lock()
        self._offsets = array("q")
        self._lengths = array("q")
        self._indices = array("q")  # each line's cell_index
        self._ok = bytearray()
        self._end = 0
        self._kept: dict[int, CellRecord] = {}  # line -> a record kept in memory (not in the file)
        self._kept_samples = 0
        self._finalizer = weakref.finalize(self, _close_and_remove, self._file, self.folder, os.getpid())

    def __len__(self) -> int:
        return len(self._offsets)

    def append(self, record: CellRecord) -> None:
        """Keep ``record``: in memory while the first cells fit KEEP_CELLS and KEEP_SAMPLES, else on
        disk (its ``to_json()``, one line)."""
        samples = len(record.samples.warmup) + len(record.samples.iterations)
        with self._lock:
            if len(self._kept) < KEEP_CELLS and self._kept_samples + samples <= KEEP_SAMPLES:
                self._kept[len(self._offsets)] = record
                self._kept_samples += samples
                self._offsets.append(-1)
                self._lengths.append(0)
            else:
                data = record.to_json().encode("utf-8") + b"\n"
                self._file.seek(self._end)
                self._file.write(data)
                self._offsets.append(self._end)
                self._lengths.append(len(data))
                self._end += len(data)
        self._indices.append(record.cell_index)
        self._ok.append(1 if record.ok else 0)

    def read(self, line: int) -> CellRecord:
        """The record of the ``line``-th cell appended."""
        kept = self._kept.get(line)
        if kept is not None:
            return kept
        with self._lock:
            self._file.seek(self._offsets[line])
            data = self._file.read(self._lengths[line])
        return CellRecord.from_dict(json.loads(data), owned=True)

    def ok(self, line: int) -> bool:
        return bool(self._ok[line])

    def cells(self) -> SpooledCells:
        """The cells appended so far, in cell-index order (a sweep finishes them in its own)."""
        return SpooledCells(self, array("q", sorted(range(len(self)), key=self._indices.__getitem__)))

    def close(self) -> None:
        """Remove the file now (the views over it can no longer be read)."""
        self._finalizer()


class SpooledCells(Sequence[CellRecord]):
    """Read-only cells of a spool, decoded one at a time when asked for (module doc)."""

    __slots__ = ("_lines", "_spool")

    def __init__(self, spool: CellSpool, lines: array[int]) -> None:
        self._spool = spool
        self._lines = lines  # spool line of each cell, in this view's order

    def __len__(self) -> int:
        return len(self._lines)

    @overload
    def __getitem__(self, i: int) -> CellRecord: ...

    @overload
    def __getitem__(self, i: slice) -> SpooledCells: ...

    def __getitem__(self, i: int | slice) -> CellRecord | SpooledCells:
        if isinstance(i, slice):
            return SpooledCells(self._spool, self._lines[i])
        return self._spool.read(self._lines[i])

    def __iter__(self) -> Iterator[CellRecord]:
        for line in self._lines:
            yield self._spool.read(line)

    def ok_only(self) -> SpooledCells:
        """The ok cells, in this view's order."""
        return SpooledCells(self._spool, array("q", (n for n in self._lines if self._spool.ok(n))))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence):
            return NotImplemented
        return len(other) == len(self) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]  # compared by content, as a list is

    def __repr__(self) -> str:
        return f"SpooledCells({len(self)} cells in {self._spool.folder})"

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled or deep-copied as the tuple of its cells (the file does not travel)."""
        return (tuple, (tuple(self),))


def ok_cells(cells: Sequence[CellRecord]) -> Sequence[CellRecord]:
    """The ok cells of ``cells``, in order: a spooled view stays one (nothing decoded to find them)."""
    if isinstance(cells, SpooledCells):
        return cells.ok_only()
    return [c for c in cells if c.ok]


class CellDicts(Sequence[dict[str, Any]]):
    """The cells' ``to_dict()``, each made when it is read (nothing kept): a run document's
    ``cells`` for readers that walk them once or twice (the closing summary, --explain)."""

    __slots__ = ("_cells",)

    def __init__(self, cells: Sequence[CellRecord]) -> None:
        self._cells = cells

    def __len__(self) -> int:
        return len(self._cells)

    @overload
    def __getitem__(self, i: int) -> dict[str, Any]: ...

    @overload
    def __getitem__(self, i: slice) -> CellDicts: ...

    def __getitem__(self, i: int | slice) -> dict[str, Any] | CellDicts:
        if isinstance(i, slice):
            return CellDicts(self._cells[i])
        return self._cells[i].to_dict()

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return (c.to_dict() for c in self._cells)
