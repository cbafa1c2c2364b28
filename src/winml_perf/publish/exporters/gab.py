"""``gab-bigger`` / ``gab-smaller``: github-action-benchmark "custom" JSON
(https://github.com/benchmark-action/github-action-benchmark): an array of
``{name, unit, value, range, extra}``, the latest ok record per series. Its tool reads one
direction per file, so each format is one file, for ``customBiggerIsBetter`` and
``customSmallerIsBetter`` (``gab`` with a direction is either)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from winml_perf.model.equivalence_view import view_of_row
from winml_perf.model.metrics import bigger_is_better, unit
from winml_perf.publish.exporters import Exporter, register
from winml_perf.publish.exporters._rows import benchmark_name, dashboard_metrics, interval, latest_per_series
from winml_perf.publish.exporters.json import nothing_in
from winml_perf.publish.formats import Format, Offer
from winml_perf.support.errors import UsageError

GAB_DIRECTIONS = {"bigger": "customBiggerIsBetter", "smaller": "customSmallerIsBetter"}


def _entry(row: Mapping[str, Any], metric: str) -> dict[str, Any]:
    from winml_perf.results.frame import clean

    entry = {"name": f"{benchmark_name(row)} {metric}", "unit": unit(metric), "value": row[metric]}
    ci = interval(row, metric)
    if ci is not None:
        lo, hi = ci
        entry["range"] = f"± {max(row[metric] - lo, hi - row[metric]):.6g}"
    extra = [f"testbed: {row['testbed_id']}", f"run: {row['run_id']}"]
    extra += [f"commit: {row['git_commit']}"] if clean(row.get("git_commit")) is not None else []  # none outside git
    extra.append(f"equivalence: {view_of_row(row).text()}")  # 'NOT equivalent (...) against config', 'not checked'
    if clean(row.get(f"{metric}_n")) is not None:
        extra.append(f"n: {row[f'{metric}_n']}")
    entry["extra"] = "\n".join(extra)
    return entry


def gab_entries(df: Any, direction: str) -> list[dict[str, Any]]:
    """github-action-benchmark entries of one direction ('bigger' | 'smaller')."""
    from winml_perf.results.frame import frame_rows

    if direction not in GAB_DIRECTIONS:
        raise UsageError(
            f"--direction {direction!r} is not bigger or smaller", "pass --direction bigger or --direction smaller"
        )
    want_bigger = direction == "bigger"
    return [
        _entry(row, m)
        for row in frame_rows(latest_per_series(df))
        for m in dashboard_metrics(row)
        if bigger_is_better(m) == want_bigger
    ]


def needs_direction(direction: str | None = None, **_: Any) -> None:
    """``gab``'s check before the store is read: exit 2 without a direction."""
    if direction is None:
        raise UsageError(
            "--format gab needs a direction: a github-action-benchmark file holds one (customBiggerIsBetter or customSmallerIsBetter)",
            "pass --format gab-bigger (throughputs) or --format gab-smaller (times, bytes), or --direction"
            " bigger|smaller; one file each",
        )


def to_gab(df: Any, direction: str | None = None, **_: Any) -> str:
    needs_direction(direction)
    assert direction is not None
    return json.dumps(gab_entries(df, direction), indent=2, allow_nan=False) + "\n"


def to_gab_bigger(df: Any, **_: Any) -> str:
    return to_gab(df, direction="bigger")


def to_gab_smaller(df: Any, **_: Any) -> str:
    return to_gab(df, direction="smaller")


_EXPORT = frozenset({Offer.EXPORT})
register(
    Exporter("gab-bigger", to_gab_bigger, empty=nothing_in),
    Format("gab-bigger", "github-action-benchmark's customBiggerIsBetter", _EXPORT, suffix=".json"),
)
register(
    Exporter("gab-smaller", to_gab_smaller, empty=nothing_in),
    Format(
        "gab-smaller",
        "github-action-benchmark's customSmallerIsBetter",
        _EXPORT,
        suffix=".json",
        note="(github-action-benchmark's customBiggerIsBetter / customSmallerIsBetter: one file each)",
    ),
)
register(
    Exporter("gab", to_gab, empty=nothing_in, options=("direction",), check=needs_direction),
    Format("gab", "either gab file, by --direction", _EXPORT, suffix=".json", listed=False),
)
