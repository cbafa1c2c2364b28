"""CSV cells a spreadsheet cannot run: the one neutraliser of both CSV writers (``--format csv``
and the ``csv`` exporter).

A text cell that starts with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return is read as a
formula by Excel, LibreOffice and Google Sheets (``=HYPERLINK(...)`` in a bundle folder's name or a
testbed id); OWASP's guidance is to prefix such a cell with a single quote, which shows the text as
written. Numbers are left as numbers (a negative median stays numeric).
"""

from __future__ import annotations

from typing import Any

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def neutralise(value: Any) -> Any:
    """``value`` as a CSV cell: text a spreadsheet would evaluate gets a leading ``'``; a carriage
    return inside text becomes a newline (Python's csv quotes a cell only for the line terminator's
    characters, so a bare CR would end the row in a reader); anything else is unchanged."""
    if not isinstance(value, str):
        return value
    live = value.startswith(FORMULA_STARTS)
    if "\r" in value:
        value = value.replace("\r\n", "\n").replace("\r", "\n")
    return "'" + value if live else value


def neutralise_frame(df: Any) -> Any:
    """A copy of the DataFrame ``df`` whose text cells are neutralised (numeric columns untouched)."""
    out = df.copy()
    for column in out.columns:
        if out[column].dtype.kind not in "biufcmM":  # not bool, number or time: may hold text
            out[column] = out[column].map(neutralise)
    out.columns = [neutralise(str(c)) for c in out.columns]
    return out
