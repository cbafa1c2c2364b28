"""Array helpers of the uncertainty functions (numpy only, so the light modules that use them do
not import scipy)."""

from __future__ import annotations

import numpy as np


def finite(values) -> np.ndarray:
    """The values as a 1-D float array without NaN or infinities."""
    xs = np.asarray(values, dtype=float).ravel()
    return xs[np.isfinite(xs)]
