"""Issue 36: a sweep's memory stays flat in the number of finished cells. run_sweep keeps each
finished cell on disk (record/cell_spool.py), not in memory, and the run still has every cell, in
order, as it was measured; its JSON is the same text, written a cell at a time."""

from __future__ import annotations

import gc
import hashlib
import json
import os
import pickle
import tracemalloc

import pytest

from tests.unit.fakes import FAKE_ENV, fake_spec, open_fake_session
from winml_perf.measure.sweep import CellExtras, RunFacts, run_sweep
from winml_perf.model.route import Route
from winml_perf.model.spec import IterationPolicy, RouteSpec, WarmupPolicy, expand_sweep


def _cells(n: int):
    routes = [RouteSpec("config", fake_spec(), route=Route("config", "config", "config"))]
    return expand_sweep(
        routes, list(range(1, n + 1)), [1], warmup=WarmupPolicy(count=0), iterations=IterationPolicy(iterations=1)
    )


def _sweep(cells, on_cell_done=None):
    return run_sweep(
        cells,
        open_fake_session,
        isolate=False,
        on_cell_done=on_cell_done,
        facts=RunFacts(environment=FAKE_ENV, argv=["perf"]),
        extras=CellExtras(roofline=False, sample_memory=False),
    )


def _retained(n: int) -> tuple[int, list[tuple[int, str]], object]:
    """Bytes the sweep of ``n`` cells left allocated (the run alive), the (index, digest of its
    JSON) of each cell as on_cell_done got it, and the run."""
    cells = _cells(n)
    measured: list[tuple[int, str]] = []

    def done(record) -> None:
        measured.append((record.cell_index, hashlib.sha256(record.to_json().encode()).hexdigest()))

    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        run = _sweep(cells, done)
        gc.collect()
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    return after - before, sorted(measured), run


def test_memory_retained_by_a_sweep_does_not_grow_with_its_cells():
    _retained(5)  # what the first sweep of a process allocates once (imports, caches) is not the cells'
    small, _, _ = _retained(50)
    large, measured, run = _retained(500)
    per_cell = (large - small) / 450
    # before the spool each finished cell stayed in memory with its samples: ~19 kB a cell here (~0.6 kB with the spool);
    # what is left per cell is its place in the spool, its sweep order entry and the test's digest
    assert per_cell < 2_000, f"{per_cell:.0f} bytes retained per finished cell"
    assert [c.cell_index for c in run.cells] == [i for i, _ in measured]  # every cell, in order
    assert [hashlib.sha256(c.to_json().encode()).hexdigest() for c in run.cells] == [d for _, d in measured]


def test_the_run_json_is_the_same_text_written_a_cell_at_a_time(monkeypatch):
    from winml_perf.publish.render import run_chunks, run_text
    from winml_perf.record import cell_spool
    from winml_perf.record.cell_spool import SpooledCells

    monkeypatch.setattr(cell_spool, "KEEP_CELLS", 2)  # the first two in memory, the other three on disk
    run = _sweep(_cells(5))
    assert isinstance(run.cells, SpooledCells) and len(run.cells) == 5
    doc = run.to_dict()
    assert "".join(run_chunks(run, "json")) == json.dumps(doc, indent=2, allow_nan=False) + "\n"
    assert run_text(run, "jsonl").splitlines() == [json.dumps(c, separators=(",", ":")) for c in doc["cells"]]
    assert [c.to_dict() for c in run.cells[1:3]] == doc["cells"][1:3]
    assert run.cells == tuple(run.cells)  # compared by content, as a tuple of the cells
    assert pickle.loads(pickle.dumps(run)).cells == run.cells  # pickled as the tuple: the file does not travel


def test_the_spool_folder_is_private_and_goes_with_the_run(monkeypatch):
    from winml_perf.record import cell_spool

    monkeypatch.setattr(cell_spool, "KEEP_CELLS", 1)
    run = _sweep(_cells(3))
    folder = run.cells._spool.folder  # type: ignore[attr-defined]
    assert os.path.isdir(folder) and os.listdir(folder) == ["cells.jsonl"]
    with open(os.path.join(folder, "cells.jsonl"), encoding="utf-8") as f:
        assert len(f.readlines()) == 2  # the first cell stayed in memory
    if os.name == "posix":
        assert os.stat(folder).st_mode & 0o077 == 0
    del run
    gc.collect()
    assert not os.path.exists(folder)


@pytest.mark.parametrize(
    ("head", "items"),
    [({"a": 1, "b": [1, 2]}, [{"x": [1.5, 2]}, 3, "u", [], {}, [1, "a", None], None]), ({}, []), ({"a": {}}, [])],
)
def test_the_indented_chunks_are_json_dumps_text(head, items):
    from winml_perf.support.indented_json import dumps_indented_chunks

    assert "".join(dumps_indented_chunks(head, "cells", iter(items))) == json.dumps(
        {**head, "cells": items}, indent=2, allow_nan=False
    )


def test_a_short_run_keeps_its_cells_in_memory_and_a_long_one_only_its_first():
    """A run of a few cells pays nothing for the spool (its closing output walks the cells about
    nine times: a 3,000-iteration cell decoded nine times cost 0.5 s); a long one keeps only its
    first KEEP_CELLS cells, within KEEP_SAMPLES samples."""
    from winml_perf.record import cell_spool

    short = _sweep(_cells(5))
    assert short.cells[0] is short.cells[0]  # kept: the same record, not decoded again
    long = _sweep(_cells(cell_spool.KEEP_CELLS + 10))
    spool = long.cells._spool  # type: ignore[attr-defined]
    assert len(spool._kept) == cell_spool.KEEP_CELLS and len(long.cells) == cell_spool.KEEP_CELLS + 10
    assert long.cells[-1] is not long.cells[-1]  # on disk: decoded when asked for


def test_memory_held_while_the_sweep_runs_does_not_grow_with_its_finished_cells():
    """Not only after the sweep: while it runs, a finished cell's samples are let go once its record
    is handed over (the schedule keeps its cell drivers to the end, not what they measured)."""
    _retained(5)  # imports and caches first
    cells = _cells(600)
    held: dict[int, int] = {}

    def done(record) -> None:
        if record.cell_index in (99, 599):
            gc.collect()
            held[record.cell_index] = tracemalloc.get_traced_memory()[0]

    gc.collect()
    tracemalloc.start()
    try:
        _sweep(cells, done)
    finally:
        tracemalloc.stop()
    per_cell = (held[599] - held[99]) / 500
    # before: each driver kept its invocations, samples and replies (9.9 kB a cell here); now ~0.6 kB
    assert per_cell < 1_200, f"{per_cell:.0f} bytes held per finished cell during the sweep"
