"""The numeric-flag check of every command, after parsing and before the command runs, so no
command can forget one: each value against its flag's bounds (model/flag_bounds.py).

Typed options (``int``/``float``) are checked as parsed. Options whose text holds numbers are
found by the metavar they declare (the house rule: every value option declares one), and each
number in the text is checked: ``PCT`` (``1%``), ``N|auto``, ``N`` as text (sweep lists and ranges,
``128-1024*2``), ``AGE``/``WHEN`` (a relative age ``7d``). The flag's own parser still reads
the text; a text this check cannot read is left to that parser's message.
"""

from __future__ import annotations

import re
from typing import Any

from winml_perf.model import flag_bounds

_AGE = re.compile(r"^\s*(\d+)\s*([dhmw])\s*$")
_INTEGERS = re.compile(r"\d+")


def flag_name(param: Any) -> str:
    """The name a message uses for ``param``: its longest option string (``--limit``, not ``-n``)."""
    opts = [o for o in getattr(param, "opts", ()) if o.startswith("-")]
    return max(opts, key=len) if opts else str(getattr(param, "name", "?")).upper()


def _values(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _check_text(flag: str, metavar: str, text: str) -> None:
    if metavar == "PCT":
        try:
            number = float(text.strip().rstrip("%").strip())
        except ValueError:
            return  # not a number: the flag's parser names it
        flag_bounds.check(flag, number, text)
    elif metavar in ("N", "N|auto") and text.strip() != "auto":
        for digits in _INTEGERS.findall(text):
            if int(digits) > 0:  # a 0 (or a range's step) is the flag's parser's to name
                flag_bounds.check(flag, int(digits), text)
    elif metavar in ("AGE", "WHEN") and (m := _AGE.match(text)):
        flag_bounds.check_age(flag, int(m[1]), flag_bounds.DAYS_PER_UNIT[m[2]], text)


def check_params(ctx: Any) -> None:
    """Raise UsageError (exit 2) for the first number of ``ctx``'s command out of its flag's bounds."""
    for param in ctx.command.params:
        flag = flag_name(param)
        for value in _values(ctx.params.get(param.name)):
            if isinstance(value, bool) or value is None:
                continue
            if isinstance(value, (int, float)):
                flag_bounds.check(flag, value)
            elif isinstance(value, str) and param.metavar:
                _check_text(flag, param.metavar, value)
