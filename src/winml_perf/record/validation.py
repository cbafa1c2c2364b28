"""Records are checked against schemas/record.schema.json (the measurement engine's contract):
at the store's edge before anything is written, and wherever a record dict must be trusted.

A record's long arrays (samples, outlier indices) are checked by their item rules compiled into
Python (record/bulk_check.py) and the rest of the record by jsonschema with those arrays emptied;
when anything fails, jsonschema checks the whole record to name the first offending place. Either
way the rules are the schema's."""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from winml_perf.model.record import SCHEMA_VERSION, load_schema
from winml_perf.record import sane_numbers
from winml_perf.record.bulk_check import BulkRule, bulk_rules, without_checked_arrays
from winml_perf.support.errors import StoreError


def _steps_apart(d: Mapping[str, Any]) -> tuple[Mapping[str, Any], str | None]:
    """``d`` with every sample's decode_step_ms list emptied, after checking those lists here (an
    array of numbers >= 0, the schema's rule) in one pass: jsonschema would descend into each of 10^5
    steps one by one. Returns the path of the first bad step list, if any."""
    samples = d.get("samples") if d.get("kind", "cell") == "cell" else None
    if not isinstance(samples, Mapping):
        return d, None
    stripped: dict[str, list[Any]] = {}
    for phase, items in samples.items():
        if not isinstance(items, list):
            return d, None
        out = []
        for i, s in enumerate(items):
            steps = s.get("decode_step_ms") if isinstance(s, Mapping) else None
            if isinstance(steps, list):
                if not all(type(x) in (float, int) and x >= 0 for x in steps):
                    return d, f"samples/{phase}/{i}/decode_step_ms"
                s = {**s, "decode_step_ms": []}
            out.append(s)
        stripped[phase] = out
    return {**d, "samples": stripped}, None


def validate_record(d: Mapping[str, Any]) -> None:
    """Raise StoreError naming the first offending path when ``d`` (a cell or a run record dict)
    does not match record.schema.json, or holds a number no measurement can be (NaN, infinite, past
    64 bits) or nests too deep (record/sane_numbers.py: checked first, so the schema never sees them)."""
    problem = sane_numbers.first_problem(d)
    if problem is not None:
        what = "run record" if d.get("kind") == "run" else "cell record"
        raise StoreError(
            f"{what} {d.get('run_id' if d.get('kind') == 'run' else 'cell_id', '?')} is not a record: at {problem}",
            "store records made by winml-perf (record/build.py); this one is damaged or from another tool",
        )
    emptied = _with_long_arrays_checked(d)
    if emptied is not None and _first_error(emptied) is None:
        return
    _raise_first_error(d)  # something is wrong (or no fast check applies): jsonschema finds and names it


def prepare_checks() -> None:
    """Build the record check now (jsonschema's import and the compiled schema: a fixed ~0.1 s), so
    a measurement whose records will be checked does not pay it after its last iteration."""
    _validator()
    _bulk_rules()


@lru_cache(maxsize=1)
def _bulk_rules() -> tuple[BulkRule, ...] | None:
    return bulk_rules(load_schema())


def _with_long_arrays_checked(d: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """``d`` with the long arrays of its cell(s) checked and emptied (record/bulk_check.py), or
    None: an item broke its rule, or the schema leaves no array to check apart."""
    rules = _bulk_rules()
    if rules is None:
        return None
    if d.get("kind") == "run" and isinstance(d.get("cells"), list):
        cells = [without_checked_arrays(c, rules) for c in d["cells"]]
        return None if any(c is None for c in cells) else {**d, "cells": cells}
    return without_checked_arrays(d, rules) if d.get("kind") == "cell" else d


def _first_error(d: Mapping[str, Any]) -> Any:
    errors = sorted(_validator().iter_errors(d), key=lambda e: list(e.absolute_path))
    return errors[0] if errors else None


def _raise_first_error(d: Mapping[str, Any]) -> None:
    """StoreError for the first (by path) place where ``d`` breaks the schema; nothing if none."""
    cells = d["cells"] if d.get("kind") == "run" and isinstance(d.get("cells"), list) else [d]
    checked = []
    for i, cell in enumerate(cells):
        stripped, bad = _steps_apart(cell) if isinstance(cell, Mapping) else (cell, None)
        if bad:
            where = f"cells/{i}/{bad}" if cell is not d else bad
            raise StoreError(
                f"record {d.get('run_id' if cell is not d else 'cell_id', '?')} does not match record.schema.json "
                f"at {where}: an item is not a number >= 0",
                "store records made by winml-perf (record/build.py); this one is damaged or from another tool",
            )
        checked.append(stripped)
    d = {**d, "cells": checked} if cells is d.get("cells") else checked[0]
    e = _first_error(d)
    if e is not None:
        where = "/".join(str(p) for p in e.absolute_path) or "(top level)"
        what = "run record" if d.get("kind") == "run" else "cell record"
        ident = d.get("run_id" if d.get("kind") == "run" else "cell_id", "?")
        message = e.message if len(e.message) <= 300 else e.message[:300] + "..."
        raise StoreError(
            f"{what} {ident} does not match record.schema.json at {where}: {message}",
            "store records made by winml-perf (record/build.py); this one is damaged or from another tool",
        )


def validated_cell(d: Any) -> dict[str, Any]:
    """A cell record's JSON (a dict), checked against record.schema.json (StoreError names the path)."""
    if not isinstance(d, Mapping):
        raise StoreError(f"a record must be a dict (CellRecord.to_dict()), got {type(d).__name__}")
    if d.get("kind") == "run":
        raise StoreError("write_record takes one cell record, got a run record", "use Store.write_run for a run record")
    version = d.get("schema_version")
    if isinstance(version, int) and not isinstance(version, bool) and version > SCHEMA_VERSION:
        raise StoreError(
            f"cell record {d.get('cell_id', '?')} has schema_version {version}, newer than this winml-perf "
            f"understands ({SCHEMA_VERSION})",
            "upgrade winml-perf to store it",
        )
    validate_record(d)
    return dict(d)


def inline_refs(node: Any, defs: Mapping[str, Any], seen: tuple[str, ...] = ()) -> Any:
    """``node`` with every local '#/$defs/X' reference replaced by the definition itself (a ref
    beside other keywords becomes allOf, as 2020-12 means). Raises ValueError on a cycle."""
    if isinstance(node, list):
        return [inline_refs(v, defs, seen) for v in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        name = ref[len("#/$defs/") :]
        if name in seen:
            raise ValueError(f"recursive $ref {ref}")
        target = inline_refs(defs[name], defs, seen + (name,))
        rest = {k: inline_refs(v, defs, seen) for k, v in node.items() if k != "$ref"}
        return {"allOf": [target, rest]} if rest else target
    return {k: inline_refs(v, defs, seen) for k, v in node.items() if k != "$defs"}


@lru_cache(maxsize=1)
def _validator() -> Any:
    """A validator of the schema with its references inlined: the same rules, three times faster
    than resolving each $ref per value (records are checked on every write)."""
    import jsonschema

    schema = load_schema()
    try:
        return jsonschema.Draft202012Validator(inline_refs(schema, schema["$defs"]))
    except ValueError:  # a recursive schema cannot be inlined: resolve references as usual
        return jsonschema.Draft202012Validator(schema)
