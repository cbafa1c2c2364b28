"""``winml results import``: cell records from run-record files (``winml perf -o``) written on
testbeds that cannot reach the store. Idempotent by record (cell) id: importing a file twice stores
its cells once."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from winml_perf.record.validation import validated_cell
from winml_perf.results.location import SQLITE_HEADER
from winml_perf.results.store import Store
from winml_perf.support.errors import StoreError
from winml_perf.support.json_input import parse_json_text, read_json

REMEDY = "pass the run record files `winml perf -o` wrote"


@dataclass(frozen=True)
class ImportReport:
    files: int
    cells: int
    new: int

    @property
    def already_stored(self) -> int:
        return self.cells - self.new


def cells_of(path: Path) -> list[dict[str, Any]]:
    """The cell records in one file: a run record (kind 'run'), one cell record, a JSON list of them,
    or JSON Lines of them (`winml perf --export-jsonl`: one cell record a line)."""
    path = Path(path)
    items = _json_lines(path)
    if items is None:
        data = _read(path)
        items = [(f"{path} item {i}", x) for i, x in enumerate(data)] if isinstance(data, list) else [(str(path), data)]
    cells: list[dict[str, Any]] = []
    for where, item in items:
        kind = item.get("kind") if isinstance(item, dict) else None
        if kind == "run":
            run_cells = item.get("cells") or []
            if not isinstance(run_cells, list):
                raise StoreError(f"{where}: the run record's 'cells' is not a list", REMEDY)
            cells.extend(run_cells)
        elif kind == "cell":
            cells.append(item)
        else:
            raise StoreError(
                f"{where}: not a winml-perf record (key 'kind' is {kind!r}, not 'run' or 'cell')",
                "pass the run record files `winml perf -o` wrote",
            )
    return cells


def _json_lines(path: Path) -> list[tuple[str, Any]] | None:
    """(where, record) per line of a JSON Lines file, each line read strictly; None when the file is
    not one (unreadable, not UTF-8, one line, or a first line that is no JSON object alone: an
    indented record's '{'), which ``_read`` then reads as one JSON document."""
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except (OSError, UnicodeDecodeError):
        return None
    lines = [(n, line) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
    if len(lines) < 2:
        return None
    try:
        first = json.loads(lines[0][1])
    except (ValueError, RecursionError):
        return None
    if not isinstance(first, dict):
        return None
    return [(f"{path} line {n}", parse_json_text(line, f"{path} line {n}", StoreError)) for n, line in lines]


def _read(path: Path) -> Any:
    """The JSON of a record file, read strictly (UTF-8, no duplicate keys, bounded nesting); a
    store file or other binary is named as what it is."""
    try:
        with open(path, "rb") as f:
            head = f.read(len(SQLITE_HEADER))
    except OSError as exc:
        raise StoreError(f"{path}: cannot read ({exc.strerror or exc})", REMEDY) from None
    if head == SQLITE_HEADER:
        raise StoreError(
            f"{path} is an SQLite database (a results store), not a record file",
            f"{REMEDY}; to read that store, pass it as --store",
        )
    try:
        return read_json(path, StoreError)
    except StoreError as exc:
        raise StoreError(f"{exc.message} (not a record file)", REMEDY) from None


def import_files(store: Store, paths: Sequence[Path]) -> ImportReport:
    """Read every file first (a bad file stores nothing), then write their cells; refresh statistics."""
    batches = [(Path(p), cells_of(Path(p))) for p in paths]
    for path, cells in batches:
        for cell in cells:
            try:
                validated_cell(cell)
            except StoreError as exc:
                raise StoreError(f"{path}: {exc.message}", exc.remedy) from None
    before = store.count()
    total = 0
    for _, cells in batches:
        for cell in cells:
            store.write_json_record(cell)
            total += 1
    new = store.count() - before
    if new:
        store.analyze()
    return ImportReport(len(batches), total, new)
