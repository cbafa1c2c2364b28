"""The long arrays of a cell record, checked apart from jsonschema: the samples (10^3-10^5 objects)
and the metrics' outlier indices (up to one per decode step). Each array's item rule, taken from
the schema, is compiled into Python (record/fast_schema.py); an array whose items all pass is
emptied, and jsonschema checks the rest of the record without walking every item.

Emptying is sound only where the schema constrains the array by its item rule alone: bulk_rules()
checks that on the schema it is given and returns None otherwise (the caller then checks the
record whole)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from winml_perf.record.fast_schema import REF_PREFIX, Check, Unsupported, compile_check

#: Where a cell record holds long arrays: keys from the record down ('*': every key of that object).
BULK_PATHS = (("samples", "warmup"), ("samples", "iterations"), ("metrics", "*", "outlier_indices"))
CELL_DEF, RUN_DEF = "cell", "run"
#: Keywords an object on the way to an array may carry (none of them constrains the array).
PASSING_KEYWORDS = frozenset(
    {"type", "required", "properties", "additionalProperties", "propertyNames", "description", "allOf"}
)
ARRAY_KEYWORDS = frozenset({"type", "items", "description"})


@dataclass(frozen=True)
class BulkRule:
    path: tuple[str, ...]
    item: Check


def _deref(node: Any, defs: Mapping[str, Any]) -> Any:
    """A schema that is only a local $ref -> what it names."""
    while isinstance(node, Mapping) and set(node) == {"$ref"}:
        ref = node["$ref"]
        if not (isinstance(ref, str) and ref.startswith(REF_PREFIX) and ref[len(REF_PREFIX) :] in defs):
            raise Unsupported(f"$ref {ref!r}")
        node = defs[ref[len(REF_PREFIX) :]]
    return node


def _mentions(node: Any, key: str) -> bool:
    """Whether ``key`` is a property name anywhere in ``node``."""
    if isinstance(node, Mapping):
        return key in node or any(_mentions(v, key) for v in node.values())
    if isinstance(node, list):
        return any(_mentions(v, key) for v in node)
    return False


def _child(node: Any, key: str, defs: Mapping[str, Any]) -> Any:
    node = _deref(node, defs)
    if not isinstance(node, Mapping) or set(node) - PASSING_KEYWORDS:
        raise Unsupported(f"the object holding {key!r} has other keywords")
    if "allOf" in node and (key == "*" or _mentions(node["allOf"], key)):
        raise Unsupported(f"allOf may constrain {key!r}")
    if key == "*" and node.get("properties"):
        raise Unsupported("named properties beside the rule for every key")
    child = node.get("additionalProperties") if key == "*" else (node.get("properties") or {}).get(key)
    if not isinstance(child, Mapping):
        raise Unsupported(f"no rule for {key!r}")
    return child


def _rule(path: tuple[str, ...], defs: Mapping[str, Any]) -> BulkRule:
    node: Any = defs[CELL_DEF]
    for key in path:
        node = _child(node, key, defs)
    node = _deref(node, defs)
    if set(node) - ARRAY_KEYWORDS or node.get("type") != "array" or "items" not in node:
        raise Unsupported(f"{'/'.join(path)} is not an array ruled by its items alone")
    return BulkRule(path, compile_check(node["items"], defs))


def bulk_rules(schema: Mapping[str, Any]) -> tuple[BulkRule, ...] | None:
    """The rules of BULK_PATHS in ``schema`` (a record schema with $defs cell and run), or None
    where the schema constrains one of those arrays by more than its items."""
    defs = schema.get("$defs") or {}
    try:
        cells = _child(defs[RUN_DEF], "cells", defs)
        if set(cells) - ARRAY_KEYWORDS or cells.get("items") != {"$ref": REF_PREFIX + CELL_DEF}:
            return None  # the cells of a run are not plain cell records
        return tuple(_rule(path, defs) for path in BULK_PATHS)
    except (Unsupported, KeyError):
        return None


def _emptied(node: Any, path: tuple[str, ...], item: Check) -> Any:
    """``node`` with the array(s) at ``path`` emptied once all their items pass ``item``; None when
    an item fails. Anything not shaped as the path expects is left for jsonschema."""
    if not path:
        if not isinstance(node, list):
            return node
        return [] if all(map(item, node)) else None
    if not isinstance(node, dict):
        return node
    key, rest = path[0], path[1:]
    keys = list(node) if key == "*" else [key] if key in node else []
    out = dict(node)
    for k in keys:
        value = _emptied(node[k], rest, item)
        if value is None:
            return None
        out[k] = value
    return out


def without_checked_arrays(cell: Any, rules: tuple[BulkRule, ...]) -> Any:
    """A cell record with its long arrays checked and emptied; None when an item breaks its rule."""
    for rule in rules:
        cell = _emptied(cell, rule.path, rule.item)
        if cell is None:
            return None
    return cell
