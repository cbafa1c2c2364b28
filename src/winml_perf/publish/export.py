"""Exporters: a DataFrame of records (``winml_perf.results.load``) -> text. One function per format,
in a registry; pure functions of the frame.

- ``csv`` / ``json``: every selected record, one row each (wide: ``<metric>`` is the median,
  ``<metric>_ci95_low`` / ``_ci95_high`` / ``_cv_pct`` / ``_n`` beside it).
- ``markdown``: a compact table of the headline numbers.
- ``bmf``: Bencher Metric Format (https://bencher.dev/docs/reference/bencher-metric-format/):
  ``{benchmark: {measure: {value, lower_value, upper_value}}}``, the latest ok record per series.
- ``gab-bigger`` / ``gab-smaller``: github-action-benchmark "custom" JSON
  (https://github.com/benchmark-action/github-action-benchmark): an array of
  ``{name, unit, value, range, extra}``; its tool reads one direction per file, so each format is
  one file, for ``customBiggerIsBetter`` and ``customSmallerIsBetter`` (``gab`` with a direction is
  either).
- ``jsonl``: the ``json`` rows, one object per line.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import pandas as pd
from tabulate import tabulate

from winml_perf.model.metrics import (
    DECODE_THROUGHPUT,
    E2E,
    LATENCY,
    METRICS,
    POOLED,
    PROMPT_THROUGHPUT,
    TTFT,
    bigger_is_better,
    get,
    sort_key,
    unit,
)
from winml_perf.support.errors import UsageError

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
)
#: Statistics beside each metric's median in a frame.
METRIC_STATS = ("ci95_low", "ci95_high", "cv_pct", "n")
#: Metrics sent to dashboards (BMF, github-action-benchmark): the headline ones.
DASHBOARD_METRICS = tuple(m.name for m in METRICS if m.exported)
SERIES_FIELDS = ("bundle", "route", "prompt_tokens", "max_new_tokens")
GAB_DIRECTIONS = {"bigger": "customBiggerIsBetter", "smaller": "customSmallerIsBetter"}


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
    for name in sorted(names, key=sort_key):
        columns.append(name)
        for s in METRIC_STATS + _percentiles(name):
            if any(f"{name}_{s}" in r for r in by_record.values()):
                columns.append(f"{name}_{s}")
    rows = [{**{c: r.get(c) for c in RECORD_COLUMNS}, **by_record.get(r["id"], {})} for r in records]
    df = pd.DataFrame(rows, columns=columns)
    for c in (
        "id",
        "prompt_tokens",
        "max_new_tokens",
        "schema_version",
        "n_samples",
        *(c for c in columns if c.endswith("_n")),
    ):
        df[c] = df[c].astype("Int64")
    return df


def _clean(value: Any) -> Any:
    if value is None or value is pd.NA or value is pd.NaT:
        return None
    if isinstance(value, datetime):
        return utc_text(value)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if hasattr(value, "item"):  # numpy / pandas scalars
        return _clean(value.item())
    return value


def frame_rows(df: pd.DataFrame) -> list[dict]:
    """JSON-able dicts of a frame (NaN / NA -> None)."""
    return [{k: _clean(v) for k, v in row.items()} for row in df.astype(object).to_dict(orient="records")]


# -- formats ---------------------------------------------------------------------------------------
def to_csv(df: pd.DataFrame, **_: Any) -> str:
    return df.to_csv(index=False, lineterminator="\n")


def to_json(df: pd.DataFrame, **_: Any) -> str:
    return json.dumps(frame_rows(df), indent=2, allow_nan=False) + "\n"


def to_jsonl(df: pd.DataFrame, **_: Any) -> str:
    return "".join(json.dumps(r, allow_nan=False, separators=(",", ":")) + "\n" for r in frame_rows(df))


def _num(value: Any, digits: int = 1) -> str:
    value = _clean(value)
    return "" if value is None else f"{value:.{digits}f}"


def _with_ci(row: Mapping[str, Any], metric: str, digits: int) -> str:
    med, lo, hi = (_clean(row.get(k)) for k in (metric, f"{metric}_ci95_low", f"{metric}_ci95_high"))
    if med is None:
        return ""
    if lo is None or hi is None:
        return f"{med:.{digits}f}"
    return f"{med:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"


def shape_text(row: Mapping[str, Any]) -> str:
    p, n = _clean(row.get("prompt_tokens")), _clean(row.get("max_new_tokens"))
    return " ".join(x for x in ((f"p{p}" if p is not None else ""), (f"n{n}" if n is not None else "")) if x) or "-"


MARKDOWN_HEADERS = (
    "id",
    "when (UTC)",
    "run",
    "bundle",
    "route",
    "shape",
    "testbed",
    "status",
    f"{DECODE_THROUGHPUT.label} [95% CI]",
    PROMPT_THROUGHPUT.label,
    TTFT.label,
    E2E.label,
    "commit",
)


def summary_rows(df: pd.DataFrame) -> list[list[str]]:
    """The compact rows shared by `results list` and the markdown export."""
    out = []
    for row in frame_rows(df):
        latency = E2E.name if row.get(E2E.name) is not None else LATENCY.name
        out.append(
            [
                str(row["id"]),
                (row["created_utc"] or "")[:16].replace("T", " "),
                (row["run_id"] or "")[:8],
                row["bundle"] or "",
                row["route"] or "",
                shape_text(row),
                row["testbed_id"] or "",
                row["status"],
                _with_ci(row, DECODE_THROUGHPUT.name, 1),
                _num(row.get(PROMPT_THROUGHPUT.name), 1),
                _num(row.get(TTFT.name), 2),
                _num(row.get(latency), 2),
                (row["git_commit"] or "")[:10],
            ]
        )
    return out


def to_markdown(df: pd.DataFrame, **_: Any) -> str:
    return tabulate(summary_rows(df), headers=MARKDOWN_HEADERS, tablefmt="github", disable_numparse=True) + "\n"


def latest_per_series(df: pd.DataFrame) -> pd.DataFrame:
    """The newest ok record of each bundle x route x shape; an error when the frame mixes testbeds
    (dashboards key results by testbed themselves)."""
    ok = df[df["status"] == "ok"]
    testbeds = sorted({str(t) for t in ok["testbed_id"].dropna()})
    if len(testbeds) > 1:
        raise UsageError(
            f"the selection spans {len(testbeds)} testbeds ({', '.join(testbeds[:4])})",
            "export one testbed at a time: add --testbed ID",
        )
    ok = ok.sort_values(["created_utc", "id"])
    return ok.groupby(list(SERIES_FIELDS), dropna=False, sort=False).tail(1).sort_values(list(SERIES_FIELDS) + ["id"])


def benchmark_name(row: Mapping[str, Any]) -> str:
    return f"{row['bundle']} {row['route']} {shape_text(row)}"


def _dashboard_metrics(row: Mapping[str, Any]) -> Iterable[str]:
    return [m for m in DASHBOARD_METRICS if _clean(row.get(m)) is not None]


def to_bmf(df: pd.DataFrame, **_: Any) -> str:
    out: dict[str, dict] = {}
    for row in frame_rows(latest_per_series(df)):
        measures = {}
        for m in _dashboard_metrics(row):
            entry = {"value": row[m]}
            lo, hi = _clean(row.get(f"{m}_ci95_low")), _clean(row.get(f"{m}_ci95_high"))
            if lo is not None and hi is not None:
                entry["lower_value"], entry["upper_value"] = lo, hi
            measures[m] = entry
        out[benchmark_name(row)] = measures
    return json.dumps(out, indent=2, allow_nan=False) + "\n"


def gab_entries(df: pd.DataFrame, direction: str) -> list[dict]:
    """github-action-benchmark entries of one direction ('bigger' | 'smaller')."""
    if direction not in GAB_DIRECTIONS:
        raise UsageError(
            f"--direction {direction!r} is not bigger or smaller", "pass --direction bigger or --direction smaller"
        )
    want_bigger = direction == "bigger"
    out = []
    for row in frame_rows(latest_per_series(df)):
        for m in _dashboard_metrics(row):
            if bigger_is_better(m) != want_bigger:
                continue
            entry = {"name": f"{benchmark_name(row)} {m}", "unit": unit(m), "value": row[m]}
            lo, hi = _clean(row.get(f"{m}_ci95_low")), _clean(row.get(f"{m}_ci95_high"))
            if lo is not None and hi is not None:
                entry["range"] = f"± {max(row[m] - lo, hi - row[m]):.6g}"
            extra = [f"testbed: {row['testbed_id']}", f"run: {row['run_id']}", f"commit: {row['git_commit']}"]
            if _clean(row.get(f"{m}_n")) is not None:
                extra.append(f"n: {row[f'{m}_n']}")
            entry["extra"] = "\n".join(extra)
            out.append(entry)
    return out


def to_gab(df: pd.DataFrame, direction: str | None = None, **_: Any) -> str:
    if direction is None:
        raise UsageError(
            "--format gab writes one direction per file",
            "pass --format gab-bigger or --format gab-smaller (or --direction bigger|smaller)",
        )
    return json.dumps(gab_entries(df, direction), indent=2, allow_nan=False) + "\n"


EXPORTERS: dict[str, Callable[..., str]] = {
    "csv": to_csv,
    "json": to_json,
    "jsonl": to_jsonl,
    "markdown": to_markdown,
    "bmf": to_bmf,
    "gab-bigger": lambda df, **_: to_gab(df, direction="bigger"),
    "gab-smaller": lambda df, **_: to_gab(df, direction="smaller"),
    "gab": to_gab,
}


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


def _with_text_times(df: pd.DataFrame) -> pd.DataFrame:
    if not pd.api.types.is_datetime64_any_dtype(df["created_utc"]):
        return df
    out = df.copy()
    out["created_utc"] = [None if pd.isna(v) else utc_text(v.to_pydatetime()) for v in df["created_utc"]]
    return out


def selects_nothing(fmt: str, text: str) -> bool:
    """Whether an export's text holds no benchmark (an empty array / object / table)."""
    if fmt in ("bmf", "gab", "gab-bigger", "gab-smaller", "json"):
        return not json.loads(text)
    return not text.strip() or (fmt == "csv" and len(text.strip().splitlines()) < 2)


def export(df: pd.DataFrame, fmt: str, **options: Any) -> str:
    if fmt not in EXPORTERS:
        raise UsageError(
            f"--format {fmt!r} is not one of {', '.join(EXPORTERS)}", f"pass --format {' / '.join(EXPORTERS)}"
        )
    return EXPORTERS[fmt](_with_text_times(df), **options)
