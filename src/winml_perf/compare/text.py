"""The words comparisons print and read: shapes, metric words, group labels and percentages."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from winml_perf.model.metrics import get
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


#: A labelled series among bundles of its name ('tiny-qwen2 (--series)').
LABELLED_TAG = "--series"


def _distinct_suffixes(paths: list[str]) -> dict[str, str]:
    """Each path -> its shortest tail of folders (two at least) that no other of ``paths`` ends with."""
    parts = {p: p.strip("/").split("/") for p in paths}
    out = {}
    for p, comps in parts.items():
        k = min(2, len(comps))
        while k < len(comps) and any(q != p and qc[-k:] == comps[-k:] for q, qc in parts.items()):
            k += 1
        out[p] = "/".join(comps[-k:])
    return out


def bundle_labels(pairs: Iterable[tuple[Any, Any]]) -> dict[tuple[Any, Any], str]:
    """(bundle name, where: results/rows.series_where) -> the label a person reads: the name alone
    while one series' bundle of those given has it; where several bundles share a name, each by
    the shortest tail of its path that tells it apart ('a/tiny-qwen2', 'b/tiny-qwen2'), and a
    ``--series`` label as 'name (--series)'. Look labels up by ``(name, where)``."""
    wheres_of: dict[Any, set[Any]] = defaultdict(set)
    for name, where in pairs:
        wheres_of[name].add(where or None)
    out: dict[tuple[Any, Any], str] = {}
    for name, wheres in wheres_of.items():
        tails = _distinct_suffixes(sorted(w for w in wheres if w))
        for where in wheres:
            if len(wheres) == 1:
                out[(name, where)] = str(name)
            else:
                out[(name, where)] = tails[where] if where else f"{name} ({LABELLED_TAG})"
    return out


def parse_pct(value: float | str | None, flag: str) -> float | None:
    """A percentage flag's value: '2%' is 2.0; None stays None. A bare number is refused: '0.05'
    reads as 0.05 % to one person and 5 % to another."""
    if value is None:
        return None
    if not str(value).strip().endswith("%"):
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
