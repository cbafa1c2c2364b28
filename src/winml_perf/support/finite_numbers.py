"""Numbers read back from JSON or a store row: a finite float, or None."""

from __future__ import annotations

import math
from typing import Any


def finite_number(value: Any) -> float | None:
    """A value read back from JSON or a store row as a finite float; None for None, a bool, text
    that is no number, NaN or an infinity."""
    if value is None or isinstance(value, bool):
        return None
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None
