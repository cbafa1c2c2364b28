"""Records as a pandas DataFrame (``winml_perf.results.load``) and back to JSON-able rows: the one
wide shape exporters and the Python API read.

A frame holds one row per record: its identity and grouping columns (RECORD_COLUMNS), then per
metric of model/metrics.py (in its order) the median, named as the metric, with
``<metric>_ci95_low`` / ``_ci95_high`` / ``_cv_pct`` / ``_n`` (and a pooled metric's percentiles)
beside it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import pandas as pd

from winml_perf.model.equivalence_view import COLUMNS as EQUIVALENCE_COLUMNS
from winml_perf.model.equivalence_view import NOT_CHECKED, VERDICT_COLUMN
from winml_perf.model.metrics import POOLED, get, sort_key

RECORD_COLUMNS = (
    "id",
    "record_uid",
    "run_id",
    "created_utc",
    "testbed_id",
    "hostname",
    "bundle",
    "bundle_path",
    "route",
    "runtime",
    "prompt_tokens",
    "max_new_tokens",
    "status",
    "git_commit",
    "winml_perf_version",
    "onnxruntime_version",
    "genai_version",
    "schema_version",
    "n_samples",
    *EQUIVALENCE_COLUMNS,  # the route's equivalence verdict and key figures (model/equivalence_view.py)
)
#: Statistics beside each metric's median in a frame.
METRIC_STATS = ("ci95_low", "ci95_high", "cv_pct", "n")


def _percentiles(name: str) -> tuple[str, ...]:
    """Percentile columns beside a pooled metric's median (its p50 is the median itself)."""
    m = get(name)
    return tuple(q for q in m.percentiles if q != "p50") if m and m.source == POOLED else ()


def frame(records: Sequence[Mapping[str, Any]], metrics: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """Record rows + metric rows (store.records / store.metrics) -> one wide DataFrame."""
    by_record: dict[int, dict[str, Any]] = {}
    names: set[str] = set()
    for m in metrics:
        row = by_record.setdefault(m["record_id"], {})
        name = m["name"]
        names.add(name)
        row[name] = m["median"]
        if m["n"] > 1 or m.get("ci95_low") is not None:
            for s in METRIC_STATS:
                row[f"{name}_{s}"] = m.get(s)
            for q in _percentiles(name):
                row[f"{name}_{q}"] = m.get(q)
    columns = list(RECORD_COLUMNS)
    if any(r.get("bundle_id") for r in records):  # the bundle's content digest, once a record has one
        columns.insert(columns.index("bundle") + 1, "bundle_id")
    if any(r.get("series_label") for r in records):  # winml perf --series, once a record has one
        columns.insert(columns.index("bundle") + 1, "series_label")
    for name in sorted(names, key=sort_key):
        columns.append(name)
        for s in METRIC_STATS + _percentiles(name):
            if any(f"{name}_{s}" in r for r in by_record.values()):
                columns.append(f"{name}_{s}")
    rows = [
        {**{c: r.get(c) for c in (*RECORD_COLUMNS, "bundle_id", "series_label")}, **by_record.get(r["id"], {})}
        for r in records
    ]
    for row in rows:  # a record without a check says so, never blank
        row[VERDICT_COLUMN] = row[VERDICT_COLUMN] or NOT_CHECKED
    df = pd.DataFrame(rows, columns=columns)
    for c in (
        "id",
        "prompt_tokens",
        "max_new_tokens",
        "schema_version",
        "n_samples",
        "equivalence_first_divergence_step",
        *(c for c in columns if c.endswith("_n")),
    ):
        df[c] = df[c].astype("Int64")
    return df


def clean(value: Any) -> Any:
    """A frame's value as JSON takes it: NaN / NA / NaT -> None, timestamps as the store's text,
    numpy and pandas scalars as Python ones."""
    if value is None or value is pd.NA or value is pd.NaT:
        return None
    if isinstance(value, datetime):
        return utc_text(value)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if hasattr(value, "item"):  # numpy / pandas scalars
        return clean(value.item())
    return value


def frame_rows(df: pd.DataFrame) -> list[dict[str, Any]]:
    """JSON-able dicts of a frame (NaN / NA -> None)."""
    return [{k: clean(v) for k, v in row.items()} for row in df.astype(object).to_dict(orient="records")]


def utc_text(value: Any) -> Any:
    """A timestamp as the store writes it ('YYYY-MM-DDTHH:MM:SS.ffffffZ'); text passes through."""
    if isinstance(value, datetime):
        return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return value


def with_datetimes(df: pd.DataFrame) -> pd.DataFrame:
    """``created_utc`` as tz-aware UTC datetimes (what ``results.load`` returns)."""
    out = df.copy()
    out["created_utc"] = pd.to_datetime(out["created_utc"], utc=True, format="ISO8601")
    return out


def with_text_times(df: pd.DataFrame) -> pd.DataFrame:
    """``created_utc`` back as the store's text (what exporters write)."""
    if not pd.api.types.is_datetime64_any_dtype(df["created_utc"]):
        return df
    out = df.copy()
    out["created_utc"] = [None if pd.isna(v) else utc_text(v.to_pydatetime()) for v in df["created_utc"]]
    return out
