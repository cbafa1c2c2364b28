"""Selectors that name a set of records for ``winml compare runs``: 'run:ID' (or a unique
prefix), 'commit:SHA', 'version:X.Y', 'date:YYYY-MM-DD' (a UTC day), 'latest', 'previous', or a bare
value tried as a run id, then a commit, a version, a date."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from winml_perf.results.filters import parse_when
from winml_perf.results.series import series_runs
from winml_perf.results.store import Store
from winml_perf.support.errors import StoreError, UsageError


@dataclass(frozen=True)
class Selection:
    """Records picked by a selector, and how the selector was read."""

    selector: str
    meaning: str
    records: tuple[dict[str, Any], ...]


#: Run ids named in an error about an unknown or ambiguous one.
SHOWN_CANDIDATES = 6


def _names(runs: list[str]) -> str:
    more = f" and {len(runs) - SHOWN_CANDIDATES} more" if len(runs) > SHOWN_CANDIDATES else ""
    return ", ".join(runs[:SHOWN_CANDIDATES]) + more


#: The flag of a filter whose name is not its flag's (the others: --NAME with dashes).
FILTER_FLAGS = {"git_commit": "--commit", "run_id": "--run", "testbed_id": "--testbed"}


def _given(filters: Mapping[str, Any]) -> dict[str, Any]:
    """The filters a command was given (the others are None)."""
    return {k: v for k, v in filters.items() if v is not None}


def check_filters_match(store: Store, filters: Mapping[str, Any]) -> None:
    """StoreError (exit 2) naming the filters given when they match no record of a store that
    holds some: a typo in --testbed is named, not the run or selector looked for within it."""
    given = _given(filters)
    if not given or store.count(**given) or not store.count():
        return
    named = " ".join(f"{FILTER_FLAGS.get(k, '--' + k.replace('_', '-'))} {v!r}" for k, v in given.items())
    raise StoreError(
        f"no record in {store.display} matches {named}",
        "check each value against `winml results list`, which lists every record without filters",
    )


def run_matches(store: Store, text: str, **filters: Any) -> list[str]:
    """Run ids equal to ``text``, else those starting with it (newest first)."""
    runs = store.run_ids(**filters)
    return [r for r in runs if r == text] or [r for r in runs if r.startswith(text)]


def resolve_run_id(store: Store, text: str, flag: str = "--run", **filters: Any) -> str:
    """The one run whose id is ``text`` or starts with it; StoreError (none) or UsageError
    (several), both exit 2, naming the candidates."""
    value = text.strip()
    if not value:
        raise UsageError(f"{flag} is empty", "pass a run id or its first characters (see `winml results list`)")
    hits = run_matches(store, value, **filters)
    if len(hits) == 1:
        return hits[0]
    if hits:
        raise UsageError(
            f"{flag} {value!r} matches {len(hits)} runs: {_names(hits)}", "give more characters of the run id"
        )
    check_filters_match(store, filters)
    runs = store.run_ids(**filters)
    where = f"{store.display}" + (" with these filters" if _given(filters) else "")
    raise StoreError(
        f"no run {value!r} ({flag}) in {where}" + (f"; runs: {_names(runs)}" if runs else "; it holds no runs"),
        "pass one of these ids or its first characters (see `winml results list`)",
    )


def _per_series(store: Store, kind: str, filters: Mapping[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    """'latest' / 'previous' of each series (testbed, bundle, route, shape, options): its newest run,
    or the one before it. In a fleet the newest runs overall are of different testbeds."""
    depth = 1 if kind == "latest" else 2
    picks = {key: runs[depth - 1] for key, runs in series_runs(store, depth, **filters).items() if len(runs) >= depth}
    records = [r for key, run in picks.items() for r in store.records(series=key, run_id=run, **filters)]
    records.sort(key=lambda r: (r["created_utc"], r["id"]))
    runs = sorted(set(picks.values()))
    if not records:
        return "", []
    if len(runs) == 1:
        return f"{kind} run {runs[0]}", records
    return f"{kind} run of each of {len(picks)} series ({len(runs)} runs)", records


def _by_kind(store: Store, kind: str, value: str, filters: Mapping[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    if kind == "run":
        hits = run_matches(store, value, **filters)
        if len(hits) > 1:
            raise UsageError(
                f"run id prefix {value!r} matches {len(hits)} runs: {_names(hits)}",
                "give more characters of the run id",
            )
        return (f"run {hits[0]}", store.records(run_id=hits[0], **filters)) if hits else ("", [])
    if kind in ("latest", "previous"):
        return _per_series(store, kind, filters)
    if kind == "commit":
        return f"git commit {value}*", store.records(git_commit=value, **filters)
    if kind == "version":
        return f"winml-perf {value}", store.records(version=value, **filters)
    if kind == "date":
        return f"{value} (UTC)", store.records(
            since=parse_when(value, "date:"), until=parse_when(value, "date:", end_of_day=True), **filters
        )
    raise UsageError(f"unknown selector kind {kind!r}", "use run:, commit:, version:, date:, latest or previous")


def select(store: Store, selector: str, flag: str, **filters: Any) -> Selection:
    """Records of ``selector``: 'run:ID', 'commit:SHA', 'version:X.Y', 'date:YYYY-MM-DD', 'latest',
    'previous', or a bare value tried as a run id, then a commit, a version, a date."""
    text = selector.strip()
    if text in ("latest", "previous"):
        kinds = [(text, "")]
    elif ":" in text and text.split(":", 1)[0] in ("run", "commit", "version", "date"):
        kind, value = text.split(":", 1)
        kinds = [(kind, value)]
    else:
        kinds = [("run", text), ("commit", text), ("version", text)]
        if len(text) == 10 and text[4] == "-":
            kinds.append(("date", text))
    for kind, value in kinds:
        meaning, records = _by_kind(store, kind, value, filters)
        if records:
            return Selection(text, meaning, tuple(records))
    check_filters_match(store, filters)
    where = f"{store.display}" + (" with these filters" if _given(filters) else "")
    if text == "previous" and store.count(**_given(filters)):
        raise StoreError(
            f"{flag} 'previous' matches no records in {where}: each series has one run so far",
            "the gate starts from the second night; or give a baseline that exists: run:ID, commit:SHA,"
            " version:X.Y or date:YYYY-MM-DD (see `winml results list`)",
        )
    raise StoreError(
        f"{flag} {selector!r} matches no records in {where}",
        "use run:ID, commit:SHA, version:X.Y, date:YYYY-MM-DD, latest or previous (see `winml results list`)",
    )
