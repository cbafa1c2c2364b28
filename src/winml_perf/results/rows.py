"""Cell record (model/record.py ``CellRecord``) -> the store's rows. Pure, no I/O.

The record's layout belongs to the measurement engine (schemas/record.schema.json); this module
is the one place that knows where each stored column comes from. The columns are read from the
typed record; the JSON it stores and the sample rows that give its raw samples back are the
record's JSON (``CellRecord.to_dict()``, or the document a record file held: ``json_record_rows``),
the store's edge. Per-iteration metrics in the samples table are derived from the raw samples by
the runner's own derivation (model/sample.py IterationSample, model/metrics.py), so compare and
the dashboard test the same numbers the record summarises.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import posixpath
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeGuard

from winml_perf.model.equivalence_view import EquivalenceView, view_of
from winml_perf.model.metrics import CELL, METRICS
from winml_perf.model.record import CellRecord
from winml_perf.model.route import StageRoute, shown_label
from winml_perf.model.sample import IterationSample
from winml_perf.support.errors import StoreError
from winml_perf.support.finite_numbers import finite_number as finite

SUMMARY_FIELDS = ("n", "median", "mean", "stdev", "cv_pct", "min", "max", "p90", "p95", "p99", "ci95_low", "ci95_high")


# -- locating values in a record ------------------------------------------------------------------
def _absolute_bundle(bundle: str | None, cwd: Any) -> str | None:
    """The bundle's path as a store keeps it: absolute, against the folder the run was measured in
    (``environment.cwd``), so ``--bundle`` finds it by any spelling from anywhere; as written when
    the record does not say where it ran."""
    if not bundle or not isinstance(cwd, str) or not os.path.isabs(cwd) or os.path.isabs(bundle):
        return bundle
    return os.path.normpath(os.path.join(cwd, bundle.replace("\\", "/")))


def _field(record: CellRecord, path: str) -> Any:
    """The typed value at ``path`` (a metric's ``record_path``: section.field), None when absent."""
    node: Any = record
    for part in path.split("."):
        node = getattr(node, part, None)
        if node is None:
            return None
    return node


def _given(value: str | None) -> str | None:
    """``value``, None for '' (a record field left empty is not given)."""
    return value if value else None


def record_time(record: CellRecord) -> str | None:
    """When the record was made: its end, else its start, else its environment's time."""
    return _given(record.finished_utc) or _given(record.started_utc) or _given(record.environment.timestamp_utc)


def _str(value: Any) -> str | None:
    return None if value is None else str(value)


def _int(value: Any) -> int | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def normalize_utc(value: Any) -> str:
    """An ISO-8601 timestamp -> 'YYYY-MM-DDTHH:MM:SS.ffffffZ' in UTC (sortable as text)."""
    if value is None or value == "":
        raise StoreError(
            "record has no timestamp (finished_utc / started_utc / environment.timestamp_utc)",
            "write records made by winml_perf.record.build",
        )
    text = str(value).strip()
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    try:
        dt = datetime.fromisoformat(text)
    except ValueError:
        raise StoreError(f"timestamp {value!r} is not ISO-8601", "e.g. 2025-01-31T02:00:00Z") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


#: A record's bundle without a content digest (stored before bundle ids), as labels and filters say it.
NO_BUNDLE_ID = "no id"


def bundle_name(path: str | None) -> str | None:
    """A bundle's display name: the last component of its path."""
    if not path:
        return None
    return path.rstrip("/\\").replace("\\", "/").rsplit("/", 1)[-1] or path


def bundle_where(path: str | None) -> str | None:
    """A bundle's path as its series knows it (issue 35): as ``winml perf`` was given it, with
    ``./``, ``x/..``, a trailing slash and backslashes normalised away (never resolved: a record
    stored on another machine names a folder of that machine)."""
    if not path:
        return None
    text = path.replace("\\", "/")
    return posixpath.normpath(text)


def record_series_label(record: CellRecord) -> str | None:
    """The user's ``--series NAME`` of a record, when it has one."""
    return record.series_label or None


def series_where(row: Mapping[str, Any]) -> str | None:
    """Where a stored record's series keeps its bundle apart from others of its name: None for a
    ``--series`` label (the label is the series), else the bundle's path (``bundle_where``). Takes a
    record row (``records`` columns: bundle_path, series_label) or a frame row."""
    if row.get("series_label"):
        return None
    path = row.get("bundle_path")
    return bundle_where(str(path)) if isinstance(path, str) and path else None


def route_label(record: CellRecord) -> str | None:
    """The record's route as listings show it (model/route.shown_label: ``(compiled)``,
    ``(emulated)`` added to its label)."""
    return shown_label(record.route) if record.route.label else None


def equivalence_view(record: CellRecord) -> EquivalenceView:
    """The verdict and key figures of the record's route equivalence (issue 24)."""
    e = record.route.equivalence
    return view_of(None if e is None else e.to_dict())


# -- samples ---------------------------------------------------------------------------------------
def derive_sample_metrics(sample: Mapping[str, Any]) -> dict[str, float | None]:
    """The stored per-iteration metrics of one raw sample (IterationSample.to_dict())."""
    values = IterationSample.from_dict(sample).values
    return {m.name: finite(values[m.name]) for m in METRICS if m.stored}


def _sample_rows(
    samples: Iterable[Mapping[str, Any]], phase: str, start_seq: int
) -> tuple[list[dict[str, Any]], list[list[float]]]:
    """The rows of one phase's samples, and each row's decode steps as the floats it stores."""
    rows, steps = [], []
    for i, s in enumerate(samples):
        floats = [float(x) for x in (s.get("decode_step_ms") or ())]
        rows.append(
            {
                "seq": start_seq + i,
                "phase": phase,
                "round_index": _int(s.get("round_index")) if _int(s.get("round_index")) is not None else 0,
                "invocation": _int(s.get("invocation")),
                "prompt_tokens": _int(s.get("prompt_tokens")),
                "new_tokens": _int(s.get("new_tokens")),
                **derive_sample_metrics(s),
                "decode_step_ms": json.dumps(floats),
            }
        )
        steps.append(floats)
    return rows, steps


def invocation_medians(sample_rows: Iterable[Mapping[str, Any]], names: Sequence[str]) -> dict[str, list[float]]:
    """metric -> the median of each invocation's values, in invocation order, from measured
    sample rows (of one record) that carry an ``invocation``; metrics without values are left out.
    The one definition of a record's per-invocation estimates (the gate's and the dashboard's)."""
    groups: dict[str, dict[int, list[float]]] = {}
    for row in sample_rows:
        if row.get("invocation") is None:
            continue
        for name in names:
            value = row.get(name)
            if value is not None:
                groups.setdefault(name, {}).setdefault(int(row["invocation"]), []).append(float(value))
    return {name: [statistics.median(by[k]) for k in sorted(by)] for name, by in groups.items()}


def invocations_text(values: Sequence[float] | None) -> str | None:
    """The stored form of a metric row's per-invocation medians (JSON list; None: no invocations)."""
    return None if not values else json.dumps([float(v) for v in values], separators=(",", ":"))


def _metric_rows(record: CellRecord, measured: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    per_invocation = invocation_medians(measured, [m.name for m in METRICS if m.stored])
    rows = []
    for name, summary in sorted(record.metrics.items()):
        row = {"name": name, **{k: finite(getattr(summary, k)) for k in SUMMARY_FIELDS}}
        row["n"] = _int(summary.n) or 0
        row["invocations"] = invocations_text(per_invocation.get(name))
        rows.append(row)
    for m in METRICS:
        value = finite(_field(record, m.record_path)) if m.source == CELL and m.record_path is not None else None
        if value is not None:
            rows.append(
                {
                    "name": m.name,
                    "n": 1,
                    **{k: value for k in SUMMARY_FIELDS if k not in ("n", "stdev", "cv_pct", "ci95_low", "ci95_high")},
                    "stdev": None,
                    "cv_pct": None,
                    "ci95_low": None,
                    "ci95_high": None,
                    "invocations": None,
                }
            )
    return rows


# -- samples stored once -------------------------------------------------------------------------
#: The keys of a raw sample (IterationSample.to_dict()) that the samples table gives back exactly.
SAMPLE_KEYS = (
    "round_index",
    "latency_ms",
    "prompt_tokens",
    "new_tokens",
    "prompt_ms",
    "ttft_ms",
    "decode_step_ms",
    "e2e_ms",
)


def _restored_sample(row: Mapping[str, Any], steps: list[float]) -> dict[str, Any]:
    """The raw sample a stored row gives back, its decode steps already parsed."""
    sample = {k: row.get(k) for k in SAMPLE_KEYS if k != "decode_step_ms"}
    if row.get("invocation") is not None:  # samples of records before invocations have no such key
        sample["invocation"] = row["invocation"]
    sample["decode_step_ms"] = steps
    return sample


def restore_samples(rows: Iterable[Mapping[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """The record's ``samples`` ({warmup, iterations}) rebuilt from its sample rows (any order)."""
    out: dict[str, list[dict[str, Any]]] = {"warmup": [], "iterations": []}
    for row in sorted(rows, key=lambda r: r["seq"]):
        steps = json.loads(row["decode_step_ms"]) if row.get("decode_step_ms") else []
        out["iterations" if row["phase"] == "measured" else "warmup"].append(_restored_sample(row, steps))
    return out


def _has_both_phases(samples: Any) -> TypeGuard[Mapping[str, Any]]:
    return isinstance(samples, Mapping) and set(samples) == {"warmup", "iterations"}


def without_restorable_samples(record: Mapping[str, Any], sample_rows: list[dict[str, Any]]) -> Mapping[str, Any]:
    """The record without ``samples`` when its sample rows give them back exactly (then the raw
    samples are stored once, in the samples table); else the record unchanged (lossless first)."""
    samples = record.get("samples")
    if not _has_both_phases(samples):
        return record
    if restore_samples(sample_rows) != {"warmup": list(samples["warmup"]), "iterations": list(samples["iterations"])}:
        return record
    return {k: v for k, v in record.items() if k != "samples"}


def _restorable(
    samples: Sequence[Mapping[str, Any]], rows: Sequence[Mapping[str, Any]], steps: Sequence[list[float]]
) -> bool:
    """Whether freshly built rows give ``samples`` back exactly, as restore_samples would read them:
    finite floats come back from their JSON text unchanged (repr round-trips), so only a list
    with NaN or an infinity is parsed again."""
    for sample, row, floats in zip(samples, rows, steps):
        back = floats if all(map(math.isfinite, floats)) else json.loads(row["decode_step_ms"])
        if _restored_sample(row, back) != sample:
            return False
    return True


# -- series identity ------------------------------------------------------------------------------
#: Session options of a plain ONNX model that change what is measured (session/onnx_options.py).
PLAIN_SESSION_KEYS = (
    "ep",
    "device",
    "shapes",
    "io_binding",
    "intra_op_threads",
    "inter_op_threads",
    "graph_optimization_level",
    "session_config",
)


def series_identity(record: CellRecord) -> dict[str, Any]:
    """Everything that changes what a cell measures: testbed, bundle (the user's ``--series`` label,
    else the bundle's path: two bundles of one folder name stay apart, a rebuild in the same folder
    stays the series), runtime, route as shown (compiled, emulated) and shape; for
    plain ONNX models the input shapes, IO binding and session options (and which inputs came from
    files); for bundles each stage's EP and EP options after routing."""
    label = record_series_label(record)
    ident: dict[str, Any] = {
        "testbed": _str(_given(record.environment.testbed_id)),
        # what the user tracks (issue 35): the --series label, else the bundle's path; never its
        # content digest, which is an event on the series (a rebuilt model in the same folder)
        "bundle": label if label else bundle_name(_str(record.bundle)),
        "runtime": _str(record.runtime),
        "route": route_label(record),
        "prompt_tokens": _int(record.shape.prompt_tokens),
        "max_new_tokens": _int(record.shape.max_new_tokens),
    }
    if record.serving is not None:  # `winml serve`: each load point (and its lengths) is a series of its own
        load = record.serving.load.to_dict()
        ident["load"] = {k: load.get(k) for k in ("key", "requests", "prompt_tokens", "max_new_tokens", "seed")}
    if label:
        ident["labelled"] = True
    else:
        ident["bundle_path"] = bundle_where(_str(record.bundle))
    options = record.policy.session_options
    if isinstance(options, Mapping) and record.runtime == "winml":
        ident["session"] = {
            k: options.get(k) for k in PLAIN_SESSION_KEYS if options.get(k) not in (None, {}, [], False)
        }
        if options.get("inputs"):
            ident["session"]["inputs"] = sorted(options["inputs"])
    eps = [
        # options as the JSON has them: a planned stage's always (model/route.py StageRoute.to_dict),
        # another's where a record file gave some
        {"stage": st.stage, "ep": st.ep_after, "options": _options_after(st)}
        for st in record.route.stages
        if st.ep_after or st.provider_options_after
    ]
    if eps:
        ident["stages"] = eps
    return ident


def _options_after(stage: StageRoute) -> list[dict[str, Any]] | None:
    return list(stage.provider_options_after) if stage.planned or stage.provider_options_after else None


def series_key(record: CellRecord) -> str:
    """A short stable hash of ``series_identity``: the stored series column."""
    text = json.dumps(series_identity(record), sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:20]


@dataclass(frozen=True)
class RecordRows:
    """What one cell record becomes in the store."""

    record: dict[str, Any]
    metrics: list[dict[str, Any]]
    samples: list[dict[str, Any]]


#: The samples of a record read for its columns only (the rows take the raw samples from its JSON).
_NO_SAMPLES: dict[str, list[Any]] = {"warmup": [], "iterations": []}


def typed_record(doc: Mapping[str, Any]) -> CellRecord:
    """A record's JSON (a file's, or as stored) read for the columns: every section typed but the
    raw samples, which the rows take from the JSON itself. ``doc`` is read, never changed."""
    return CellRecord.from_dict({**doc, "samples": _NO_SAMPLES}, owned=True)


def json_record_rows(doc: Mapping[str, Any]) -> RecordRows:
    """The rows of a cell record's JSON as a file holds it (already validated against
    record.schema.json), stored as it is: the store's JSON edge (``winml results import``)."""
    return record_rows(typed_record(doc), doc)


def record_rows(record: CellRecord, doc: Mapping[str, Any] | None = None) -> RecordRows:
    """The rows of one cell record (its JSON already validated against record.schema.json).
    ``doc``: the JSON it is stored as, ``record.to_dict()`` unless given; the JSON and the raw
    samples' rows are taken from it, every other column from the typed record."""
    doc = record.to_dict() if doc is None else doc
    samples = doc.get("samples") or {}
    measured, measured_steps = _sample_rows(samples.get("iterations") or (), "measured", 0)
    warmup, warmup_steps = _sample_rows(samples.get("warmup") or (), "warmup", len(measured))
    once = (
        _has_both_phases(samples)
        and _restorable(list(samples["iterations"]), measured, measured_steps)
        and _restorable(list(samples["warmup"]), warmup, warmup_steps)
    )
    stored = {k: v for k, v in doc.items() if k != "samples"} if once else doc
    canonical = json.dumps(stored, sort_keys=True, separators=(",", ":"), allow_nan=False)
    env = record.environment
    bundle = _str(record.bundle)
    row = {
        "record_uid": str(record.cell_id),
        "schema_version": int(record.schema_version),
        "run_id": _str(record.run_id),
        "created_utc": normalize_utc(record_time(record)),
        "testbed_id": _given(env.testbed_id),
        "hostname": _given(env.hostname),
        "bundle": record_series_label(record) or bundle_name(bundle),
        "bundle_path": _absolute_bundle(bundle, env.cwd),
        "bundle_id": _str(record.bundle_id),
        "series_label": record_series_label(record),
        "route": route_label(record),
        "runtime": _str(record.runtime),
        "prompt_tokens": _int(record.shape.prompt_tokens),
        "max_new_tokens": _int(record.shape.max_new_tokens),
        "status": _str(record.status) or "ok",
        "git_commit": _given(env.git_commit),
        "winml_perf_version": env.version("winml-perf"),
        "onnxruntime_version": env.version("onnxruntime"),
        "genai_version": env.version("onnxruntime-genai"),
        "n_samples": len(measured),
        "series_key": series_key(record),
        **equivalence_view(record).columns(),  # the verdict and key figures of route.equivalence (issue 24)
        "record_json": canonical,
    }
    return RecordRows(record=row, metrics=_metric_rows(record, measured), samples=measured + warmup)
