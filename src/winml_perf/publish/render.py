"""Human-readable rendering of a run record (the typed RunRecord, read by attribute): tables,
routes, warnings, and the run's rows in every ``--format`` (formats.py)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from winml_perf.ep.effective import options_lines
from winml_perf.model.record import CellRecord, RunRecord
from winml_perf.model.record_sections import RecordWarning
from winml_perf.model.route import StagePlacement
from winml_perf.model.runtime import runtime_named
from winml_perf.model.spec import finite_or_none
from winml_perf.publish.energy_lines import energy_lines
from winml_perf.publish.formats import json_text, render, table_text
from winml_perf.publish.run_table import (
    Column,
    covers,
    export_rows,
    fitted_table,
    latency_columns,
    screen_rows,
    terminal_width,
    token_columns,
    with_equivalence,
)
from winml_perf.record.cell_spool import ok_cells
from winml_perf.support.human_numbers import fixed
from winml_perf.support.indented_json import dumps_indented_chunks
from winml_perf.support.text_table import fill, left_out


def _f(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _load_ms(c: CellRecord, phase: str) -> float | None:
    """One load phase of the cell in ms, None when not measured (as the record writes it)."""
    value: float | None = getattr(c.load, phase)
    return finite_or_none(value)


def _covers(c: CellRecord) -> str:
    """What a cell's CI covers: '5 proc' (over invocations) or 'in-proc' (one process)."""
    return covers(c)


def _columns(run: RunRecord) -> list[Column]:
    token = any(runtime_named(c.runtime).token_based for c in run.cells)
    return with_equivalence(token_columns() if token else latency_columns(), run.cells)


def run_rows(run: RunRecord) -> tuple[list[str], list[list[Any]]]:
    """Headers (metric names) and raw rows (numbers unrounded) of the run's ok cells, as exports
    write them (publish/run_table.py)."""
    return export_rows(_columns(run), ok_cells(run.cells))


def _markdown(run: RunRecord) -> str:
    """Every column as a person reads it (no terminal to fit)."""
    heads, rows = screen_rows(_columns(run), ok_cells(run.cells))
    return table_text(heads, rows, "markdown")


def run_text(run: RunRecord, fmt: str) -> str:
    """The run in a --format: markdown/csv rows of the cells, json the record, jsonl one cell record
    per line, table the terminal's view."""
    return "".join(run_chunks(run, fmt))


def run_chunks(run: RunRecord, fmt: str) -> Iterable[str]:
    """``run_text`` in pieces: json and jsonl a cell at a time (a long sweep's cells are never all
    in memory at once, issue 36), the others whole."""
    return render(fmt, RunShown(run))


@dataclass(frozen=True)
class RunShown:
    """A run record in each format of the registry (publish/formats.py)."""

    run: RunRecord

    def table(self) -> Iterable[str]:
        return [render_run(self.run) + "\n"]

    def markdown(self) -> Iterable[str]:
        return [_markdown(self.run)]

    def csv(self) -> Iterable[str]:
        headers, rows = run_rows(self.run)
        return [table_text(headers, rows, "csv")]

    def json(self) -> Iterator[str]:  # the text of json_text(run.to_dict(), "json")
        yield from dumps_indented_chunks(self.run.head_dict(), "cells", (c.to_dict() for c in self.run.cells))
        yield "\n"

    def jsonl(self) -> Iterator[str]:
        for c in self.run.cells:
            yield json_text(c.to_dict(), "jsonl")


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


def output_check_lines(cells: Sequence[CellRecord]) -> list[str]:
    """A line per route whose --check-outputs found the same greedy tokens as config (a difference
    is a warning of its own)."""
    lines, seen = [], set()
    for c in cells:
        check = c.route.output_check
        if check is None or not check.equal or c.route.label in seen:
            continue
        seen.add(c.route.label)
        lines.append(
            f"outputs of {c.route.label} match config: the same {len(check.route_token_ids)} greedy tokens"
            f" for a {check.prompt_tokens}-token prompt (seed {check.seed})"
        )
    return lines


def warning_lines(cells: Sequence[CellRecord]) -> list[str]:
    """Warnings grouped by kind: one heading per kind with its remedy once, then the cells it
    concerns, each with its own detail; failed cells after them."""
    by_kind: dict[tuple[str, str], list[tuple[str, RecordWarning]]] = defaultdict(list)
    failed = []
    for c in cells:  # one walk: a long run's cells are read from disk (record/cell_spool.py)
        for w in c.warnings:
            by_kind[(w.code, w.remedy)].append((c.cell_key, w))
        if not c.ok:
            kind, message = (c.failure.kind, c.failure.message) if c.failure else (None, None)
            failed.append(f"FAILED [{c.cell_key}] {kind}: {message}")
    lines = []
    for (code, remedy), hits in by_kind.items():
        keys = {k for k, _ in hits}
        lines.append(f"warning {code} ({len(keys)} cell{'s' if len(keys) != 1 else ''}): {remedy}")
        by_message: dict[str, list[str]] = defaultdict(list)
        for key, w in hits:  # one line per distinct detail, naming every cell it concerns
            if key not in by_message[w.message]:
                by_message[w.message].append(key)
        lines += [f"  {', '.join(ks)}: {message}" for message, ks in by_message.items()]
    return lines + failed


def _stop_lines(cells: Sequence[CellRecord]) -> list[str]:
    """Why each adaptive cell stopped, and a note when an interval covers one process only."""
    lines = []
    count = sustained = in_proc = 0
    for c in cells:  # one walk, as warning_lines
        count += 1
        sustained += _sustained(c)
        in_proc += _covers(c) == "in-proc"
        policy = c.policy
        if policy.adaptive:
            s = c.summary
            ci = s.primary_ci95_half_width_pct
            lines.append(
                f"[{c.cell_key}] stopped by {c.stop_reason}: ±{'-' if ci is None else fixed(ci, 2)}% "
                f"({_covers(c)}) against --target-ci {policy.target_ci_pct:g}%, "
                f"{s.invocations or 1} invocation(s), {s.iterations} iterations"
            )
    if sustained and sustained == count:  # --duration runs one process and refuses --invocations
        lines.append(
            "CI95 in-proc covers this process only: a sustained run is one process; another run may differ by more"
        )
    elif count and in_proc == count:
        lines.append(
            "CI95 in-proc covers this process only: another run may differ by more; "
            "--invocations 5 (the default) gives an interval across processes"
        )
    return lines


def _sustained(c: CellRecord) -> bool:
    return c.policy.iterations.get("duration_s") is not None


def render_run(run: RunRecord, warnings_only: bool = False, width: int | None = None) -> str:
    """The run for a terminal ``width`` columns wide (default: this terminal's; publish/run_table.py)."""
    cells = run.cells
    warnings = output_check_lines(cells) + warning_lines(cells)
    if warnings_only:
        return "".join(line + "\n" for line in warnings)
    width = terminal_width() if width is None else width
    parts = [f"{cells[0].bundle if cells else ''}  runtime={cells[0].runtime if cells else ''}  run={run.run_id[:12]}"]
    parts += _route_lines(cells)
    ok = ok_cells(cells)
    if ok:
        table, dropped = fitted_table(_columns(run), ok, width)
        parts.append(table)
        if dropped:
            parts.append(left_out(dropped, width, "--format markdown or --export-csv has every column"))
        parts += _stop_lines(ok)
        parts += energy_lines(ok)
    parts += warnings
    return "\n".join(fill(part, width) for part in parts)  # prose within the terminal too
