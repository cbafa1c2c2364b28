"""JSON files the tool wrote itself (cache manifests, placement.json): read only when of their shape, sealed when asked.

Parsing is json_input's (strict: no duplicate keys, bounded nesting); a file that fails it is a
problem in words like any other, since a cache file is rebuilt, not reported as bad input.

A shape is a ``dict`` of key -> spec, where a spec is a type (or tuple of types), ``Opt(spec)`` (the
key may be absent or null), ``ListOf(spec)``, ``DictOf(spec)`` (an object of any keys whose values
have ``spec``) or a nested shape. ``problem(data, shape, label)`` says
what is wrong in words naming the key (``placement.json has no str `stages[1].ep```), or None.
``bool`` never passes for ``int``: JSON keeps them apart and so does this check.

``read_json(path, shape, sealed)`` returns (data, None) or (None, what is wrong), never raises for a
file's content; ``write_sealed`` adds a sha256 over what the file holds, so an edit that keeps the
shape is seen too.
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from winml_perf.support.errors import WinmlPerfError
from winml_perf.support.json_input import parse_json_text

NUMBER = (int, float)


@dataclass(frozen=True)
class Opt:
    spec: object  # a spec (see above); callers' shapes are plain dict literals


@dataclass(frozen=True)
class ListOf:
    spec: object


@dataclass(frozen=True)
class DictOf:
    spec: object


def _leaf(spec: object) -> type | tuple[type, ...]:
    """A spec that is no Opt, ListOf, DictOf or shape: a type or a tuple of types."""
    return cast("type | tuple[type, ...]", spec)


def _name(spec: object) -> str:
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
    return cast(type, spec).__name__


def _matches(value: object, kind: type | tuple[type, ...]) -> bool:
    if isinstance(value, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,)):
        return False
    return isinstance(value, kind)


def problem(value: object, shape: object, label: str, where: str = "") -> str | None:
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
    return None if _matches(value, _leaf(shape)) else f"{label} has no {_name(shape)} `{where}`"


SEAL = "sha256"  # the entry of a sealed JSON file that holds the digest of the rest of it


def _seal_of(data: Mapping[str, Any]) -> str:
    text = json.dumps({k: v for k, v in data.items() if k != SEAL}, sort_keys=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def read_json(
    path: Path, shape: Mapping[str, object], sealed: bool = False
) -> tuple[dict[str, Any] | None, str | None]:
    """(data, None) when ``path`` is a JSON object of ``shape`` (above) and, with ``sealed``,
    its seal matches what it holds (see ``write_sealed``); else (None, what is wrong)."""
    label = Path(path).name
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return None, f"{label} is missing"
    except (OSError, UnicodeDecodeError) as exc:
        return None, f"{label} cannot be read ({exc})"
    try:
        data = parse_json_text(text, label)
    except WinmlPerfError as exc:  # malformed, duplicate keys, nested too deep
        return None, exc.message
    found = problem(data, shape, label)
    if found:
        return None, found
    if sealed and data.get(SEAL) != _seal_of(data):
        return None, f"{label} was edited (its {SEAL} does not match what it holds)"
    return data, None


def write_sealed(path: Path, data: Mapping[str, Any]) -> str | None:
    """Write ``data`` with its seal atomically (temp file + rename); None on success, else why not."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}")
    try:
        tmp.write_text(json.dumps({**data, SEAL: _seal_of(data)}, indent=2), encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        return exc.strerror or str(exc)
    return None
