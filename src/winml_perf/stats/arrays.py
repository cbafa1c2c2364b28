"""Array helpers of the uncertainty functions (numpy only, so the light modules that use them do
not import scipy)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeAlias

import numpy as np

# What the functions accept as a sample: a sequence of floats or a numpy array of them.
Values: TypeAlias = Sequence[float] | np.ndarray[Any, np.dtype[Any]]


def finite(values: Values | Sequence[Values]) -> np.ndarray:
    """The values as a 1-D float array without NaN or infinities."""
    xs: np.ndarray = np.asarray(values, dtype=float).ravel()
    kept: np.ndarray = xs[np.isfinite(xs)]
    return kept
