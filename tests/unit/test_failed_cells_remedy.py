"""`winml perf` exits 1 when a cell failed, naming the first failed cells; the line that says so
carries their remedies too (it printed each failure's message alone: the remedy was only in the record)."""

from __future__ import annotations

import copy

import pytest

from tests.results_fakes import golden_cells
from winml_perf.commands.perf_report import _raise_failed
from winml_perf.model.record import CellRecord
from winml_perf.support.errors import BenchmarkFailure


def _failed(remedy: str | None) -> CellRecord:
    cell = copy.deepcopy(golden_cells()[4])  # a failed cell
    cell["failure"]["remedy"] = remedy
    return CellRecord.from_dict(cell)


def test_the_failure_line_carries_the_failed_cells_remedies_once_each():
    ok = CellRecord.from_dict(golden_cells()[0])
    cells = [ok, _failed("raise --cell-timeout"), _failed("raise --cell-timeout"), _failed("close other programs")]
    with pytest.raises(BenchmarkFailure) as err:
        _raise_failed(cells)
    assert err.value.message.startswith("3 of 4 cells failed: ")
    assert err.value.remedy == "raise --cell-timeout; close other programs"


def test_no_remedy_is_made_up_where_the_cells_have_none():
    with pytest.raises(BenchmarkFailure) as err:
        _raise_failed([_failed(None)])
    assert err.value.remedy is None
