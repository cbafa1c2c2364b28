"""The result table of a run: its columns once, for the screen and for the run's exports.

Each column has the header a person reads, the name an export writes (a metric's own name, as the
store and `results export` use), its value in a cell record and a rank: on a terminal narrower
than the table, columns go from the highest rank down until it fits, and a line says which. A
metric's column shows its median with the spread of its iterations beside it (σ as a percentage of
the mean); exports carry the spread as ``<metric>_sd``. Iterations read the same on screen (``5x5``:
invocations x iterations each) and in exports (``invocations``, ``iterations_per_invocation``,
``iterations`` in all).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from winml_perf.model import metrics as M
from winml_perf.model.equivalence_view import COLUMNS as EQUIVALENCE_COLUMNS
from winml_perf.model.equivalence_view import VERDICT_COLUMN, EquivalenceView, view_of
from winml_perf.model.record import CellRecord
from winml_perf.model.route import shown_label
from winml_perf.publish.formats import human
from winml_perf.support.human_numbers import fixed
from winml_perf.support.text_table import UNLIMITED as UNLIMITED  # re-exported
from winml_perf.support.text_table import fit
from winml_perf.support.text_table import terminal_width as terminal_width  # re-exported
from winml_perf.support.text_table import wrapped as wrapped  # re-exported


@dataclass(frozen=True)
class Column:
    head: str  # on screen and in markdown
    name: str  # in csv: a metric's name where the column is one
    value: Callable[[CellRecord], Any]
    rank: int = 0  # 0: always shown; higher ranks leave a narrow terminal first
    spread: str | None = None  # the metric whose σ is shown beside the value (and exported as _sd)


def _metric(c: CellRecord, name: str) -> Any:
    return c.summary.get(name)


def _sd(c: CellRecord, name: str) -> float | None:
    m = c.metrics.get(name)
    return None if m is None else m.stdev


def _cv(c: CellRecord, name: str) -> float | None:
    m = c.metrics.get(name)
    return None if m is None else m.cv_pct


def per_invocation(c: CellRecord) -> int | None:
    """Iterations each invocation ran, when they all ran as many (None when uneven or unknown)."""
    n, k = c.summary.iterations, c.summary.invocations or 1
    return None if n is None or n % k else n // k


def iterations_text(c: CellRecord) -> str:
    """'25' for one process, '5x5' for 5 invocations of 5 iterations, '23 in 5 inv.' when uneven."""
    n, k = c.summary.iterations, c.summary.invocations or 1
    if k <= 1 or n is None:
        return str(n)
    each = per_invocation(c)
    return f"{k}x{each}" if each is not None else f"{n} in {k} inv."


def covers(c: CellRecord) -> str:
    """What a cell's CI covers: '5 proc' (over invocations) or 'in-proc' (one process)."""
    return c.summary.primary_ci95_covers or "in-proc"


def _route(c: CellRecord) -> str:
    """The route's label as every listing shows it (model/route.shown_label): marked ``(compiled)``
    when it ran compiled EPContext models, ``(emulated)`` when an EP of it ran on an emulator (never
    to be read as NPU speed)."""
    return shown_label(c.route)


def _metric_column(metric: M.Metric, rank: int, *, spread: bool = True) -> Column:
    return Column(metric.label, metric.name, lambda c: _metric(c, metric.name), rank, metric.name if spread else None)


def _headline_column(head: str, name: str, rank: int) -> Column:
    return Column(head, name, lambda c: _metric(c, name), rank)


def _rss_mib(c: CellRecord) -> float | None:
    rss = c.memory.peak_rss_bytes
    return None if rss is None else rss / 2**20


def _model_mib(c: CellRecord) -> float | None:
    """The peak RSS above the process's own before the model loaded (measure/memory.py)."""
    rss = c.memory.model_rss_bytes
    return None if rss is None else rss / 2**20


def equivalence_of(c: CellRecord) -> EquivalenceView:
    """The cell's route equivalence verdict and key figures ('not checked' without a check)."""
    e = c.route.equivalence
    return view_of(e.to_dict() if e is not None else None)


#: The route's equivalence verdict beside its speed (on screen when a cell of the run was judged).
EQUIVALENCE_COLUMN = Column("equivalence", VERDICT_COLUMN, lambda c: equivalence_of(c).verdict, 2)


def with_equivalence(columns: list[Column], cells: Sequence[CellRecord]) -> list[Column]:
    """``columns`` with the equivalence verdict after the route when any cell's route was judged."""
    if not any(c.route.equivalence is not None for c in cells):
        return columns
    return [columns[0], EQUIVALENCE_COLUMN, *columns[1:]]


CI_NAME = "ci95_half_width_pct"  # the export's name: the primary metric's, named in primary_ci_name


def token_columns() -> list[Column]:
    itl = [_headline_column("ITL p50 ms", f"{M.ITL.name}_p50", 6)] + [
        _headline_column(q, f"{M.ITL.name}_{q}", 7) for q in ("p90", "p99")
    ]
    return [
        Column("route", "route", _route),
        Column("prompt", "prompt_tokens", lambda c: c.shape.prompt_tokens),
        Column("new", "max_new_tokens", lambda c: c.shape.max_new_tokens),
        _metric_column(M.TTFT, 2),
        _metric_column(M.PROMPT_THROUGHPUT, 4),
        _metric_column(M.DECODE_THROUGHPUT, 0),
        *itl,
        _metric_column(M.E2E, 4),
        Column("iters", "iterations", lambda c: c.summary.iterations, 3),
        Column("CI95", CI_NAME, lambda c: c.summary.primary_ci95_half_width_pct, 1),
        Column("model MiB", "model_rss_mib", _model_mib, 5),
        Column("peak RSS MiB", "peak_rss_mib", _rss_mib, 8),
    ]


def latency_columns() -> list[Column]:
    return [
        Column("route", "route", _route),
        _metric_column(M.LATENCY, 0),
        Column("p90 ms", f"{M.LATENCY.name}_p90", lambda c: _pct(c, "p90"), 5),
        Column("p99 ms", f"{M.LATENCY.name}_p99", lambda c: _pct(c, "p99"), 5),
        _metric_column(M.INFERENCE_RATE, 3, spread=False),
        Column("iters", "iterations", lambda c: c.summary.iterations, 2),
        Column("CI95", CI_NAME, lambda c: c.summary.primary_ci95_half_width_pct, 1),
        Column(M.MODEL_LOAD.label, M.MODEL_LOAD.name, lambda c: _load(c), 4),
    ]


def _pct(c: CellRecord, q: str) -> float | None:
    m = c.metrics.get(M.LATENCY.name)
    return None if m is None else getattr(m, q)


def _load(c: CellRecord) -> float | None:
    from winml_perf.model.spec import finite_or_none

    return finite_or_none(getattr(c.load, M.MODEL_LOAD.name))


def primary_ci_name(cells: Sequence[CellRecord]) -> str:
    """The CI column's export name: '<primary metric>_ci95_half_width_pct'."""
    primary = next((c.summary.primary_metric for c in cells if c.summary.primary_metric), None)
    return f"{primary}_{CI_NAME}" if primary else CI_NAME


# -- exports ---------------------------------------------------------------------------------------
def export_rows(columns: Sequence[Column], cells: Sequence[CellRecord]) -> tuple[list[str], list[list[Any]]]:
    """Headers (metric names) and raw rows: each spread column followed by ``<metric>_sd``, the
    iterations by how many invocations ran them and how many each; then the route's equivalence
    verdict and key figures (model/equivalence_view.COLUMNS, as the store names them)."""
    columns = [col for col in columns if col.name != VERDICT_COLUMN]
    heads: list[str] = []
    for col in columns:
        if col.name == "iterations":
            heads += ["invocations", "iterations_per_invocation"]
        heads.append(primary_ci_name(cells) if col.name == CI_NAME else col.name)
        if col.spread:
            heads.append(f"{col.spread}_sd")
    rows = []
    for c in cells:
        row: list[Any] = []
        for col in columns:
            if col.name == "iterations":
                row += [c.summary.invocations or 1, per_invocation(c)]
            row.append(col.value(c))
            if col.spread:
                row.append(_sd(c, col.spread))
        rows.append(row + list(equivalence_of(c).columns().values()))
    return heads + list(EQUIVALENCE_COLUMNS), rows


# -- the screen ------------------------------------------------------------------------------------
def shown(col: Column, c: CellRecord, mixed_ci: bool) -> str:
    """One cell of the screen table: rounded, '-' where nothing was measured, σ beside a metric."""
    if col.name == "iterations":
        return iterations_text(c)
    if col.name == VERDICT_COLUMN:
        return equivalence_of(c).label()  # 'NOT equivalent' in capitals, 'not checked' without a check
    v = col.value(c)
    if col.name == CI_NAME:
        return "-" if v is None else f"±{fixed(v)}%" + (f" {covers(c)}" if mixed_ci else "")
    text = "-" if v is None else human(v)
    cv = _cv(c, col.spread) if col.spread and v is not None else None
    return text if cv is None else f"{text} σ{fixed(cv)}%"


def ci_head(cells: Sequence[CellRecord]) -> str:
    """'decode CI95 (5 proc)', 'decode CI95 in-proc'; without the coverage when rows differ."""
    primary = next((c.summary.primary_metric for c in cells if c.summary.primary_metric), None)
    metric = M.get(primary) if primary else None
    word = f"{metric.word} " if metric else ""
    kinds = {covers(c) for c in cells}
    if len(kinds) != 1:
        return f"{word}CI95"
    kind = kinds.pop()
    return f"{word}CI95 in-proc" if kind == "in-proc" else f"{word}CI95 ({kind})"


def screen_rows(columns: Sequence[Column], cells: Sequence[CellRecord]) -> tuple[list[str], list[list[str]]]:
    """Headers and rows as a person reads them (the screen, markdown)."""
    ci = ci_head(cells)
    heads = [ci if col.name == CI_NAME else col.head for col in columns]
    mixed = "(" not in ci and "in-proc" not in ci
    return heads, [[shown(col, c, mixed) for col in columns] for c in cells]


def fitted_table(columns: Sequence[Column], cells: Sequence[CellRecord], width: int) -> tuple[str, list[str]]:
    """The table within ``width`` columns, and the headers of the columns left out to fit it, by the
    one table writer (support/text_table.py): the headers go on two lines first, then columns leave,
    highest rank first (rank 0 always stays)."""
    heads, rows = screen_rows(columns, cells)
    ranked = sorted((i for i, col in enumerate(columns) if col.rank), key=lambda i: (-columns[i].rank, -i))
    return fit(heads, rows, width, [heads[i] for i in ranked], pipes=True)
