"""Secrets never leave the process: the one redaction for every credential-bearing store location.

A store location may carry a credential in any of these forms:

- URL userinfo: ``postgresql://user:PASSWORD@host/db``; the password may hold any character a
  careless user types (``/``, a space, a raw ``@``, percent escapes);
- URL query parameters: ``?password=...``, ``sslpassword=``, ``sslkey=``, ``sslcert=``, ``passfile=``;
- libpq connection strings: ``host=h password=... dbname=d`` (a value may be quoted: ``password='a b'``).

Records travel as CI artifacts, so everything shown, stored, logged or raised goes through ``mask``:
the CLI's stdout and stderr (support/stdio.py ``guarded_streams``, tracebacks included), a record's
command line (``mask_argv``) and a store's printable name (results/location.py). The process keeps
the real location to connect.

``mask`` works in two ways: patterns for the forms above, and the literal credentials of every
store location this process was handed (``remember``), so a password whose form no pattern can
bound (one with a space, inside a sentence) is hidden wherever it appears, raw or percent-encoded.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from urllib.parse import quote, quote_plus, unquote, unquote_plus

HIDDEN = "***"

#: Keys whose value is a credential (or where one is kept), in a URL query or a libpq DSN.
SECRET_KEYS = ("password", "passwd", "pwd", "sslpassword", "sslkey", "sslcert", "passfile", "passphrase")
#: A credential shorter than this is not hidden literally (it would hide ordinary words); the
#: patterns still hide it in every form they bound.
MIN_LITERAL = 4

_KEYS = "|".join(SECRET_KEYS)
# scheme://user:SECRET@ : up to the last '@' of the run without whitespace or quotes, so a raw '/'
# or '@' in the password is hidden too
_URL_PASSWORD = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.-]*://[^\s:/@?#\"'<>]*):(?P<secret>[^\s\"'<>]*)@")
# key=VALUE in a URL query or a libpq string (key = 'quoted value' too)
_KEY_VALUE = re.compile(
    rf"(?P<head>(?<![A-Za-z0-9_])(?:{_KEYS})\s*=\s*)(?P<secret>'(?:[^'\\]|\\.)*'?|[^\s&;#\"'<>,]+)",
    re.IGNORECASE,
)
# a whole argument that is a URL: the userinfo runs to the last '@' (spaces included)
#: Longest key of SECRET_KEYS: a match of _KEY_VALUE has its key this many characters or fewer before its '='.
_LONGEST_KEY = max(map(len, SECRET_KEYS))
_KEY_AT_END = re.compile(rf"(?:{_KEYS})\Z", re.IGNORECASE)
_WHOLE_URL = re.compile(r"^(?P<head>(?:--[\w-]+=)?[A-Za-z][A-Za-z0-9+.-]*://[^\s:/@?#]*):(?P<secret>.*)@", re.DOTALL)

#: A database URL written without its '//' (postgresql:/user:pw@host/db); group 1: its scheme. Its
#: credentials are read as if it had them; results/location.py refuses it.
UNSLASHED_DB_URL = re.compile(r"^((?:postgres(?:ql)?|sqlite)(?:\+\w+)?):/?(?!/)", re.IGNORECASE)

_remembered: set[str] = set()


def _variants(secret: str) -> Iterable[str]:
    """The forms a credential takes in text: raw, percent-encoded or -decoded, JSON-escaped."""
    for form in (secret, unquote(secret), unquote_plus(secret), quote(secret, safe=""), quote_plus(secret)):
        yield form
        yield json.dumps(form, ensure_ascii=True)[1:-1]
        yield json.dumps(form, ensure_ascii=False)[1:-1]


def credentials(location: str) -> list[str]:
    """The credentials a store location ``location`` carries, in every form it may be shown."""
    found: list[str] = []
    whole = _WHOLE_URL.match(UNSLASHED_DB_URL.sub(r"\1://", location, count=1))
    if whole:  # a raw '@' makes the split ambiguous (a parser may take a piece for the host): each piece too
        found.extend([whole["secret"], *whole["secret"].split("@")])
    for m in _KEY_VALUE.finditer(location):
        value = m["secret"]
        found.append(value)
        if len(value) >= 2 and value[0] == "'" and value[-1] == "'":
            found.append(value[1:-1])
    out: list[str] = []
    for secret in found:
        out.extend(v for v in _variants(secret) if len(v) >= MIN_LITERAL and v != HIDDEN)
    return out


def remember(location: str | None) -> None:
    """Hide the credentials of store location ``location`` from everything ``mask`` sees from now on."""
    if location:
        _remembered.update(credentials(str(location)))


def remember_secret(secret: str | None) -> None:
    """Hide one credential itself (a password a URL parser decoded) in every form it may be shown."""
    if secret:
        _remembered.update(v for v in _variants(str(secret)) if len(v) >= MIN_LITERAL and v != HIDDEN)


def _may_hold_key_value(text: str) -> bool:
    """Could _KEY_VALUE match in ``text``? Each of its matches is a key, blanks, then '=': this looks
    behind each '=' only, where the pattern would be tried at every character (a run record of
    10^5 samples is tens of MB)."""
    at = text.find("=")
    while at >= 0:
        end = at
        while end > 0 and text[end - 1].isspace():  # \s and str.isspace are the same set
            end -= 1
        if _KEY_AT_END.search(text, max(0, end - _LONGEST_KEY), end):
            return True
        at = text.find("=", at + 1)
    return False


def mask(text: str) -> str:
    """``text`` with every credential of a store location replaced by ***."""
    if not text:
        return text
    for secret in sorted(_remembered, key=len, reverse=True):
        if secret in text:
            text = text.replace(secret, HIDDEN)
    if "://" in text:  # every _URL_PASSWORD match holds one
        text = _URL_PASSWORD.sub(lambda m: f"{m['head']}:{HIDDEN}@", text)
    if _may_hold_key_value(text):
        text = _KEY_VALUE.sub(lambda m: f"{m['head']}{HIDDEN}", text)
    return text


def mask_arg(arg: str) -> str:
    """One command-line argument: a URL argument's userinfo is hidden whole (it cannot hold a space
    of its own: the shell split there), then ``mask``."""
    arg = _WHOLE_URL.sub(lambda m: f"{m['head']}:{HIDDEN}@", str(arg), count=1)
    return mask(arg)


def mask_argv(argv: Sequence[str]) -> tuple[str, ...]:
    """A command line as a record may keep it: each argument masked."""
    return tuple(mask_arg(str(arg)) for arg in argv)


def looks_like_dsn(text: str) -> bool:
    """Is ``text`` a libpq key=value connection string (``host=h dbname=d ...``) rather than a path?"""
    pairs = re.findall(r"(?:^|\s)([A-Za-z_]+)\s*=", text)
    return bool(pairs) and (any(p.lower() in SECRET_KEYS for p in pairs) or len(pairs) >= 2 and " " in text)
