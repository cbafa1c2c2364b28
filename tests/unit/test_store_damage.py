"""A store every reader refuses is refused by writers too, before a run measures; a full disk under
the store says so and where the run record is kept."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.results_fakes import make_cell
from winml_perf.results.store import open_store
from winml_perf.support.errors import StoreError

RUN = "d" * 32
PAGE = 4096


def _damaged_store(tmp_path: Path) -> Path:
    """A store whose schema reads but whose data pages are garbage (what readers refuse)."""
    path = tmp_path / "s.db"
    with open_store(path) as s:
        for i in range(6):
            s.write_json_record(make_cell(RUN, index=i, route=f"r{i}"))
    size = path.stat().st_size
    with open(path, "r+b") as f:
        for offset in range(size - 4 * PAGE, size, PAGE):  # the last pages: rows and indexes
            f.seek(offset)
            f.write(os.urandom(PAGE))
    return path


def test_a_writer_refuses_a_store_with_damaged_pages_and_leaves_it_untouched(tmp_path):
    path = _damaged_store(tmp_path)
    before = path.read_bytes()
    with pytest.raises(StoreError, match="is damaged"):
        open_store(path)
    assert path.read_bytes() == before


def test_perf_refuses_a_damaged_store_before_measuring(winml, tiny_flat, tmp_path):
    path = _damaged_store(tmp_path)
    done = winml("perf", tiny_flat, "--store", path, "--iterations", "1", "--invocations", "1", "--max-new-tokens", "2")
    assert done.returncode == 2, done.stderr
    assert "is damaged" in done.stderr and "stored" not in done.stderr and not done.stdout.strip()
