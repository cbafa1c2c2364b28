"""Every output format, once: its name, what it renders, which commands offer it, its file suffix,
and the one dispatch from a format to its renderer; human numbers.

- ``table``: aligned columns for a terminal; ``markdown``: a GitHub table; ``csv``: one header
  row, then rows; ``json``: one document (indented); ``jsonl``: one JSON object per line. The
  exporters' own formats (``bmf``, ``gab-*``: publish/exporters) join the registry when their
  module registers them, so a new export format is its module and its test.
- A command takes the formats of its ``Offer``: ``check_format(offer, fmt)`` is the one check (exit
  2 naming the flag, the value and what is offered), ``format_help(offer)`` the one --help text.
- ``render(fmt, shown)`` writes what a command shows (``Shown``: ``Rows`` for one result set, a
  run: publish/render.py) in ``fmt``; a command whose table is a view of its own (sentences,
  several tables) hands it to ``Rows`` as ``view``.
- Human output (table, markdown) writes numbers with ``human`` (support/human_numbers.py: four
  significant digits, an SI suffix from 10 000 on); CSV, JSON and JSONL carry them raw.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from operator import methodcaller
from typing import Any, Protocol

from winml_perf.publish.csv_cells import neutralise
from winml_perf.support.document_text import markdown_table
from winml_perf.support.errors import UsageError
from winml_perf.support.human_numbers import SIGNIFICANT as SIGNIFICANT  # re-exported
from winml_perf.support.human_numbers import human as human  # re-exported, and used here
from winml_perf.support.indented_json import dumps_indented
from winml_perf.support.text_table import fitted


class Offer(StrEnum):
    """Which commands offer a format: each --format (or --export-FORMAT) takes those of one offer."""

    ROWS = "rows"  # a result set: perf, results list / show, compare routes / runs, devices, bundle show
    SUMMARY = "summary"  # one summary: bundle prepare / from-gguf / synth, tune, serve
    EXPORT = "export"  # a file of stored records: results export (publish/exporters)
    RUN_FILE = "run-file"  # a file of the run just measured: perf --export-FORMAT


class Shown(Protocol):
    """What a command prints, in each format the registry renders (its ``render`` calls one)."""

    def table(self) -> Iterable[str]: ...
    def markdown(self) -> Iterable[str]: ...
    def csv(self) -> Iterable[str]: ...
    def json(self) -> Iterable[str]: ...
    def jsonl(self) -> Iterable[str]: ...


@dataclass(frozen=True)
class Format:
    """One output format."""

    name: str  # its --format name
    renders: str  # what its text is
    offers: frozenset[Offer]
    suffix: str | None = None  # the suffix its files usually take (.json: the text is JSON); None: it writes no file
    note: str = ""  # words after its name where --help lists it
    listed: bool = True  # whether --help lists it (gab is reached through gab-bigger / gab-smaller)
    render: Callable[[Shown], Iterable[str]] | None = None  # None: its exporter writes it (publish/exporters)
    terminal: bool = False  # read by a person at a terminal: a command's own view, its notes beside it
    holds_document: bool = False  # writes the whole result as one document, its notes included


_FORMATS: dict[str, Format] = {}


def register(fmt: Format) -> Format:
    """Add ``fmt`` to the registry (an error when its name is taken)."""
    if fmt.name in _FORMATS:
        raise ValueError(f"two formats are named {fmt.name!r}")
    _FORMATS[fmt.name] = fmt
    return fmt


def formats() -> dict[str, Format]:
    """Every format by name, in the order --help and errors list them."""
    return dict(_FORMATS)


def offered(offer: Offer) -> tuple[str, ...]:
    """The names of the formats ``offer`` takes, in order (an exporter's once its module is imported)."""
    return tuple(name for name, f in _FORMATS.items() if offer in f.offers)


def format_named(fmt: str) -> Format:
    """The format ``fmt`` (a KeyError when there is none: check_format first)."""
    return _FORMATS[fmt]


def check_format(offer: Offer, fmt: str) -> str:
    """``fmt`` when ``offer`` takes it; else a UsageError (exit 2) naming --format, ``fmt`` and the formats offered."""
    allowed = offered(offer)
    if fmt not in allowed:
        raise UsageError(f"--format {fmt!r} is not one of {', '.join(allowed)}", f"pass --format {allowed[0]}")
    return fmt


def format_help(offer: Offer, then: str = "") -> str:
    """'table, json, jsonl, csv or markdown.': the listed formats of ``offer`` (``then`` after them),
    for --format's help."""
    shown = [f.name + (f" {f.note}" if f.note else "") for f in _FORMATS.values() if offer in f.offers and f.listed]
    listed = ", ".join(shown[:-1]) + " or " + shown[-1] if len(shown) > 1 else "".join(shown)
    return listed + (f" {then}" if then else "") + "."


def render(fmt: str, shown: Shown) -> Iterable[str]:
    """``shown`` in ``fmt``, in pieces (the registry's renderer of that format)."""
    write = _FORMATS[fmt].render
    assert write is not None, f"{fmt} is written by its exporter"  # check_format with the command's offer first
    return write(shown)


def _cell(value: Any) -> str:
    return (
        human(value)
        if isinstance(value, (int, float)) and not isinstance(value, bool)
        else ("" if value is None else str(value))
    )


def _number(value: Any) -> bool:
    return value is None or (isinstance(value, (int, float)) and not isinstance(value, bool))


def _csv_text(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow([neutralise(h) for h in headers])
    writer.writerows([["" if v is None else neutralise(v) for v in r] for r in rows])
    return buf.getvalue()


def _json_lines(items: Iterable[Mapping[str, Any]]) -> str:
    return "".join(json.dumps(d, allow_nan=False, separators=(",", ":")) + "\n" for d in items)


@dataclass(frozen=True)
class Rows:
    """One result set, for every format: ``doc`` for json, ``items`` one a line for jsonl, ``rows``
    under ``headers`` for table, markdown and csv (numbers human in the first two, raw in csv;
    ``csv_rows`` where ``rows`` are already text a person reads, under ``csv_headers`` where their
    columns differ). ``drop``: what leaves a narrow table first; ``width``: the table's (default
    the terminal's); ``view``: the command's own table."""

    doc: Any = None
    items: Sequence[Mapping[str, Any]] = ()
    headers: Sequence[str] = ()
    rows: Sequence[Sequence[Any]] = ()
    drop: Sequence[str] | None = None
    csv_rows: Sequence[Sequence[Any]] | None = None
    width: int | None = None
    view: Callable[[], str] | None = None
    csv_headers: Sequence[str] | None = None

    def table(self) -> Iterable[str]:
        if self.view is not None:
            return [self.view()]
        rows = [list(r) for r in self.rows]
        numeric = {h for i, h in enumerate(self.headers) if rows and all(_number(r[i]) for r in rows)}
        shown = [[_cell(v) for v in r] for r in rows]  # numbers right-aligned: a column's magnitudes line up
        return [fitted(self.headers, shown, self.width, self.drop, numeric)]

    def markdown(self) -> Iterable[str]:
        return [markdown_table(list(self.headers), [[_cell(v) for v in r] for r in self.rows]) + "\n"]

    def csv(self) -> Iterable[str]:
        headers = self.headers if self.csv_headers is None else self.csv_headers
        return [_csv_text(headers, self.rows if self.csv_rows is None else self.csv_rows)]

    def json(self) -> Iterable[str]:
        return [dumps_indented(self.doc) + "\n"]  # the text of json.dumps(doc, indent=2, allow_nan=False)

    def jsonl(self) -> Iterable[str]:
        return [_json_lines(self.items)]


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
    return "".join(render(fmt, Rows(headers=headers, rows=list(rows), drop=drop, width=width)))


def json_text(docs: Sequence[Mapping[str, Any]] | Mapping[str, Any], fmt: str) -> str:
    """``json``: the document(s) indented; ``jsonl``: one object per line (a mapping is one line)."""
    items = [docs] if isinstance(docs, Mapping) else list(docs)
    return "".join(render(fmt, Rows(doc=docs, items=items)))


def result_text(
    fmt: str,
    doc: Any,
    items: Sequence[Mapping[str, Any]],
    headers: Sequence[str],
    rows: Sequence[Sequence[Any]],
    drop: Sequence[str] | None = None,
    csv_rows: Sequence[Sequence[Any]] | None = None,
) -> str:
    """One result set (``Rows``) in ``fmt``, a format of ``Offer.ROWS`` (else exit 2)."""
    check_format(Offer.ROWS, fmt)
    return "".join(render(fmt, Rows(doc, items, headers, rows, drop, csv_rows)))


def shown_text(fmt: str, shown: Shown) -> str:
    """``shown`` in ``fmt`` as one text."""
    return "".join(render(fmt, shown))


_FILES = frozenset({Offer.ROWS, Offer.EXPORT, Offer.RUN_FILE})
register(
    Format(
        "table",
        "aligned columns for a terminal (a command's own view where it has one)",
        frozenset({Offer.ROWS, Offer.SUMMARY}),
        render=methodcaller("table"),
        terminal=True,
    )
)
register(
    Format(
        "json",
        "one document, indented",
        _FILES | {Offer.SUMMARY},
        suffix=".json",
        render=methodcaller("json"),
        holds_document=True,
    )
)
register(Format("jsonl", "one JSON object per line", _FILES, suffix=".jsonl", render=methodcaller("jsonl")))
register(Format("csv", "one header row, then rows (numbers raw)", _FILES, suffix=".csv", render=methodcaller("csv")))
register(Format("markdown", "a GitHub table", _FILES, suffix=".md", render=methodcaller("markdown")))
