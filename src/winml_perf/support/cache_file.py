"""The one reader and writer of the tool's own cache files (probe figures under the cache folder).

A cache only saves time: a damaged one (not JSON, a list where an object belongs, ``Infinity``,
a figure of the wrong type or sign) must never cost a run. ``read_cache`` hands back the object
only when ``valid`` accepts it; otherwise it says so on stderr once, names the file, and returns
None, so the caller measures again and ``write_cache`` replaces the file (whole, through the
safe-write layer: a unique temporary name, then a rename).
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from winml_perf.support import safe_write


def positive_number(value: Any) -> bool:
    """A finite number above zero (no bool, no NaN, no infinity)."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value > 0


def _warn(path: Path, why: str) -> None:
    print(f"warning: cache file {path} is damaged ({why}); measuring again and rewriting it", file=sys.stderr)


def read_cache(path: Path, valid: Callable[[dict[str, Any]], bool]) -> dict[str, Any] | None:
    """The object cached in ``path``; None when absent, or damaged (then a warning on stderr)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        _warn(path, f"unreadable: {exc}")
        return None
    try:
        data = json.loads(text, parse_constant=_refuse_constant)
    except (ValueError, RecursionError) as exc:
        _warn(path, f"not JSON: {exc}")
        return None
    if not isinstance(data, dict):
        _warn(path, f"holds a JSON {type(data).__name__}, not an object")
        return None
    try:
        ok = valid(data)
    except (TypeError, ValueError, AttributeError, KeyError):
        ok = False
    if not ok:
        _warn(path, "a figure is missing, of the wrong type, not finite or not above zero")
        return None
    return data


def _refuse_constant(name: str) -> float:
    raise ValueError(f"{name} is no measured figure")


def write_cache(path: Path, data: Mapping[str, Any]) -> None:
    """Replace ``path`` with ``data`` whole; a cache that cannot be written is only a warning."""
    try:
        safe_write.write_text(Path(path), json.dumps(dict(data), indent=2, allow_nan=False))
    except (OSError, ValueError) as exc:
        print(
            f"warning: cannot write cache file {path} ({exc}); the figure is measured again next run", file=sys.stderr
        )
