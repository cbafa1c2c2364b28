"""Records are checked against schemas/record.schema.json (the measurement engine's contract):
at the store's edge before anything is written, and wherever a record dict must be trusted."""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Mapping

from winml_perf.errors import StoreError
from winml_perf.results.record import SCHEMA_VERSION, load_schema


def _steps_apart(d: Mapping) -> tuple[Mapping, str | None]:
    """``d`` with every sample's decode_step_ms list emptied, after checking those lists here (an
    array of numbers, the schema's rule) in one pass: jsonschema would descend into each of 10^5
    steps one by one. Returns the path of the first bad step list, if any."""
    samples = d.get("samples") if d.get("kind", "cell") == "cell" else None
    if not isinstance(samples, Mapping):
        return d, None
    stripped = {}
    for phase, items in samples.items():
        if not isinstance(items, list):
            return d, None
        out = []
        for i, s in enumerate(items):
            steps = s.get("decode_step_ms") if isinstance(s, Mapping) else None
            if isinstance(steps, list):
                if not all(type(x) in (float, int) for x in steps):
                    return d, f"samples/{phase}/{i}/decode_step_ms"
                s = {**s, "decode_step_ms": []}
            out.append(s)
        stripped[phase] = out
    return {**d, "samples": stripped}, None


def validate_record(d: Mapping) -> None:
    """Raise StoreError naming the first offending path when ``d`` (a cell or a run record dict)
    does not match record.schema.json."""
    cells = d.get("cells") if d.get("kind") == "run" and isinstance(d.get("cells"), list) else [d]
    checked = []
    for i, cell in enumerate(cells):
        stripped, bad = _steps_apart(cell) if isinstance(cell, Mapping) else (cell, None)
        if bad:
            where = f"cells/{i}/{bad}" if cell is not d else bad
            raise StoreError(f"record {d.get('run_id' if cell is not d else 'cell_id', '?')} does not match record.schema.json "
                             f"at {where}: an item is not a number",
                             "store records made by winml-perf (bench/report.py); this one is damaged or from another tool")
        checked.append(stripped)
    d = {**d, "cells": checked} if cells is d.get("cells") else checked[0]
    errors = sorted(_validator().iter_errors(d), key=lambda e: list(e.absolute_path))
    if errors:
        e = errors[0]
        where = "/".join(str(p) for p in e.absolute_path) or "(top level)"
        what = "run record" if d.get("kind") == "run" else "cell record"
        ident = d.get("run_id" if d.get("kind") == "run" else "cell_id", "?")
        message = e.message if len(e.message) <= 300 else e.message[:300] + "..."
        raise StoreError(f"{what} {ident} does not match record.schema.json at {where}: {message}",
                         "store records made by winml-perf (bench/report.py); this one is damaged or from another tool")


def validated_cell(record: Any) -> dict:
    """A cell record as a dict, checked against record.schema.json (StoreError names the path)."""
    d = record.to_dict() if hasattr(record, "to_dict") else record
    if not isinstance(d, Mapping):
        raise StoreError(f"a record must be a dict (CellRecord.to_dict()), got {type(d).__name__}")
    if d.get("kind") == "run":
        raise StoreError("write_record takes one cell record, got a run record", "use Store.write_run for a run record")
    version = d.get("schema_version")
    if isinstance(version, int) and not isinstance(version, bool) and version > SCHEMA_VERSION:
        raise StoreError(f"cell record {d.get('cell_id', '?')} has schema_version {version}, newer than this winml-perf "
                         f"understands ({SCHEMA_VERSION})", "upgrade winml-perf to store it")
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
        name = ref[len("#/$defs/"):]
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
