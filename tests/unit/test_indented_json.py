"""dumps_indented writes exactly what json.dumps(indent=2, allow_nan=False) writes, and refuses what it refuses."""

from __future__ import annotations

import json
import math
from enum import IntEnum

import pytest

from tests.results_fakes import hex_id, make_cell
from winml_perf.publish.formats import json_text
from winml_perf.support.indented_json import dumps_indented


class Level(IntEnum):
    HIGH = 3


class Tagged(dict):
    pass


class Ms(float):
    pass


def _standard(doc) -> str:
    return json.dumps(doc, indent=2, allow_nan=False)


DOCS = [
    0,
    -1,
    10**40,
    1.5,
    -0.0,
    1e-300,
    0.1 + 0.2,
    True,
    False,
    None,
    "",
    'é ✓ \n " \\ \x00 \U0001f600',
    [],
    {},
    (),
    [[]],
    [{}],
    [1.0, 2.5, 1e16],
    [1, 2, 3],
    ["a", "ü"],
    [1.0, 2],
    [1.0, True],
    [1, True],
    [1, None],
    (1.0, 2.0),
    [Ms(2.5), 1.0],
    {"a": [1.0, {"b": []}], "c": {"d": None}},
    {1: "int key", 2.5: "float key", True: "bool key", None: "none key", "s": "str"},  # noqa: F601  (True and 1 collide on purpose)
    [Level.HIGH, {"level": Level.HIGH}],
    Tagged(x=[1, 2]),
    {"nested": [[1.5, 2.5], [3.5]]},
    {"t": (1, (2.0, "x"))},
]


@pytest.mark.parametrize("doc", DOCS)
def test_the_text_is_the_standard_encoders(doc):
    assert dumps_indented(doc) == _standard(doc)


def test_a_whole_run_record_is_written_identically():
    cell = make_cell(hex_id("indent"), step_ms=[2.0, 2.125, 1.9, 2.05, 1.95, 2.0, 1e-3, 12345.678])
    doc = {"kind": "run", "cells": [cell, cell]}
    assert json_text(doc, "json") == _standard(doc) + "\n"


@pytest.mark.parametrize("bad", [math.nan, [1.0, math.inf], [2, -math.inf], {"x": -math.inf}, {math.nan: 1}])
def test_nan_and_infinities_are_refused(bad):
    with pytest.raises(ValueError, match="not JSON compliant"):
        _standard(bad)
    with pytest.raises(ValueError, match="not JSON compliant"):
        dumps_indented(bad)


@pytest.mark.parametrize("bad", [object(), [1, {2}], {(1, 2): "tuple key"}, b"bytes", {"k": {1.5}}])
def test_values_json_cannot_hold_are_refused(bad):
    with pytest.raises(TypeError):
        _standard(bad)
    with pytest.raises(TypeError):
        dumps_indented(bad)


def test_a_circular_document_is_refused_but_a_shared_one_is_written():
    shared = [1.0, 2.0]
    doc = {"a": shared, "b": shared}
    assert dumps_indented(doc) == _standard(doc)
    loop: list = []
    loop.append(loop)
    with pytest.raises(ValueError, match="Circular"):
        dumps_indented(loop)
