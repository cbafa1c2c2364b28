"""`results import` and every store write refuse what no measurement can be: NaN, infinities, numbers
past 64 bits, negative times and rates, deep nesting, and files that are not records (a store
file, random bytes); exit 2 naming the file and the place, nothing stored."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.results_fakes import make_cell
from winml_perf.record.validation import validated_cell
from winml_perf.results.importing import cells_of
from winml_perf.support.errors import StoreError

RUN = "a" * 32
CELL = make_cell(RUN)
#: Fields whose numbers are measurements (times, rates, sizes): never negative.
MEASURED = ("samples", "metrics", "summary", "load")


def _numeric_paths(node, path=()) -> list[tuple]:
    if isinstance(node, dict):
        return [p for k, v in node.items() for p in _numeric_paths(v, (*path, k))]
    if isinstance(node, list):
        return [p for i, v in enumerate(node) for p in _numeric_paths(v, (*path, i))]
    return [path] if isinstance(node, (int, float)) and not isinstance(node, bool) else []


PATHS = _numeric_paths(CELL)
MEASURED_PATHS = [
    p
    for p in PATHS
    if p[0] in MEASURED
    and "round_index" not in p
    and "invocation" not in p
    and not str(p[-1]).endswith("ci95_low")  # an interval's low end may fall below zero
]


def _with(path: tuple, value) -> dict:
    cell = copy.deepcopy(CELL)
    node = cell
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return cell


def _import_check(tmp_path: Path, cell: dict) -> None:
    """What `results import` does before it writes anything: read the file, check every cell."""
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"kind": "run", "cells": [cell]}, allow_nan=True))
    for c in cells_of(path):
        validated_cell(c)


def test_the_fixture_cell_is_valid_and_has_numbers_everywhere(tmp_path):
    _import_check(tmp_path, CELL)
    assert len(PATHS) > 50 and len(MEASURED_PATHS) > 30


NOT_NUMBERS = st.sampled_from([math.nan, math.inf, -math.inf, 10**30, -(10**30), 2**63, 10**400])


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(PATHS), NOT_NUMBERS)
def test_any_field_holding_a_non_finite_or_huge_number_is_refused_naming_it(tmp_path_factory, path, bad):
    with pytest.raises(StoreError) as caught:
        _import_check(tmp_path_factory.mktemp("imp"), _with(path, bad))
    assert "/".join(map(str, path)) in str(caught.value)


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(MEASURED_PATHS), st.floats(max_value=-1e-6, allow_nan=False, allow_infinity=False))
def test_any_negative_measurement_is_refused(tmp_path_factory, path, negative):
    with pytest.raises(StoreError) as caught:
        _import_check(tmp_path_factory.mktemp("imp"), _with(path, negative))
    assert "/".join(map(str, path[:2])) in str(caught.value)


@pytest.mark.parametrize("text", ["NaN", "Infinity", "-Infinity", "1e400", "1" + "0" * 30])
def test_json_literals_that_are_no_measurement_are_refused(tmp_path, text):
    doc = json.dumps({"kind": "run", "cells": [_with(("samples", "iterations", 0, "ttft_ms"), 12345.5)]})
    path = tmp_path / "run.json"
    path.write_text(doc.replace("12345.5", text))
    with pytest.raises(StoreError, match="ttft_ms"):
        for c in cells_of(path):
            validated_cell(c)


def _nested(depth: int):
    node: object = 1
    for _ in range(depth):
        node = {"x": node}
    return node


@pytest.mark.parametrize("depth", [100, 900])
def test_deeply_nested_fields_are_refused(tmp_path, depth):
    cell = _with(("environment",), {**CELL["environment"], "extra": _nested(depth)})
    with pytest.raises(StoreError, match="nested deeper"):
        _import_check(tmp_path, cell)


@pytest.mark.parametrize(
    "content, says",
    [
        (b"SQLite format 3\x00" + bytes(200), "SQLite database"),
        (bytes(range(256)) * 4, "not UTF-8"),
        (b"[" * 200_000, "nested too deeply"),
        (b"", "malformed JSON"),
        (b'{"kind": "run", "cells": 5}', "not a list"),
        (b"1" * 5000, "unreadable JSON"),
    ],
)
def test_files_that_are_not_records_are_named(tmp_path, content, says):
    path = tmp_path / "thing.db"
    path.write_bytes(content)
    with pytest.raises(StoreError, match=says) as caught:
        cells_of(path)
    assert str(path) in str(caught.value)


def test_results_import_of_bad_files_is_exit_2_and_stores_nothing(winml, tmp_path):
    store = tmp_path / "s.db"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"kind": "run", "cells": [_with(("samples", "iterations", 0, "ttft_ms"), -5.0)]}))
    noise = tmp_path / "noise.bin"
    noise.write_bytes(bytes(range(256)))
    for path in (bad, noise):
        done = winml("results", "import", path, "--store", store)
        assert done.returncode == 2 and str(path) in done.stderr and "unexpected" not in done.stderr, done.stderr
    listed = winml("results", "list", "--store", store, "--format", "json")
    assert listed.returncode in (0, 2) and "ttft" not in listed.stdout


def test_a_json_lines_file_of_cells_is_read_line_by_line(tmp_path):
    """`winml perf --export-jsonl FILE` writes one cell record per line; `results import FILE` read a
    one-cell file and refused a two-cell one as "malformed JSON at line 2 column 1: Extra data"."""
    second = copy.deepcopy(CELL)
    second["cell_id"] = "b" * 32
    path = tmp_path / "cells.jsonl"
    path.write_text(json.dumps(CELL) + "\n" + json.dumps(second) + "\n\n")
    assert [c["cell_id"] for c in cells_of(path)] == [CELL["cell_id"], "b" * 32]
    path.write_text(json.dumps(CELL) + "\n" + '{"kind": "cell", "cell_id": \n')
    with pytest.raises(StoreError, match=r"cells\.jsonl line 2: malformed JSON"):  # the broken line is named
        cells_of(path)
    path.write_text(json.dumps(CELL) + "\n" + json.dumps({"kind": "other"}) + "\n")
    with pytest.raises(StoreError, match=r"cells\.jsonl line 2: not a winml-perf record"):
        cells_of(path)
