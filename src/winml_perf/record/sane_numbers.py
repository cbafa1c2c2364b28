"""What JSON Schema cannot say about a record's numbers and nesting, checked before the schema.

Python's ``json`` reads ``NaN``, ``Infinity`` and ``1e400`` (as inf) and integers of any size; a
store column holds none of them (SQLite's INTEGER is 64-bit) and a table or a gate would show or
compare them as measurements. Deep nesting would exhaust the schema validator's recursion. So
every number of a record must be finite and within a 64-bit integer's range, and no record nests
deeper than ``MAX_DEPTH`` (a real one nests about ten levels).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

MAX_MAGNITUDE = 2**63 - 1
MAX_DEPTH = 64


def _bad(value: Any) -> bool:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    if isinstance(value, float) and not math.isfinite(value):
        return True
    return abs(value) > MAX_MAGNITUDE


def _all_numbers_fine(items: list[Any]) -> bool:
    """Fast path for a long list of numbers (a sample's decode steps): two passes in C."""
    if not all(type(x) in (int, float) for x in items):
        return False
    try:
        total = sum(map(abs, items))
    except OverflowError:  # an integer beyond any float
        return False
    return math.isfinite(total) and max(map(abs, items), default=0) <= MAX_MAGNITUDE


def _fine(node: Any, depth: int) -> bool:
    """``first_problem(node) is None``, without building the path of every value on the way."""
    if depth > MAX_DEPTH:
        return False
    if isinstance(node, Mapping):
        return all(_fine(value, depth + 1) for value in node.values())
    if isinstance(node, list):
        return _all_numbers_fine(node) or all(_fine(value, depth + 1) for value in node)
    return not _bad(node)


def first_problem(node: Any, path: str = "", depth: int = 0) -> str | None:
    """Where ``node`` holds a non-finite or out-of-range number, or nests too deep; None when fine."""
    if _fine(node, depth):  # the common case: a whole record fine, no path named
        return None
    return _first_problem(node, path, depth)


def _first_problem(node: Any, path: str, depth: int) -> str | None:
    if depth > MAX_DEPTH:
        return f"{path or '(top level)'}: nested deeper than {MAX_DEPTH} levels"
    if isinstance(node, Mapping):
        for key, value in node.items():
            found = _first_problem(value, f"{path}/{key}" if path else str(key), depth + 1)
            if found:
                return found
    elif isinstance(node, list):
        if _all_numbers_fine(node):
            return None
        for i, value in enumerate(node):
            found = _first_problem(value, f"{path}/{i}", depth + 1)
            if found:
                return found
    elif _bad(node):
        return f"{path or '(top level)'}: {_shown(node)} is not a finite number within ±{MAX_MAGNITUDE:.3g}"
    return None


def _shown(value: float) -> str:
    if isinstance(value, int) and abs(value) > 10**30:
        return f"an integer of {len(str(abs(value)))} digits" if value.bit_length() < 14_000 else "a huge integer"
    return repr(value)
