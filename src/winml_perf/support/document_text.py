"""One escaper per document format the tool writes text into (its terminal text: terminal_text.py).

Names in a table come from outside (a bundle folder, a testbed, a stage, an imported record): a
``|`` would add a column, a newline a row, and raw HTML (``<img onerror=...>``) would run where
the markdown is rendered. ``markdown_cell`` makes a value one inert cell; ``markdown_table`` is the
only way a table is made (tabulate's ``github`` format over escaped cells). CSV has its own
(publish/csv_cells.py ``neutralise``), HTML has ``html.escape``.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence
from typing import Any

from winml_perf.support.terminal_text import clean


def markdown_cell(value: Any) -> str:
    """``value`` as one markdown table cell: HTML escaped, '|' escaped, line breaks a space, controls shown."""
    text = "" if value is None else str(value)
    text = text.replace("\r\n", " ").replace("\n", " ").replace("\r", " ")
    text = clean(html.escape(text, quote=False))
    return text.replace("\\", "\\\\").replace("|", "\\|")


def markdown_table(headers: Sequence[Any], rows: Iterable[Sequence[Any]], **kwargs: Any) -> str:
    """A github-markdown table whose every header and cell is ``markdown_cell`` escaped."""
    from tabulate import tabulate

    table: str = tabulate(  # tabulate ships no types
        [[markdown_cell(v) for v in r] for r in rows],
        headers=[markdown_cell(h) for h in headers],
        tablefmt="github",
        disable_numparse=True,
        **kwargs,
    )
    return table


def terminal_cell(value: Any) -> str:
    """``value`` as one cell of a terminal table: on one line, controls shown."""
    text = "" if value is None else str(value)
    return clean(text).replace("\n", "\\n").replace("\t", " ")
