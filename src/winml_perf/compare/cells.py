"""What a comparison reads of a cell record, built once: its identity, its group and its measured
samples. Built from a run record in memory (``cells_of_run``: the closing summary of `winml perf`)
or from the rows a store query returns (``stored_cell``: `winml compare`); both read the samples
as the store keeps them (results/rows.py), so the two give the same numbers.

Comparisons never open a store: they take these cells.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from winml_perf.model.equivalence_view import EquivalenceView, view_of_row
from winml_perf.model.metrics import METRICS, get
from winml_perf.model.record import CellRecord
from winml_perf.results.rows import RecordRows, json_record_rows, record_rows, series_where
from winml_perf.support.errors import UsageError

if TYPE_CHECKING:
    from winml_perf.results.store import Store

#: Metrics compared by default, in table order, when both sides have them.
DEFAULT_METRICS = tuple(m.name for m in METRICS if m.compared)
#: Metrics --metric may name: every per-iteration metric the samples table keeps.
COMPARABLE_METRICS = tuple(m.name for m in METRICS if m.stored)
GROUP_FIELDS = ("testbed_id", "bundle", "route", "prompt_tokens", "max_new_tokens")
#: A group key is GROUP_FIELDS plus the series key (options that change what is measured).
KEY_FIELDS = GROUP_FIELDS + ("series_key",)
#: A group key: the values of KEY_FIELDS, each a Cell field.
Key = tuple[str | int | None, ...]


@dataclass(frozen=True)
class MeasuredSample:
    """One measured iteration: the round (or invocation round) it ran in, its metric values and the
    invocation (fresh process) of its cell it ran in (None in records made before invocations)."""

    round_index: int
    values: Mapping[str, float]  # comparable metric -> value; a metric without a value is absent
    invocation: int | None = None


@dataclass(frozen=True)
class Cell:
    """One cell record as comparisons read it."""

    uid: str  # the record's cell id
    record_id: int | None  # its store id (None in memory): orders cells created at the same time
    run_id: str | None
    created_utc: str
    testbed_id: str | None
    bundle: str | None
    route: str | None
    prompt_tokens: int | None
    max_new_tokens: int | None
    series_key: str | None
    status: str
    invocations: int | None  # invocations the cell ran (1 for records made before them); None: not read
    samples: tuple[MeasuredSample, ...]
    equivalence: EquivalenceView = field(default_factory=EquivalenceView)  # the route's verdict (issue 24)
    bundle_id: str | None = None  # the bundle's content digest (record/bundle_identity.py); None before ids
    bundle_where: str | None = None  # its bundle's path, None for a --series label (results/rows.series_where)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def key(self) -> Key:
        """The group it is matched on: testbed x bundle x route x shape x series key."""
        return tuple(getattr(self, f) for f in KEY_FIELDS)


def measured_sample(row: Mapping[str, Any]) -> MeasuredSample:
    """A measured sample row (the store's samples table) as a MeasuredSample."""
    values = {m: float(row[m]) for m in COMPARABLE_METRICS if row.get(m) is not None}
    invocation = row.get("invocation")
    return MeasuredSample(int(row["round_index"]), values, None if invocation is None else int(invocation))


def stored_cell(row: Mapping[str, Any], samples: Iterable[Mapping[str, Any]], invocations: int | None) -> Cell:
    """A cell from a store's record row, its measured sample rows and its number of invocations
    (None when the comparison does not need it)."""
    return Cell(
        uid=str(row["record_uid"]),
        record_id=row.get("id"),
        run_id=row.get("run_id"),
        created_utc=str(row["created_utc"]),
        testbed_id=row.get("testbed_id"),
        bundle=row.get("bundle"),
        route=row.get("route"),
        prompt_tokens=row.get("prompt_tokens"),
        max_new_tokens=row.get("max_new_tokens"),
        series_key=row.get("series_key"),
        bundle_id=row.get("bundle_id"),
        bundle_where=series_where(row),
        status=str(row.get("status") or "ok"),
        invocations=invocations,
        samples=tuple(measured_sample(s) for s in samples),
        equivalence=view_of_row(row),
    )


def stored_cells(store: Store, rows: Sequence[Mapping[str, Any]], *, invocations: bool = False) -> list[Cell]:
    """Cells of record rows (store.records), with the measured samples of the ok ones; with
    ``invocations``, how many invocations each ok one ran (from its stored record)."""
    ok_ids = [r["id"] for r in rows if r["status"] == "ok"]
    samples: dict[int, list[dict[str, Any]]] = {}
    for s in store.samples(ok_ids, phase="measured"):
        samples.setdefault(s["record_id"], []).append(s)
    counts = store.invocation_counts(ok_ids) if invocations else {}
    return [stored_cell(r, samples.get(r["id"], []), counts.get(r["id"])) for r in rows]


def invocations_of(record: Mapping[str, Any]) -> int:
    """How many invocations a cell record ran (1 for records made before invocations existed)."""
    return len(record.get("invocations") or ()) or 1


def cell_of_record(record: Mapping[str, Any]) -> Cell:
    """A cell from one cell record's JSON (CellRecord.to_dict()), with the rows the store would write."""
    return _cell_of_rows(json_record_rows(record), invocations_of(record))


def cell_of(record: CellRecord) -> Cell:
    """A cell from one cell record, with the rows the store would write."""
    return _cell_of_rows(record_rows(record), len(record.invocations) or 1)


def _cell_of_rows(rows: RecordRows, invocations: int) -> Cell:
    measured = [s for s in rows.samples if s["phase"] == "measured"]
    return stored_cell(rows.record, measured, invocations)


def cells_of_run(run: Mapping[str, Any]) -> list[Cell]:
    """The cells of a run record (RunRecord.to_dict()), oldest first as a store lists them."""
    cells = [cell_of_record(c) for c in run.get("cells") or ()]
    return sorted(cells, key=lambda c: c.created_utc)  # stable: cells of one time keep the run's order


# -- metrics both sides have -----------------------------------------------------------------------
def metrics_present(samples: Iterable[MeasuredSample], wanted: Sequence[str]) -> list[str]:
    """The metrics of ``wanted`` that at least one sample has, in ``wanted``'s order."""
    samples = list(samples)
    return [m for m in wanted if any(m in s.values for s in samples)]


def choose_metrics(
    metrics: Sequence[str] | None, base: Sequence[MeasuredSample], cand: Sequence[MeasuredSample]
) -> list[str]:
    """The metrics to compare: those asked for (or the default ones) that both sides have; a token
    session's latency is its end-to-end time, so by default its token metrics alone."""
    if metrics:
        unknown = [m for m in metrics if m not in COMPARABLE_METRICS]
        if unknown:
            raise UsageError(
                f"--metric {unknown[0]!r} is not a per-iteration metric", f"use one of {', '.join(COMPARABLE_METRICS)}"
            )
        return [m for m in metrics if m in metrics_present(base, metrics) and m in metrics_present(cand, metrics)]
    both = [m for m in metrics_present(base, DEFAULT_METRICS) if m in metrics_present(cand, DEFAULT_METRICS)]
    tokens = [m for m in both if (meta := get(m)) is not None and meta.token]
    return tokens or both
