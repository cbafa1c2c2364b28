"""Secrets never leave the process: the one mask for passwords in URLs and command lines.

A store URL may carry a password (``postgresql://user:PASSWORD@host/db``, or ``?password=...``).
Records travel as CI artifacts, so the command line a record keeps and every message printed go
through ``mask`` first; the process itself keeps the real URL to connect.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

HIDDEN = "***"

# scheme://user:PASSWORD@  (up to the last '@' before the host: a raw '@' in it is hidden too)
_URL_PASSWORD = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.-]*://[^\s:/@]*):(?P<secret>[^\s/]*)@")
# password=VALUE in a URL query or a libpq connection string
_KEY_PASSWORD = re.compile(r"(?P<head>\b(?:password|passwd|pwd)=)(?P<secret>[^\s&;]+)", re.IGNORECASE)


def mask(text: str) -> str:
    """``text`` with every password in a URL or ``password=`` pair replaced by ***."""
    text = _URL_PASSWORD.sub(lambda m: f"{m['head']}:{HIDDEN}@", text)
    return _KEY_PASSWORD.sub(lambda m: f"{m['head']}{HIDDEN}", text)


def mask_argv(argv: Sequence[str]) -> tuple[str, ...]:
    """A command line as a record may keep it: each argument masked."""
    return tuple(mask(str(arg)) for arg in argv)
