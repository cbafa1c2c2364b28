"""Human-readable rendering of a run record (the typed RunRecord, read by attribute): tables,
routes, warnings, and the run's rows in every ``--format`` (formats.py)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from tabulate import tabulate

from winml_perf.ep.effective import options_lines
from winml_perf.model import metrics as M
from winml_perf.model.record import CellRecord, RunRecord
from winml_perf.model.record_sections import Headline, RecordWarning
from winml_perf.model.route import StagePlacement
from winml_perf.model.runtime import runtime_named
from winml_perf.model.spec import finite_or_none
from winml_perf.publish.formats import human, json_text, table_text


def _f(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


EMULATED_MARK = " (emulated)"


def _route_label(c: CellRecord) -> str:
    """The route's label, marked when an EP of it ran on an emulator (never to be read as NPU speed)."""
    return c.route.label + (EMULATED_MARK if c.route.emulated else "")


def _load_ms(c: CellRecord, phase: str) -> float | None:
    """One load phase of the cell in ms, None when not measured (as the record writes it)."""
    value: float | None = getattr(c.load, phase)
    return finite_or_none(value)


def _token_row(c: CellRecord) -> list[Any]:
    s = c.summary
    rss = c.memory.get(M.PEAK_RSS.name)
    return [
        _route_label(c),
        c.shape.prompt_tokens,
        c.shape.max_new_tokens,
        s.get(M.TTFT.name),
        s.get(M.PROMPT_THROUGHPUT.name),
        s.get(M.DECODE_THROUGHPUT.name),
        *(s.get(f"{M.ITL.name}_{q}") for q in ("p50", "p90", "p99")),
        s.get(M.E2E.name),
        s.iterations,
        s.primary_ci95_half_width_pct,
        None if rss is None else rss / 2**20,
    ]


def _covers(c: CellRecord) -> str:
    """What a cell's CI covers: '5 proc' (over invocations) or 'in-proc' (one process)."""
    return c.summary.primary_ci95_covers or "in-proc"


def _ci_head(cells: Sequence[CellRecord]) -> str:
    """'CI95 (5 proc)' / 'CI95 in-proc' when every row covers the same; else 'CI95' and each row says."""
    kinds = {_covers(c) for c in cells}
    if len(kinds) != 1:
        return "CI95"
    kind = kinds.pop()
    return "CI95 in-proc" if kind == "in-proc" else f"CI95 ({kind})"


def _iters(s: Headline) -> str:
    """'25' for one process, '5x5' for 5 invocations of 5 iterations (total shown when uneven)."""
    n, k = s.iterations, s.invocations or 1
    if k <= 1 or n is None:
        return str(n)
    return f"{k}x{n // k}" if n % k == 0 else f"{n} in {k} inv."


def _latency_row(c: CellRecord) -> list[Any]:
    s, m = c.summary, c.metrics.get(M.LATENCY.name)
    return [
        _route_label(c),
        s.get(M.LATENCY.name),
        None if m is None else m.p90,
        None if m is None else m.p99,
        s.get(M.INFERENCE_RATE.name),
        s.iterations,
        s.primary_ci95_half_width_pct,
        _load_ms(c, M.MODEL_LOAD.name),
    ]


TOKEN_HEAD = [
    "route",
    "prompt",
    "new",
    M.TTFT.label,
    M.PROMPT_THROUGHPUT.label,
    M.DECODE_THROUGHPUT.label,
    "ITL p50 ms",
    "p90",
    "p99",
    M.E2E.label,
    "iters",
    "CI95 %",
    "peak RSS MiB",
]
LATENCY_HEAD = ["route", "median ms", "p90 ms", "p99 ms", M.INFERENCE_RATE.label, "iters", "CI95 %", M.MODEL_LOAD.label]
_CI_COLUMN = "CI95 %"


def run_rows(run: RunRecord) -> tuple[list[str], list[list[Any]]]:
    """Headers and raw rows (numbers unrounded) of the run's ok cells."""
    ok = [c for c in run.cells if c.ok]
    token = any(runtime_named(c.runtime).token_based for c in run.cells)
    return (TOKEN_HEAD if token else LATENCY_HEAD), [(_token_row if token else _latency_row)(c) for c in ok]


def _shown(headers: list[str], row: list[Any]) -> list[str]:
    """A raw row for a person: rounded numbers, '-' where nothing was measured, the CI as ±x%."""
    out = []
    for head, v in zip(headers, row):
        if head == _CI_COLUMN:
            out.append("-" if v is None else f"±{v:.1f}%")
        else:
            out.append("-" if v is None else human(v))
    return out


def run_text(run: RunRecord, fmt: str) -> str:
    """The run in a --format other than table: markdown/csv rows of the cells, json the record,
    jsonl one cell record per line."""
    if fmt == "json":
        return json_text(run.to_dict(), "json")
    if fmt == "jsonl":
        return json_text([c.to_dict() for c in run.cells], "jsonl")
    headers, rows = run_rows(run)
    if fmt == "markdown":
        return table_text(headers, [_shown(headers, r) for r in rows], "markdown")
    return table_text(headers, rows, "csv")


def _placement_text(placement: StagePlacement | None) -> str:
    if placement is None:
        return ""
    from winml_perf.bundle.placement import nodes_text, ops_text

    ops = placement.cpu_fallback_ops
    return f"  [{nodes_text(placement)}" + (f"; on CPU: {ops_text(ops)}" if ops else "") + "]"


def _route_lines(cells: Sequence[CellRecord]) -> list[str]:
    lines, seen = [], set()
    for c in cells:
        r = c.route
        if r.label in seen:
            continue
        seen.add(r.label)
        cache = f", cache {r.cache} ({r.cache_reason})" if r.cache else ""
        lines.append(
            f"route {r.label}: effective {r.effective or r.label}{cache}; "
            f"prepare {_f(_load_ms(c, 'prepare_ms'), 1)} ms, compile {_f(_load_ms(c, 'compile_ms'), 1)} ms, "
            f"load {_f(_load_ms(c, 'model_load_ms'), 1)} ms"
        )
        if r.emulated:
            lines.append(
                f"  emulated: {', '.join(r.emulated)} ran on an emulator on the CPU here; these timings are not NPU speed"
            )
        lines += [f"  {line}" for line in options_lines((r.target or {}).get("options"))]
        for s in r.stages:
            lines.append(f"  {s.stage}: {s.ep_before or 'config'} -> {s.ep_after}{_placement_text(s.placement)}")
        if r.derived_path:
            lines.append(f"  derived: {r.derived_path}")
    return lines


def warning_lines(cells: Sequence[CellRecord]) -> list[str]:
    """Warnings grouped by kind: one heading per kind with its remedy once, then the cells it
    concerns, each with its own detail; failed cells after them."""
    by_kind: dict[tuple[str, str], list[tuple[str, RecordWarning]]] = defaultdict(list)
    for c in cells:
        for w in c.warnings:
            by_kind[(w.code, w.remedy)].append((c.cell_key, w))
    lines = []
    for (code, remedy), hits in by_kind.items():
        keys = {k for k, _ in hits}
        lines.append(f"warning {code} ({len(keys)} cell{'s' if len(keys) != 1 else ''}): {remedy}")
        by_message: dict[str, list[str]] = defaultdict(list)
        for key, w in hits:  # one line per distinct detail, naming every cell it concerns
            if key not in by_message[w.message]:
                by_message[w.message].append(key)
        lines += [f"  {', '.join(ks)}: {message}" for message, ks in by_message.items()]
    for c in cells:
        if not c.ok:
            kind, message = (c.failure.kind, c.failure.message) if c.failure else (None, None)
            lines.append(f"FAILED [{c.cell_key}] {kind}: {message}")
    return lines


def _table_row(headers: list[str], row: list[Any], cell: CellRecord, mixed: bool) -> list[str]:
    """A shown row for the table: iterations as invocations x iterations, and the CI's coverage
    beside it when the rows cover different things."""
    out = _shown(headers, row)
    out[headers.index("iters")] = _iters(cell.summary)
    if mixed:
        out[headers.index(_CI_COLUMN)] += f" {_covers(cell)}"
    return out


def _stop_lines(cells: Sequence[CellRecord]) -> list[str]:
    """Why each adaptive cell stopped, and a note when an interval covers one process only."""
    lines = []
    for c in cells:
        policy = c.policy
        if policy.adaptive:
            s = c.summary
            ci = s.primary_ci95_half_width_pct
            lines.append(
                f"[{c.cell_key}] stopped by {c.stop_reason}: ±{'-' if ci is None else f'{ci:.2f}'}% "
                f"({_covers(c)}) against --target-ci {policy.target_ci_pct:g}%, "
                f"{s.invocations or 1} invocation(s), {s.iterations} iterations"
            )
    if cells and all(_covers(c) == "in-proc" for c in cells):
        lines.append(
            "CI95 in-proc covers this process only: another run may differ by more; "
            "--invocations 5 (the default) gives an interval across processes"
        )
    return lines


def render_run(run: RunRecord, warnings_only: bool = False) -> str:
    cells = run.cells
    warnings = warning_lines(cells)
    if warnings_only:
        return "".join(line + "\n" for line in warnings)
    headers, rows = run_rows(run)
    parts = [f"{cells[0].bundle if cells else ''}  runtime={cells[0].runtime if cells else ''}  run={run.run_id[:12]}"]
    parts += _route_lines(cells)
    if rows:
        ok = [c for c in cells if c.ok]  # run_rows' rows, in the same order
        head = _ci_head(ok)
        shown = [_table_row(headers, r, c, head == "CI95") for r, c in zip(rows, ok)]
        headers = [head if h == _CI_COLUMN else h for h in headers]
        parts.append(tabulate(shown, headers=headers, tablefmt="github", disable_numparse=True))
        parts += _stop_lines(ok)
    parts += warnings
    return "\n".join(parts)
