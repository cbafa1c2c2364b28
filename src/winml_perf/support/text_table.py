"""The one table writer for a terminal: every command's table fits ``$COLUMNS`` by the same rule.

When the whole table is wider than the terminal, in this order until it fits:

1. the headers go on two lines (a header wider than every cell of its column);
2. columns leave, one at a time, in the order the caller names (by default the rightmost first;
   the first column always stays);
3. a cell still too wide is shortened with ``…`` (the widest column first): a name in its middle,
   prose at its end.

It writes two styles: columns two spaces apart (``results list``, ``devices``, ``compare``), or a
GitHub table between ``|`` (``bundle show``, ``bundle prepare``, ``tune``).

A line under the table names what left, and where every column is to be had. Columns are two spaces
apart, numbers right-aligned; a cell is never wrapped. ``terminal_width()`` is the width to fit:
``$COLUMNS`` first, else the terminal's, else unlimited (a pipe or a file).
"""

from __future__ import annotations

import os
import shutil
import sys
import textwrap
from collections.abc import Collection, Sequence

from winml_perf.support.document_text import terminal_cell

#: The width of a pipe or a file without $COLUMNS: nothing is fitted.
UNLIMITED = 10_000
#: Where every column of a fitted table is to be had, unless the caller says otherwise.
EVERY_COLUMN = "--format markdown or csv has every column"


def terminal_width() -> int:
    """The terminal's columns ($COLUMNS first); UNLIMITED for a pipe or file without $COLUMNS."""
    if os.environ.get("COLUMNS", "").isdigit() or sys.stdout.isatty():
        return shutil.get_terminal_size((UNLIMITED, 24)).columns
    return UNLIMITED


def wrapped(head: str) -> str:
    """A header on two lines, split at the space that makes the longer line shortest."""
    words = head.split(" ")
    if len(words) < 2:
        return head
    cut = min(range(1, len(words)), key=lambda i: max(len(" ".join(words[:i])), len(" ".join(words[i:]))))
    return " ".join(words[:cut]) + "\n" + " ".join(words[cut:])


def text_width(text: str) -> int:
    return max(map(len, text.splitlines()), default=0)


def render(
    heads: Sequence[str], rows: Sequence[Sequence[str]], wrap: bool, numeric: Collection[str] = (), pipes: bool = False
) -> str:
    """Columns two spaces apart (``pipes``: between ``|`` as a GitHub table), ``numeric`` ones
    right-aligned; with ``wrap`` a header wider than every cell of its column goes on two lines. A
    cell is never cut or wrapped here."""
    widths = [max((len(r[i]) for r in rows), default=0) for i in range(len(heads))]
    split = [wrapped(h).split("\n") if wrap and len(h) > w else [h] for h, w in zip(heads, widths)]
    widths = [max(w, *(len(part) for part in lines)) for w, lines in zip(widths, split)]
    right = [h in numeric for h in heads]

    def line(cells: Sequence[str]) -> str:
        padded = [c.rjust(w) if r else c.ljust(w) for c, w, r in zip(cells, widths, right)]
        return f"| {' | '.join(padded)} |" if pipes else "  ".join(padded).rstrip()

    depth = max((len(lines) for lines in split), default=1)
    head_lines = [line([lines[k] if k < len(lines) else "" for lines in split]) for k in range(depth)]
    rule = "|" + "|".join("-" * (w + 2) for w in widths) + "|" if pipes else line(["-" * w for w in widths])
    return "\n".join([*head_lines, rule, *(line(r) for r in rows)])


def shorten(text: str, width: int) -> str:
    """``text`` within ``width`` characters: a name (no space) loses its middle to ``…`` (both ends
    tell long names apart: a bundle's family and its variant), prose its end."""
    if len(text) <= width:
        return text
    if width <= 1:
        return "…"[:width]
    if " " in text.strip():
        return text[: width - 1].rstrip() + "…"
    head = width // 2
    return text[:head] + "…" + text[len(text) - (width - 1 - head) :]


def fit(
    heads: Sequence[str],
    rows: Sequence[Sequence[str]],
    width: int,
    drop: Sequence[str] | None = None,
    numeric: Collection[str] = (),
    pipes: bool = False,
) -> tuple[str, list[str]]:
    """The table within ``width`` columns and the headers of the columns that left to fit it
    (the module docstring gives the rule). ``drop``: the headers that may leave, in the order they
    leave; None: every column but the first, rightmost first."""
    heads = list(heads)
    cells: list[list[str]] = [[str(c) for c in r] for r in rows]
    rows = cells
    text = render(heads, rows, False, numeric, pipes)
    if text_width(text) <= width:
        return text, []
    text = render(heads, rows, True, numeric, pipes)
    order = list(drop) if drop is not None else list(reversed(heads[1:]))
    dropped: list[str] = []
    for name in order:
        if text_width(text) <= width:
            break
        if name not in heads:
            continue
        i = heads.index(name)
        heads.pop(i)
        for row in cells:
            row.pop(i)
        dropped.append(name)
        text = render(heads, rows, True, numeric, pipes)
    while text_width(text) > width and rows:
        widths = [max(len(r[i]) for r in rows) for i in range(len(heads))]
        i = max(range(len(heads)), key=lambda k: widths[k])
        over = text_width(text) - width
        target = max(widths[i] - over, 6)
        if target >= widths[i]:
            break
        for row in cells:
            row[i] = shorten(row[i], target)
        text = render(heads, rows, True, numeric, pipes)
    return text, dropped


def left_out(dropped: Sequence[str], width: int, where: str = EVERY_COLUMN) -> str:
    """The line under a fitted table naming the columns that left ('' when none did)."""
    if not dropped:
        return ""
    return fill(f"(left out to fit {width} columns: {', '.join(dropped)}; {where})", width)


def fitted(
    heads: Sequence[str],
    rows: Sequence[Sequence[str]],
    width: int | None = None,
    drop: Sequence[str] | None = None,
    numeric: Collection[str] = (),
    where: str = EVERY_COLUMN,
    pipes: bool = False,
) -> str:
    """The table fitted to ``width`` (the terminal's by default), the line naming what left under
    it; ends with a newline."""
    width = terminal_width() if width is None else width
    rows = [[terminal_cell(v) for v in r] for r in rows]  # a name's newline or escape code stays in its cell
    text, dropped = fit(heads, rows, width, drop, numeric, pipes)
    note = left_out(dropped, width, where)
    return text + "\n" + (note + "\n" if note else "")


def fill(text: str, width: int | None = None, indent: str = "") -> str:
    """Prose within ``width`` (the terminal's by default), broken between words (a word longer than
    the line, such as a path, across lines); each line of
    ``text`` on its own, continuation lines indented by ``indent`` plus two spaces."""
    width = terminal_width() if width is None else width
    if width >= UNLIMITED:
        return text
    out = []
    for line in text.split("\n"):
        lead = line[: len(line) - len(line.lstrip(" "))]
        out.append(
            textwrap.fill(
                line,
                width,
                initial_indent="",
                subsequent_indent=lead + indent + "  ",
                break_long_words=True,  # only a word longer than the line (a path) is cut
                break_on_hyphens=False,
                drop_whitespace=True,
            )
            if len(line) > width
            else line
        )
    return "\n".join(out)


def say(text: str) -> None:
    """A line (or lines) of prose for a person, on stderr, within the terminal's width."""
    print(fill(text), file=sys.stderr)
