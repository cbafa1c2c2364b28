"""Sweep values of `winml perf --prompt-tokens / --max-new-tokens`: every occurrence of the flag
merged, each a comma list of integers or ranges (llama-bench's form).

- ``N``: one value;
- ``FIRST-LAST+STEP``: FIRST, FIRST+STEP, ... up to LAST (``16-64+16`` = 16,32,48,64);
- ``FIRST-LAST*FACTOR``: FIRST, FIRST*FACTOR, ... up to LAST (``128-1024*2`` = 128,256,512,1024).

Repeats keep their first position (``16,64 --prompt-tokens 16`` runs 16 and 64 once each).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from winml_perf.model import flag_bounds
from winml_perf.support.errors import UsageError

RANGE = re.compile(r"^(\d+)-(\d+)([+*])(\d+)$")
SYNTAX = "N, FIRST-LAST+STEP or FIRST-LAST*FACTOR, comma-separated; repeat the flag to add more"
#: More values than this from one range is a typo, not a sweep.
MAX_VALUES = 256


def _bad(flag: str, item: str, why: str) -> UsageError:
    return UsageError(f"{flag} {item!r}: {why}", f"{flag} takes {SYNTAX}, e.g. {flag} 16,64 or {flag} 128-1024*2")


def _range(flag: str, item: str, m: re.Match[str]) -> list[int]:
    first, last, op, by = int(m[1]), int(m[2]), m[3], int(m[4])
    if first <= 0 or last < first:
        raise _bad(flag, item, "a range runs from a positive FIRST up to LAST >= FIRST")
    if (op == "+" and by < 1) or (op == "*" and by < 2):
        raise _bad(flag, item, "the step must be 1 or more (+) and the factor 2 or more (*)")
    flag_bounds.check(flag, last, item)
    out, v = [], first
    while v <= last:
        out.append(v)
        if len(out) > MAX_VALUES:
            raise _bad(flag, item, f"the range gives more than {MAX_VALUES} values")
        v = v + by if op == "+" else v * by
    return out


def parse_item(flag: str, item: str) -> list[int]:
    item = item.strip()
    m = RANGE.match(item)
    if m:
        return _range(flag, item, m)
    try:
        value = int(item)
    except ValueError:
        raise _bad(flag, item, "is neither an integer nor a range") from None
    if value <= 0:
        raise _bad(flag, item, "must be a positive integer")
    flag_bounds.check(flag, value, item)
    return [value]


def sweep_values(occurrences: Iterable[str], flag: str) -> tuple[int, ...]:
    """Every occurrence of ``flag`` merged into one ordered tuple without repeats."""
    out: list[int] = []
    for text in occurrences:
        items = [i for i in text.split(",") if i.strip()]
        if not items:
            raise _bad(flag, text, "is empty")
        for item in items:
            out += [v for v in parse_item(flag, item) if v not in out]
    if not out:
        raise _bad(flag, "", "is empty")
    return tuple(out)
