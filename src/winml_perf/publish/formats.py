"""The one ``--format`` vocabulary of every command that prints results, and human numbers.

- ``table``: aligned columns for a terminal; ``markdown``: a GitHub table; ``csv``: one header
  row, then rows; ``json``: one document (indented); ``jsonl``: one JSON object per line.
- ``result_text`` writes one result set in any of them; a command whose table is a view of its own
  (sentences, several tables) prints that for ``table`` and hands every other format to it.
- A command that prints one summary (``bundle prepare``, ``bundle from-gguf``, ``synth``) takes
  ``table`` or ``json`` (``TABLE_OR_JSON``).
- Human output (table, markdown) writes numbers with ``human`` (support/human_numbers.py: four
  significant digits, an SI suffix from 10 000 on); CSV, JSON and JSONL carry them raw.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from tabulate import tabulate

from winml_perf.publish.csv_cells import neutralise
from winml_perf.support.document_text import markdown_table, terminal_cell
from winml_perf.support.errors import UsageError
from winml_perf.support.human_numbers import SIGNIFICANT as SIGNIFICANT  # re-exported
from winml_perf.support.human_numbers import human as human  # re-exported, and used here
from winml_perf.support.indented_json import dumps_indented
from winml_perf.support.text_table import fitted

FORMATS = ("table", "json", "jsonl", "csv", "markdown")
#: Help text of a --format option taking the whole vocabulary.
FORMAT_HELP = "table, json, jsonl, csv or markdown."
TABLE_OR_JSON = ("table", "json")
JSON_FORMATS = ("json", "jsonl")  # the figures as they are, for a program


def check_format(fmt: str, allowed: Sequence[str] = FORMATS, flag: str = "--format") -> str:
    """``fmt`` when it is one of ``allowed``; else a UsageError (exit 2) naming them."""
    if fmt not in allowed:
        raise UsageError(f"{flag} {fmt!r} is not one of {', '.join(allowed)}", f"pass {flag} {allowed[0]}")
    return fmt


def _cell(value: Any) -> str:
    return (
        human(value)
        if isinstance(value, (int, float)) and not isinstance(value, bool)
        else ("" if value is None else str(value))
    )


def _number(value: Any) -> bool:
    return value is None or (isinstance(value, (int, float)) and not isinstance(value, bool))


def table_text(
    headers: Sequence[str],
    rows: Iterable[Sequence[Any]],
    fmt: str,
    drop: Sequence[str] | None = None,
    width: int | None = None,
) -> str:
    """Rows as ``table``, ``markdown`` or ``csv`` text (numbers rounded for the first two). ``table``
    fits the terminal (support/text_table.py: ``drop`` names the columns that may leave, in order;
    ``width`` defaults to the terminal's)."""
    rows = [list(r) for r in rows]
    if fmt == "csv":
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow([neutralise(h) for h in headers])
        writer.writerows([["" if v is None else neutralise(v) for v in r] for r in rows])
        return buf.getvalue()
    shown = [[_cell(v) for v in r] for r in rows]
    if fmt == "table":  # numbers right-aligned: a column's magnitudes line up
        numeric = {h for i, h in enumerate(headers) if rows and all(_number(r[i]) for r in rows)}
        return fitted(headers, shown, width, drop, numeric)
    if fmt == "markdown":
        return markdown_table(list(headers), shown) + "\n"
    shown = [[terminal_cell(v) for v in r] for r in shown]
    table: str = tabulate(
        shown, headers=list(headers), tablefmt="simple", disable_numparse=True
    )  # tabulate ships no types
    return table + "\n"


def json_text(docs: Sequence[Mapping[str, Any]] | Mapping[str, Any], fmt: str) -> str:
    """``json``: the document(s) indented; ``jsonl``: one object per line (a mapping is one line)."""
    if fmt == "jsonl":
        items = [docs] if isinstance(docs, Mapping) else list(docs)
        return "".join(json.dumps(d, allow_nan=False, separators=(",", ":")) + "\n" for d in items)
    return dumps_indented(docs) + "\n"  # the text of json.dumps(docs, indent=2, allow_nan=False)


def result_text(
    fmt: str,
    doc: Any,
    items: Sequence[Mapping[str, Any]],
    headers: Sequence[str],
    rows: Sequence[Sequence[Any]],
    drop: Sequence[str] | None = None,
    csv_rows: Sequence[Sequence[Any]] | None = None,
) -> str:
    """One result set in ``fmt``: ``doc`` for json, ``items`` one a line for jsonl, ``rows`` under
    ``headers`` for table, markdown and csv (numbers human in the first two, raw in csv; ``csv_rows``
    where ``rows`` are already text a person reads). ``drop``: what leaves a narrow table first."""
    check_format(fmt)
    if fmt == "json":
        return json_text(doc, "json")
    if fmt == "jsonl":
        return json_text(list(items), "jsonl")
    return table_text(headers, csv_rows if fmt == "csv" and csv_rows is not None else rows, fmt, drop=drop)
