"""``winml results import``: cell records from run-record files (``winml perf -o``) written on
testbeds that cannot reach the store. Idempotent by record (cell) id: importing a file twice stores
its cells once."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from winml_perf.record.validation import validated_cell
from winml_perf.results.store import Store
from winml_perf.support.errors import StoreError


@dataclass(frozen=True)
class ImportReport:
    files: int
    cells: int
    new: int

    @property
    def already_stored(self) -> int:
        return self.cells - self.new


def cells_of(path: Path) -> list[dict]:
    """The cell records in one file: a run record (kind 'run'), one cell record, or a JSON list of them."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise StoreError(
            f"{path}: cannot read ({exc.strerror or exc})", "pass the run record files `winml perf -o` wrote"
        ) from None
    except json.JSONDecodeError as exc:
        raise StoreError(
            f"{path}: not JSON ({exc.msg} at line {exc.lineno})", "pass the run record files `winml perf -o` wrote"
        ) from None
    items: Iterable[Any] = data if isinstance(data, list) else [data]
    cells: list[dict] = []
    for i, item in enumerate(items):
        kind = item.get("kind") if isinstance(item, dict) else None
        if kind == "run":
            cells.extend(item.get("cells") or ())
        elif kind == "cell":
            cells.append(item)
        else:
            where = f"{path}" + (f" item {i}" if isinstance(data, list) else "")
            raise StoreError(
                f"{where}: not a winml-perf record (key 'kind' is {kind!r}, not 'run' or 'cell')",
                "pass the run record files `winml perf -o` wrote",
            )
    return cells


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
            store.write_record(cell)
            total += 1
    new = store.count() - before
    if new:
        store.analyze()
    return ImportReport(len(batches), total, new)
