"""Record filters shared by every reading command and ``winml_perf.results.load``."""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa

from winml_perf.model import flag_bounds
from winml_perf.model.route import COMPILED_MARK, EMULATED_MARK, bare_label
from winml_perf.results import migrations as mig
from winml_perf.results.rows import NO_BUNDLE_ID, bundle_name, normalize_utc
from winml_perf.results.sql_types import AnySelect
from winml_perf.support.errors import StoreError

FILTER_KEYS = (
    "bundle",
    "route",
    "testbed",
    "run_id",
    "status",
    "git_commit",
    "version",
    "since",
    "until",
    "prompt_tokens",
    "max_new_tokens",
    "ids",
    "series",
    "verdict",
    "digest",
    "limit",
)


#: A bundle as listings label it where two share a name (compare/text.bundle_labels).
LABELLED = re.compile(rf"(?P<name>.+) \((?P<id>[0-9a-f]{{6,12}}|{NO_BUNDLE_ID})\)")


def _bundle_condition(values: list[str]) -> sa.ColumnElement[bool]:
    """A bundle given by name matches its name; given by path, its name and that path; given as a
    label, 'name (a1b2c3)', that name with a bundle id starting so ('name (no id)': none). Every branch
    names ``bundle``, the series index's first column (an OR with bare ``bundle_path`` would not)."""
    r = mig.records.c
    labelled = [m for v in values if (m := LABELLED.fullmatch(v))]  # 'name (a1b2c3)' as listings show it
    values = [v for v in values if not LABELLED.fullmatch(v)]
    names = [v for v in values if bundle_name(v) == v]
    paths = [_normal_path(v) for v in values if bundle_name(v) != v]
    conds: list[sa.ColumnElement[bool]] = [r.bundle.in_(names)] if names else []
    conds += [
        sa.and_(
            r.bundle == m["name"], r.bundle_id.is_(None) if m["id"] == NO_BUNDLE_ID else r.bundle_id.startswith(m["id"])
        )
        for m in labelled
    ]
    conds += [
        sa.and_(
            r.bundle == bundle_name(v),
            sa.or_(r.bundle_path.in_(_spellings(v)), *_tail_conditions(v)),
        )
        for v in paths
    ]
    return conds[0] if len(conds) == 1 else sa.or_(*conds)


def _tail_conditions(path: str) -> list[sa.ColumnElement[bool]]:
    """A relative path (``a/tiny-qwen2``, as listings name bundles that share a name) also matches
    every stored path that ends with it, folder for folder. A single folder name (``b``, also as
    ``./b`` or ``b/``) is the folder here, not every folder of that name."""
    if path.startswith(("/", ".")) or ":" in path or "/" not in path:
        return []
    r = mig.records.c
    return [r.bundle_path.endswith(f"/{path}", autoescape=True), r.bundle_path.endswith(f"/{path}/", autoescape=True)]


def _route_values(values: list[str]) -> list[str]:
    """A route named without its marks (``ep=qnn``) matches it as listings show it too
    (``ep=qnn (emulated)``, ``ep=openvino (compiled)``: model/route.shown_label)."""
    out = []
    for v in values:
        out.append(v)
        if bare_label(v) == v:
            out += [v + COMPILED_MARK, v + EMULATED_MARK, v + COMPILED_MARK + EMULATED_MARK]
    return out


def _normal_path(value: str) -> str:
    """``./b``, ``b/`` and ``b`` are one bundle; ``x/../b`` is ``b`` (the path as written, not resolved)."""
    text = value.replace("\\", "/")
    return posixpath.normpath(text) if text else value


def _spellings(path: str) -> list[str]:
    """How a store may hold the normalised ``path`` (written as the command line gave it, from here
    or as an absolute path)."""
    forms = {path, _normal_path(os.path.abspath(path)), _normal_path(os.path.relpath(path))}
    forms |= {os.path.realpath(p) for p in list(forms)}  # a store keeps the absolute path, links resolved
    forms |= {f"./{p}" for p in forms if not p.startswith(("/", "."))}
    forms |= {f"{p}/" for p in forms}
    return sorted(forms)


def _values(v: Any) -> list[Any]:
    return list(v) if isinstance(v, (list, tuple, set, frozenset)) else [v]


def apply_filters(stmt: AnySelect, filters: Mapping[str, Any]) -> AnySelect:
    unknown = sorted(set(filters) - set(FILTER_KEYS))
    if unknown:
        raise StoreError(f"unknown results filter(s): {', '.join(unknown)}", f"use {', '.join(FILTER_KEYS)}")
    r = mig.records.c
    f = {k: v for k, v in filters.items() if v is not None and k != "limit"}
    if "bundle" in f:
        vals = [str(x) for x in _values(f["bundle"])]
        stmt = stmt.where(_bundle_condition(vals))
    if "route" in f:
        stmt = stmt.where(r.route.in_(_route_values([str(x) for x in _values(f["route"])])))
    if "digest" in f:  # the bundle's content digest (bundle_id), by a prefix as listings show it
        stmt = stmt.where(
            sa.or_(*[r.bundle_id.startswith(str(d).lower(), autoescape=True) for d in _values(f["digest"])])
        )
    simple = {
        "series": r.series_key,
        "testbed": r.testbed_id,
        "run_id": r.run_id,
        "status": r.status,
        "version": r.winml_perf_version,
        "prompt_tokens": r.prompt_tokens,
        "max_new_tokens": r.max_new_tokens,
        "ids": r.id,
        "verdict": r.equivalence_verdict,  # model/equivalence_view.VIEW_VERDICTS
    }
    for key, col in simple.items():
        if key in f:
            stmt = stmt.where(col.in_(_values(f[key])))
    if "git_commit" in f:
        stmt = stmt.where(sa.or_(*[r.git_commit.startswith(str(c), autoescape=True) for c in _values(f["git_commit"])]))
    if "since" in f:
        stmt = stmt.where(r.created_utc >= parse_when(f["since"], "--since"))
    if "until" in f:
        stmt = stmt.where(r.created_utc < parse_when(f["until"], "--until", end_of_day=True))
    return stmt


def parse_when(value: Any, flag: str, end_of_day: bool = False, now: datetime | None = None) -> str:
    """'2025-01-31', an ISO datetime, or a relative age '7d' / '12h' / '30m' -> normalised UTC text.
    A bare date given as an upper bound means the end of that day."""
    if isinstance(value, datetime):
        return normalize_utc(value.isoformat())
    text = str(value).strip()
    units = {"d": "days", "h": "hours", "m": "minutes", "w": "weeks"}
    if len(text) >= 2 and text[-1] in units and text[:-1].isdigit():
        flag_bounds.check_age(flag, int(text[:-1]), flag_bounds.DAYS_PER_UNIT[text[-1]], text)
        now = now or datetime.now(UTC)
        return normalize_utc((now - timedelta(**{units[text[-1]]: int(text[:-1])})).isoformat())
    try:
        if len(text) == 10:
            day = datetime.fromisoformat(text).replace(tzinfo=UTC)
            return normalize_utc((day + timedelta(days=1) if end_of_day else day).isoformat())
        return normalize_utc(text)
    except (ValueError, StoreError):
        raise StoreError(
            f"{flag} {text!r} is not a date", f"e.g. {flag} 2025-01-31, {flag} 2025-01-31T02:00Z or {flag} 7d"
        ) from None
