"""A small JSON Schema subset compiled into plain Python checks, for the many values of one shape
in a record (its samples: 10^3-10^5 objects) that jsonschema would walk one by one.

``compile_check(schema, defs)`` returns ``check(value) -> bool``. It understands ``type``,
``required``, ``properties``, ``additionalProperties: false``, ``items`` (one schema), ``minimum``,
local ``$ref`` (``#/$defs/X``, applied beside the other keywords as 2020-12 does) and
``description``; any other keyword raises ``Unsupported``. The types mean what they mean to
jsonschema's Draft 2020-12 checker (bool is no number, 1.0 is an integer), so a value this check
accepts is one jsonschema accepts. It answers yes or no only: the caller asks jsonschema where and why.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Mapping
from typing import Any

Check = Callable[[Any], bool]

KEYWORDS = frozenset(
    {"type", "required", "properties", "additionalProperties", "items", "minimum", "$ref", "description"}
)
REF_PREFIX = "#/$defs/"


class Unsupported(ValueError):
    """The schema uses a keyword (or a form of one) that compile_check does not implement."""


def _is_number(v: Any) -> bool:
    t = type(v)
    return t is float or t is int or (not isinstance(v, bool) and isinstance(v, numbers.Number))


def _is_integer(v: Any) -> bool:
    t = type(v)
    if t is int:
        return True
    if isinstance(v, bool):
        return False
    return isinstance(v, int) or (isinstance(v, float) and v.is_integer())


TYPES: dict[str, Check] = {
    "array": lambda v: isinstance(v, list),
    "boolean": lambda v: isinstance(v, bool),
    "integer": _is_integer,
    "null": lambda v: v is None,
    "number": _is_number,
    "object": lambda v: isinstance(v, dict),
    "string": lambda v: isinstance(v, str),
}
#: Exact item types of an array of numbers checked in one pass (anything else takes the exact check).
PLAIN_NUMBERS = (float, int)


def _type_check(types: Any) -> Check:
    names = [types] if isinstance(types, str) else list(types)
    unknown = [n for n in names if n not in TYPES]
    if unknown or not names:
        raise Unsupported(f"type {types!r}")
    checks = [TYPES[n] for n in names]
    if len(checks) == 1:
        return checks[0]
    if len(checks) == 2:  # e.g. number or null: the common case, without a generator per value
        first, second = checks
        return lambda v: first(v) or second(v)
    return lambda v: any(c(v) for c in checks)


def _items_check(item_schema: Any, defs: Mapping[str, Any], seen: tuple[str, ...]) -> Check:
    item = compile_check(item_schema, defs, seen)
    every = _plain_items(item_schema) or (lambda v: False)
    return lambda v: not isinstance(v, list) or every(v) or all(map(item, v))


def _plain_items(item_schema: Any) -> Check | None:
    """A one-pass check of a long list of plain floats/ints (decode steps, outlier indices), or None;
    a list it refuses gets the item-by-item check (which may still accept it)."""
    if item_schema == {"type": "number"}:
        return lambda v: all(type(x) in PLAIN_NUMBERS for x in v)
    if (
        isinstance(item_schema, Mapping)
        and set(item_schema) == {"type", "minimum"}
        and item_schema["type"] == "integer"
        and type(item_schema["minimum"]) is int
    ):
        low = item_schema["minimum"]
        return lambda v: all(type(x) is int for x in v) and (not v or min(v) >= low)
    return None


def _object_check(schema: Mapping[str, Any], defs: Mapping[str, Any], seen: tuple[str, ...]) -> Check:
    props = {k: compile_check(s, defs, seen) for k, s in (schema.get("properties") or {}).items()}
    required = frozenset(schema.get("required") or ())
    extra = schema.get("additionalProperties", True)
    if extra not in (True, False):
        raise Unsupported("additionalProperties other than true/false")
    allowed = frozenset(props) if extra is False else None

    def check(v: Any) -> bool:
        if not isinstance(v, dict):
            return True  # these keywords apply to objects only (``type`` says whether it must be one)
        keys = v.keys()
        if not required <= keys or (allowed is not None and not keys <= allowed):
            return False
        return all(c(v[k]) for k, c in props.items() if k in v)

    return check


def _minimum_check(minimum: Any) -> Check:
    if not _is_number(minimum):
        raise Unsupported(f"minimum {minimum!r}")
    return lambda v: not _is_number(v) or not v < minimum


def compile_check(schema: Any, defs: Mapping[str, Any], seen: tuple[str, ...] = ()) -> Check:
    """``check(value) -> bool`` for ``schema`` (its local references resolved in ``defs``)."""
    if schema is True or schema == {}:
        return lambda v: True
    if not isinstance(schema, Mapping):
        raise Unsupported(f"schema {schema!r}")
    unknown = set(schema) - KEYWORDS
    if unknown:
        raise Unsupported(f"keyword(s) {', '.join(sorted(unknown))}")
    checks: list[Check] = []
    ref = schema.get("$ref")
    if ref is not None:
        name = ref[len(REF_PREFIX) :] if isinstance(ref, str) and ref.startswith(REF_PREFIX) else None
        if name is None or name not in defs or name in seen:
            raise Unsupported(f"$ref {ref!r}")
        checks.append(compile_check(defs[name], defs, seen + (name,)))
    if "type" in schema:
        checks.append(_type_check(schema["type"]))
    if "minimum" in schema:
        checks.append(_minimum_check(schema["minimum"]))
    if {"required", "properties", "additionalProperties"} & set(schema):
        checks.append(_object_check(schema, defs, seen))
    if "items" in schema:
        checks.append(_items_check(schema["items"], defs, seen))
    if len(checks) == 1:
        return checks[0]
    return lambda v: all(c(v) for c in checks)
