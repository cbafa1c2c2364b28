"""The shape a JSON file the tool wrote itself must have before any of it is used.

A shape is a ``dict`` of key -> spec, where a spec is a type (or tuple of types), ``Opt(spec)`` (the
key may be absent or null), ``ListOf(spec)``, ``DictOf(spec)`` (an object of any keys whose values
have ``spec``) or a nested shape. ``problem(data, shape, label)`` says
what is wrong in words naming the key (``placement.json has no str `stages[1].ep```), or None.
``bool`` never passes for ``int``: JSON keeps them apart and so does this check.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

NUMBER = (int, float)


@dataclass(frozen=True)
class Opt:
    spec: Any


@dataclass(frozen=True)
class ListOf:
    spec: Any


@dataclass(frozen=True)
class DictOf:
    spec: Any


def _name(spec) -> str:
    if isinstance(spec, Opt):
        return _name(spec.spec)
    if isinstance(spec, ListOf):
        return "list"
    if isinstance(spec, (Mapping, DictOf)):
        return "object"
    if spec is dict:
        return "object"
    if spec == NUMBER:
        return "number"
    if isinstance(spec, tuple):
        return " or ".join(t.__name__ for t in spec)
    return spec.__name__


def _matches(value, kind) -> bool:
    if isinstance(value, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,)):
        return False
    return isinstance(value, kind)


def problem(value, shape, label: str, where: str = "") -> str | None:
    """None when ``value`` has ``shape``, else what is wrong (``label`` names the file)."""
    if isinstance(shape, Opt):
        return None if value is None else problem(value, shape.spec, label, where)
    if isinstance(shape, Mapping):
        if not isinstance(value, dict):
            return f"{label} is not a JSON object" if not where else f"{label} has no object `{where}`"
        for key, spec in shape.items():
            path = f"{where}.{key}" if where else key
            if key not in value and not isinstance(spec, Opt):
                return f"{label} has no {_name(spec)} `{path}`"
            found = problem(value.get(key), spec, label, path)
            if found:
                return found
        return None
    if isinstance(shape, ListOf):
        if not isinstance(value, list):
            return f"{label} has no list `{where}`"
        for i, item in enumerate(value):
            found = problem(item, shape.spec, label, f"{where}[{i}]")
            if found:
                return found
        return None
    if isinstance(shape, DictOf):
        if not isinstance(value, dict):
            return f"{label} has no object `{where}`"
        for key, item in value.items():
            found = problem(item, shape.spec, label, f"{where}.{key}")
            if found:
                return found
        return None
    return None if _matches(value, shape) else f"{label} has no {_name(shape)} `{where}`"
