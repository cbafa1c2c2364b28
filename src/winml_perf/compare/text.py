"""The words comparisons print and read: shapes, metric words, group labels and percentages."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from winml_perf.model.metrics import get
from winml_perf.results.rows import NO_BUNDLE_ID
from winml_perf.support.errors import UsageError


def metric_word(metric: str) -> str:
    """The short word a sentence uses for ``metric`` ('decode' for decode_tokens_per_s)."""
    m = get(metric)
    return m.word if m else metric


def shape_label(prompt_tokens: Any, max_new_tokens: Any) -> str:
    """'p16 n32', 'p16', or '-' when neither is known."""
    parts = []
    if prompt_tokens is not None:
        parts.append(f"p{prompt_tokens}")
    if max_new_tokens is not None:
        parts.append(f"n{max_new_tokens}")
    return " ".join(parts) or "-"


def key_label(key: Sequence[Any], bundle: str | None = None) -> str:
    """A group key (compare/cells.py KEY_FIELDS) for a person: 'bundle route p16 n32 @testbed';
    ``bundle``: the bundle's label in place of its name (``bundle_labels``)."""
    testbed, name, route, p, n = key[:5]
    return f"{bundle or name} {route} {shape_label(p, n)} @{testbed}"


#: Hex digits of a bundle id in a label ('tiny-qwen2 (a1b2c3)'); more where two ids begin alike.
LABEL_ID_DIGITS = 6


def bundle_labels(pairs: Iterable[tuple[Any, Any]]) -> dict[tuple[Any, Any], str]:
    """(bundle name, bundle id) -> the label a person reads: the name alone while one bundle of
    those given has it; 'name (a1b2c3)' for each of several bundles named alike, 'name (no id)' for
    records made before bundles had ids (record/bundle_identity.py). Look labels up by
    ``(name, bundle_id or None)``."""
    ids_of: dict[Any, set[Any]] = defaultdict(set)
    for name, bundle_id in pairs:
        ids_of[name].add(bundle_id or None)
    out: dict[tuple[Any, Any], str] = {}
    for name, ids in ids_of.items():
        known = sorted(i for i in ids if i)
        digits = LABEL_ID_DIGITS
        while len({i[:digits] for i in known}) < len(known):
            digits += 1
        for bundle_id in ids:
            tag = bundle_id[:digits] if bundle_id else NO_BUNDLE_ID
            out[(name, bundle_id)] = str(name) if len(ids) == 1 else f"{name} ({tag})"
    return out


def parse_pct(value: float | str | None, flag: str, *, unit_required: bool = False) -> float | None:
    """A percentage flag's value: '2%' and '2' are both 2.0; None stays None. With
    ``unit_required`` a bare number is refused: '0.05' reads as 0.05 % to one person and 5 % to
    another."""
    if value is None:
        return None
    if unit_required and not str(value).strip().endswith("%"):
        raise UsageError(
            f"{flag} {value!r} has no unit: it could be read as {value}% or as a fraction",
            f"give the unit, e.g. {flag} 5% for five percent ({flag} {value}% if you meant {value} percent)",
        )
    text = str(value).strip().rstrip("%").strip()
    try:
        pct = float(text)
    except ValueError:
        raise UsageError(f"{flag} {value!r} is not a percentage", f"e.g. {flag} 2%") from None
    if not math.isfinite(pct) or pct < 0:
        raise UsageError(f"{flag} must be a percentage >= 0, got {value!r}", f"e.g. {flag} 2%")
    return pct
