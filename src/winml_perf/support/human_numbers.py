"""The one formatter of measured numbers for a person (tables, sentences, the dashboard); machine
formats (CSV, JSON, the store) keep full precision and never pass through it."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

#: Significant digits of a human number (README "Results" states the rule).
SIGNIFICANT = 4
#: Suffixes of 10^3, 10^6, 10^9 and 10^12 in a human number of 10 000 or more.
SI_SUFFIXES = ("k", "M", "G", "T")


def signed(value: Any, digits: int = SIGNIFICANT) -> str:
    """``human`` with a '+' before a non-negative number (a slope, a shift): '+12.35', '-1950'."""
    text = human(value, digits)
    return f"+{text}" if text and not text.startswith("-") and float(value) >= 0 else text


def human(value: Any, digits: int = SIGNIFICANT) -> str:
    """A measured number as a person reads it, ``digits`` significant digits and no exponent.

    Below 10 000 a plain decimal with its four digits, trailing zeros kept as the SI form keeps them
    (0.0123456 -> '0.01235', 0.57 -> '0.5700', 1.5 -> '1.500', 123.456 -> '123.5', 1234.56 -> '1235'); from 10 000 on an SI suffix with all ``digits`` digits
    kept (128983 -> '129.0k', 28691.7 -> '28.69k', 9999.6 -> '10.00k', 1.29e6 -> '1.290M'), so a
    column's magnitudes stand apart and its width stays even. An ``int`` is a count or an id and
    is written whole; None and non-finite numbers are ''. Beyond the 'T' range: e-notation."""
    if value is None or isinstance(value, bool):
        return "" if value is None else str(value)
    if isinstance(value, int):
        return str(value)
    try:
        x = float(value)
    except (TypeError, ValueError):
        return str(value)
    if not math.isfinite(x):
        return ""
    if x == 0:
        return "0"
    x = float(f"{x:.{digits - 1}e}")  # rounded first: 9999.6 is 1.000e4, and takes the 'k'
    exponent = math.floor(math.log10(abs(x)))
    if exponent >= digits and exponent < 3 * (len(SI_SUFFIXES) + 1):
        group = exponent // 3
        scaled = x / 10 ** (3 * group)
        return f"{scaled:.{digits - 1 - (exponent - 3 * group)}f}{SI_SUFFIXES[group - 1]}"
    if exponent >= digits:  # beyond the largest suffix
        return f"{x:.{digits - 1}e}"
    return f"{x:.{min(max(0, digits - 1 - exponent), 12)}f}"  # 0.57 is '0.5700': every digit it has


#: The smallest exponent human_many writes without human(): its decimals stay within human's 12.
_FAST_MIN_EXPONENT = -8


def human_many(values: Iterable[Any], digits: int = SIGNIFICANT) -> list[str]:
    """``[human(v, digits) for v in values]``, the same texts at about a third of the cost: a float
    below 10**digits (and not tiny) is written from the digits of one e-format (its 'd.ddd' are the
    rounded value's digits; only the point moves); anything else goes through human(). For the
    dashboard's hover texts, three a record (10^6 records: 3 million numbers)."""
    form = f"%.{digits - 1}e"
    out: list[str] = []
    for x in values:
        if type(x) is not float or x != x or x == 0.0 or x in (math.inf, -math.inf):
            out.append(human(x, digits))
            continue
        mantissa, _, power = (form % x).rpartition("e")
        exponent = int(power)
        if exponent >= digits or exponent < _FAST_MIN_EXPONENT:
            out.append(human(x, digits))
            continue
        sign = "-" if mantissa[0] == "-" else ""
        figures = mantissa.lstrip("-").replace(".", "")
        if exponent >= 0:
            whole, frac = figures[: exponent + 1], figures[exponent + 1 :]
            out.append(f"{sign}{whole}.{frac}" if frac else f"{sign}{whole}")
        else:
            out.append(f"{sign}0.{'0' * (-exponent - 1)}{figures}")
    return out


def fixed(value: float, decimals: int = 1, signed: bool = False) -> str:
    """A percentage or a ratio for a person, in a column of even decimals: ``decimals`` places
    (5.372 -> '5.4'), but never more than ``SIGNIFICANT`` significant digits (1446.1 -> '1446',
    12345.6 -> '12.35k', a 425.94x speed-up -> '425.9'); '' when not finite. ``signed`` writes '+'
    before a non-negative value (+4.1, -9.3)."""
    if not math.isfinite(value):
        return ""
    text = f"{value:.{decimals}f}"
    if len(text.lstrip("-").replace(".", "").lstrip("0")) > SIGNIFICANT:
        text = human(float(value))
    return f"+{text}" if signed and value >= 0 else text
