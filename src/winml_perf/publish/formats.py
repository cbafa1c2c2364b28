"""The one ``--format`` vocabulary of every command that prints results, and human numbers.

- ``table``: aligned columns for a terminal; ``markdown``: a GitHub table; ``csv``: one header
  row, then rows; ``json``: one document (indented); ``jsonl``: one JSON object per line.
- Human output rounds numbers to meaningful digits (``human``); JSON and JSONL carry them raw.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from tabulate import tabulate

from winml_perf.publish.csv_cells import neutralise
from winml_perf.support.errors import UsageError
from winml_perf.support.indented_json import dumps_indented

FORMATS = ("table", "json", "jsonl", "csv", "markdown")
#: Help text of a --format option taking the whole vocabulary.
FORMAT_HELP = "table, json, jsonl, csv or markdown."
#: Significant digits of a human number (below 10 000; above it every integer digit is kept).
SIGNIFICANT = 4


def check_format(fmt: str, allowed: Sequence[str] = FORMATS, flag: str = "--format") -> str:
    """``fmt`` when it is one of ``allowed``; else a UsageError (exit 2) naming them."""
    if fmt not in allowed:
        raise UsageError(f"{flag} {fmt!r} is not one of {', '.join(allowed)}", f"pass {flag} {allowed[0]}")
    return fmt


def human(value: Any, digits: int = SIGNIFICANT) -> str:
    """A number as a person reads it: ``digits`` significant digits, never an exponent, no
    trailing noise (15645.4916 -> '15645', 0.0123456 -> '0.01235', 1.5 -> '1.500' stays '1.5')."""
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
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(x))))
    text = f"{x:.{min(decimals, 12)}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def _cell(value: Any) -> str:
    return (
        human(value)
        if isinstance(value, (int, float)) and not isinstance(value, bool)
        else ("" if value is None else str(value))
    )


def table_text(headers: Sequence[str], rows: Iterable[Sequence[Any]], fmt: str) -> str:
    """Rows as ``table``, ``markdown`` or ``csv`` text (numbers rounded for the first two)."""
    rows = [list(r) for r in rows]
    if fmt == "csv":
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow([neutralise(h) for h in headers])
        writer.writerows([["" if v is None else neutralise(v) for v in r] for r in rows])
        return buf.getvalue()
    shown = [[_cell(v) for v in r] for r in rows]
    return (
        tabulate(
            shown, headers=list(headers), tablefmt="github" if fmt == "markdown" else "simple", disable_numparse=True
        )
        + "\n"
    )


def json_text(docs: Sequence[Mapping[str, Any]] | Mapping[str, Any], fmt: str) -> str:
    """``json``: the document(s) indented; ``jsonl``: one object per line (a mapping is one line)."""
    if fmt == "jsonl":
        items = [docs] if isinstance(docs, Mapping) else list(docs)
        return "".join(json.dumps(d, allow_nan=False, separators=(",", ":")) + "\n" for d in items)
    return dumps_indented(docs) + "\n"  # the text of json.dumps(docs, indent=2, allow_nan=False)


def rows_text(
    headers: Sequence[str], rows: Sequence[Sequence[Any]], docs: Sequence[Mapping[str, Any]], fmt: str
) -> str:
    """One result set in ``fmt``: human rows for table/markdown/csv, raw dicts for json/jsonl."""
    check_format(fmt)
    if fmt in ("json", "jsonl"):
        return json_text(list(docs), fmt)
    return table_text(headers, rows, fmt)
