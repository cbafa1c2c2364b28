"""Records checked fast (results/fast_schema.py, results/bulk_check.py) reach the verdict jsonschema
reaches, and a damaged long array is still refused with the place named."""

from __future__ import annotations

import copy
import math

import jsonschema
import numpy as np
import pytest

from tests.results_fakes import hex_id, make_cell
from winml_perf.model.record import load_schema
from winml_perf.record.bulk_check import BULK_PATHS, bulk_rules
from winml_perf.record.fast_schema import Unsupported, compile_check
from winml_perf.record.validation import validate_record
from winml_perf.results.store import open_store
from winml_perf.support.errors import StoreError

SCHEMA = load_schema()
DEFS = SCHEMA["$defs"]
RUN = hex_id("fast-run")


def _jsonschema_ok(value, schema) -> bool:
    return jsonschema.Draft202012Validator({**schema, "$defs": DEFS}).is_valid(value)


VALUES = [
    0,
    1,
    -1,
    -2,
    1.0,
    1.5,
    -0.5,
    True,
    False,
    None,
    "3",
    math.nan,
    math.inf,
    [],
    [1, 2.0],
    [1, "x"],
    [True],
    {},
    {"a": 1},
    (1, 2),
    np.float64(2.5),
    np.int64(3),
    10**30,
]


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "number"},
        {"type": "integer"},
        {"type": ["number", "null"]},
        {"type": ["integer", "null"], "minimum": 0},
        {"type": "integer", "minimum": -1},
        {"type": "array", "items": {"type": "number"}},
        {"type": "array", "items": {"type": "integer", "minimum": 0}},
        {"type": "boolean"},
        {"type": "string"},
        {"type": "object"},
        {"type": "null"},
        {"$ref": "#/$defs/count"},
        {"$ref": "#/$defs/num", "description": "x"},
        {"minimum": 0},
        {"items": {"type": "integer"}},
    ],
)
def test_compiled_checks_agree_with_jsonschema_on_every_kind_of_value(schema):
    check = compile_check(schema, DEFS)
    for value in VALUES:
        assert check(value) == _jsonschema_ok(value, schema), (schema, value)


def _sample_variants() -> list:
    good = make_cell(RUN)["samples"]["iterations"][0]
    out = [good]
    for key in list(good):
        out.append({k: v for k, v in good.items() if k != key})  # each required key missing
        for value in (None, "x", True, -1, -2, 1.5, 2.0, [], [1.0, "2"], [1.0, True], [1.0, 2], {"a": 1}):
            out.append({**good, key: value})
    out += [
        {**good, "surprise": 1},
        {**good, "token_ids": [1, 2]},
        {**good, "token_ids": [1.5]},
        {**good, "invocation": -1},
    ]
    return out


def test_the_sample_check_agrees_with_jsonschema_on_damaged_samples():
    check = compile_check(DEFS["sample"], DEFS)
    variants = _sample_variants()
    verdicts = [check(v) for v in variants]
    assert verdicts == [_jsonschema_ok(v, DEFS["sample"]) for v in variants]
    assert verdicts.count(True) > 5 and verdicts.count(False) > 50  # both kinds of verdict are exercised


def test_keywords_the_compiler_does_not_know_are_refused_not_ignored():
    for schema in (
        {"type": "string", "pattern": "^a"},
        {"enum": [1]},
        {"type": "array", "minItems": 1},
        {"anyOf": [{"type": "null"}]},
        {"type": "object", "additionalProperties": {"type": "number"}},
        {"$ref": "#/$defs/nowhere"},
        {"type": "decimal"},
    ):
        with pytest.raises(Unsupported):
            compile_check(schema, DEFS)


def test_the_record_schema_has_a_fast_rule_for_each_long_array():
    rules = bulk_rules(SCHEMA)
    assert rules is not None and [r.path for r in rules] == list(BULK_PATHS)


@pytest.mark.parametrize(
    "change",
    [
        lambda s: s["$defs"]["cell"]["properties"]["samples"]["properties"]["iterations"].update(minItems=1),
        lambda s: s["$defs"]["cell"]["allOf"].append({"properties": {"samples": {"required": ["x"]}}}),
        lambda s: s["$defs"]["summary"]["properties"]["outlier_indices"].update(uniqueItems=True),
        lambda s: s["$defs"]["summary"].update(allOf=[{"properties": {"outlier_indices": {"maxItems": 3}}}]),
        lambda s: s["$defs"]["run"]["properties"]["cells"].update(items={"type": "object"}),
        lambda s: s["$defs"]["sample"]["properties"]["latency_ms"].update(exclusiveMinimum=0),
    ],
)
def test_no_fast_rule_where_the_schema_constrains_a_long_array_by_more_than_its_items(change):
    schema = copy.deepcopy(SCHEMA)
    change(schema)
    assert bulk_rules(schema) is None


def _damaged(where: str):
    cell = make_cell(RUN)
    if where == "metrics":
        cell["metrics"]["decode_tokens_per_s"]["outlier_indices"] = [0, -3]
    elif where == "step":
        cell["samples"]["warmup"][0]["decode_step_ms"][1] = "slow"
    elif where == "count":
        cell["samples"]["iterations"][2]["new_tokens"] = -1
    elif where == "extra":
        cell["samples"]["iterations"][1]["extra"] = 1
    elif where == "missing":
        del cell["samples"]["iterations"][3]["ttft_ms"]
    elif where == "bool":
        cell["samples"]["iterations"][0]["latency_ms"] = True
    return cell


@pytest.mark.parametrize(
    "where, path",
    [
        ("metrics", "metrics/decode_tokens_per_s/outlier_indices/1"),
        ("step", "samples/warmup/0/decode_step_ms"),
        ("count", "samples/iterations/2/new_tokens"),
        ("extra", "samples/iterations/1"),
        ("missing", "samples/iterations/3"),
        ("bool", "samples/iterations/0/latency_ms"),
    ],
)
def test_a_damaged_long_array_is_refused_naming_the_place(where, path):
    cell = _damaged(where)
    assert not jsonschema.Draft202012Validator(SCHEMA).is_valid(cell)
    with pytest.raises(StoreError, match=f"at {path}"):
        validate_record(cell)
    with pytest.raises(StoreError, match=f"at cells/0/{path}"):
        validate_record(_run_of(cell))


def _run_of(cell: dict) -> dict:
    """A run record around ``cell`` (valid but for the cell)."""
    run = {
        "schema_version": 1,
        "kind": "run",
        "run_id": RUN,
        "started_utc": cell["started_utc"],
        "finished_utc": cell["finished_utc"],
        "status": "ok",
        "sweep": {
            "routes": ["config"],
            "prompt_tokens": [16],
            "max_new_tokens": [8],
            "cell_count": 1,
            "rounds": None,
            "seed": 0,
            "isolate": False,
            "order": [],
        },
        "argv": None,
        "environment": cell["environment"],
        "cells": [cell],
    }
    return run


def test_valid_records_pass_and_values_jsonschema_accepts_are_not_refused():
    cell = make_cell(RUN)
    validate_record(cell)
    validate_record(_run_of(cell))
    cell["samples"]["iterations"][0]["decode_step_ms"][0] = np.float64(2.0)  # a number to jsonschema, not a plain float
    cell["samples"]["iterations"][1]["round_index"] = 1.0  # an integer to jsonschema
    assert jsonschema.Draft202012Validator(SCHEMA).is_valid(cell)
    validate_record(cell)


@pytest.mark.parametrize("where", ["metrics", "count", "extra"])
def test_the_store_refuses_a_damaged_long_array_before_writing_anything(tmp_path, where):
    with open_store(str(tmp_path / "r.db")) as store:
        with pytest.raises(StoreError, match="does not match record.schema.json"):
            store.write_json_record(_damaged(where))
        assert store.count() == 0
