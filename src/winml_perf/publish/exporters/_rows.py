"""Pieces several exporters share: a record row's shape and name, and the newest ok record of each
series that dashboards take."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from winml_perf.model.metrics import METRICS
from winml_perf.support.errors import UsageError

if TYPE_CHECKING:
    import pandas as pd

#: Metrics sent to dashboards (BMF, github-action-benchmark): the headline ones.
DASHBOARD_METRICS = tuple(m.name for m in METRICS if m.exported)
SERIES_FIELDS = ("bundle", "route", "prompt_tokens", "max_new_tokens")


def shape_text(row: Mapping[str, Any]) -> str:
    from winml_perf.results.frame import clean

    p, n = clean(row.get("prompt_tokens")), clean(row.get("max_new_tokens"))
    return " ".join(x for x in ((f"p{p}" if p is not None else ""), (f"n{n}" if n is not None else "")) if x) or "-"


def latest_per_series(df: pd.DataFrame) -> pd.DataFrame:
    """The newest ok record of each bundle x route x shape (a bundle by its path or --series label,
    named by its path's tail where two share a name); an error when the frame mixes testbeds (dashboards key
    results by testbed themselves)."""
    ok = df[df["status"] == "ok"]
    testbeds = sorted({str(t) for t in ok["testbed_id"].dropna()})
    if len(testbeds) > 1:
        raise UsageError(
            f"the selection spans {len(testbeds)} testbeds ({', '.join(testbeds[:4])})",
            "export one testbed at a time: add --testbed ID",
        )
    from winml_perf.compare.text import bundle_labels
    from winml_perf.results.rows import series_where

    ok = ok.sort_values(["created_utc", "id"])
    where = [series_where(row) for row in ok.to_dict("records")]  # bundles named alike stay apart (issue 35)
    ok = ok.assign(_where=where)
    latest = ok.groupby([*SERIES_FIELDS, "_where"], dropna=False, sort=False).tail(1)
    latest = latest.sort_values(list(SERIES_FIELDS) + ["id"])
    pairs = list(zip(latest["bundle"], latest["_where"]))
    names = bundle_labels(pairs)  # the benchmark's name is the path's tail where two names clash
    return latest.assign(bundle=[names[p] for p in pairs]).drop(columns="_where")


def benchmark_name(row: Mapping[str, Any]) -> str:
    return f"{row['bundle']} {row['route']} {shape_text(row)}"


def dashboard_metrics(row: Mapping[str, Any]) -> list[str]:
    """The headline metrics ``row`` has a value of."""
    from winml_perf.results.frame import clean

    return [m for m in DASHBOARD_METRICS if clean(row.get(m)) is not None]


def interval(row: Mapping[str, Any], metric: str) -> tuple[Any, Any] | None:
    """(low, high) of a metric's 95 % interval in ``row``, or None when it has none."""
    from winml_perf.results.frame import clean

    lo, hi = clean(row.get(f"{metric}_ci95_low")), clean(row.get(f"{metric}_ci95_high"))
    return (lo, hi) if lo is not None and hi is not None else None
