"""What `winml perf` says and writes once the run is over: the export files, the run on stdout in
its format, the generated texts, the explanation, where the records went, and the exit status of
an interrupted run, a refused store or failed cells."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from winml_perf.commands.perf_flags import OutputFlags
from winml_perf.support.errors import BenchmarkFailure, RunInterrupted, StoreError, UsageError
from winml_perf.support.output import check_output, names_stdout, write_output_chunks
from winml_perf.support.text_table import fill

if TYPE_CHECKING:
    from winml_perf.model.record import CellRecord, RunRecord

#: Every file to write, by its flag: (path, format).
Exports = dict[str, tuple[Path, str]]


def exports(out: OutputFlags) -> Exports:
    """Every file to write, by its flag, with its format (publish/formats.py): -o takes the run
    record (json), --export-FORMAT each format offered for a run's file. Each is checked writable
    before minutes of measuring, not after."""
    from winml_perf.publish.formats import Offer, offered

    given = {"-o": (out.output, "json")}
    for fmt in offered(Offer.RUN_FILE):  # an --export-FORMAT flag each (commands/perf_flags.py)
        given[f"--export-{fmt}"] = (getattr(out, f"export_{fmt}"), fmt)
    files = {flag: (path, f) for flag, (path, f) in given.items() if path is not None}
    for flag, (path, fmt) in files.items():
        if names_stdout(path):  # stdout carries the run in --format: refused, naming the --format that puts it there
            check_output(path, flag, instead=f"--format {fmt} puts the run on stdout as {fmt}")
    paths = [str(path) for path, _ in files.values()]
    dup = sorted({p for p in paths if paths.count(p) > 1})
    if dup:
        raise UsageError(f"{', '.join(dup)} is named by several of {', '.join(files)}", "give each export its own file")
    for flag, (path, _) in files.items():
        check_output(path, flag)
    return files


def report(outcome: Any, files: Exports, out: OutputFlags, texts: bool, explain: bool) -> None:
    """The run written to ``files`` and shown in ``out.fmt``; ``texts``: what each route generated;
    ``explain``: the profile of each cell. Raises the exit status of what did not go to plan."""
    run: RunRecord = outcome.run
    for flag, (path, export_fmt) in files.items():
        write_output_chunks(path, run_export(run, export_fmt), flag)
    if outcome.interrupted is not None:
        raise RunInterrupted(outcome.interrupted, _kept(outcome, run, [str(p) for p, _ in files.values()]))
    doc = run_document(run)  # the closing summary and --explain read the record's JSON document
    _print_run(run, doc, out.fmt)
    side = sys.stdout if _terminal(out.fmt) else sys.stderr
    if texts:
        _print_texts(doc, side)
    if explain:
        from winml_perf.explain.text import run_explain_text

        print(run_explain_text(doc), end="", file=side)
    sys.stdout.flush()  # the results first: a block-buffered stdout would put the next line inside them
    if outcome.store is not None and not outcome.store_errors:
        print(fill(f"stored {len(run.cells)} record(s) in {outcome.store} (run {run.run_id})"), file=sys.stderr)
    if outcome.store_errors:
        _refuse_unstored(outcome, run, files)
    _raise_failed(run.cells)


def _raise_failed(cells: Sequence[CellRecord]) -> None:
    """BenchmarkFailure naming the first three failed cells, when a cell failed."""
    from winml_perf.record.cell_spool import ok_cells

    failed = len(cells) - len(ok_cells(cells))
    if failed:
        first = list(islice((c for c in cells if not c.ok), 3))
        remedies = dict.fromkeys(c.failure.remedy for c in first if c.failure and c.failure.remedy)
        raise BenchmarkFailure(
            f"{failed} of {len(cells)} cells failed: "
            + "; ".join(f"{c.cell_key}: {c.failure.message if c.failure else '?'}" for c in first),
            "; ".join(remedies) or None,  # each cell's record keeps its own
        )


def run_document(run: RunRecord) -> dict[str, Any]:
    """``run.to_dict()`` whose cells are made one at a time as they are read (a sequence of their
    dicts, not a list): what reads it walks the cells, holding one at a time."""
    from winml_perf.record.cell_spool import CellDicts

    return {**run.head_dict(), "cells": CellDicts(run.cells)}


def _refuse_unstored(outcome: Any, run: RunRecord, files: Exports) -> None:
    """Exit with the store's refusal, saying where the run record is kept instead."""
    from winml_perf.publish.formats import format_named

    kept = [str(p) for p, f in files.values() if format_named(f).holds_document]  # the whole run record
    kept += [str(p) for p in [_save_unstored(outcome, run)] if p]
    raise StoreError(
        f"{len(outcome.store_errors)} record(s) could not be stored in {outcome.store}: "
        + "; ".join(outcome.store_errors[:3]),
        f"the run record is kept in {' and '.join(kept)} (`winml results import` reads it)"
        if kept
        else "the run record is complete in the output above; rerun with -o FILE to keep it",
    )


def _save_unstored(outcome: Any, run: RunRecord) -> Path | None:
    """The run record next to the store, for cells the store did not take; None when that fails too."""
    if outcome.unstored_path is None:
        return None
    path: Path = outcome.unstored_path / f"{run.run_id}.json"
    try:
        check_output(path)
        write_output_chunks(path, run_export(run, "json"))
    except UsageError:
        return None
    return path


def _kept(outcome: Any, run: RunRecord, written: list[str]) -> str:
    """Where an interrupted run's finished cells are, said in one clause."""
    n = len(run.cells)
    if outcome.store_errors:
        saved = _save_unstored(outcome, run)
        places = written + ([str(saved)] if saved else [])
        where = ("kept in " + " and ".join(places)) if places else "not kept (the store refused them)"
    else:
        parts = ([f"stored in {outcome.store}"] if outcome.store else []) + (
            [f"written to {' and '.join(written)}"] if written else []
        )
        where = " and ".join(parts) or "not kept (--no-store, no -o)"
    return f"{n} finished cell(s) {where} (run {run.run_id})"


def _print_run(run: RunRecord, doc: dict[str, Any], fmt: str) -> None:
    """The run on stdout in ``fmt``; for formats other than table, warnings and the summary go to
    stderr so stdout stays machine-readable. ``doc``: the run's JSON document (the summary's input)."""
    from winml_perf.compare.run_summary import route_verdicts, summarize_routes, summary_lines
    from winml_perf.publish.render import render_run, run_chunks

    summary_report = summarize_routes(doc)
    summary = (
        summary_lines(summary_report, route_verdicts(doc)) if summary_report is not None and summary_report.rows else []
    )
    if _terminal(fmt):
        print(render_run(run))
        if summary:
            print("\n".join(["", *(fill(line) for line in summary)]))
        return
    sys.stdout.writelines(run_chunks(run, fmt))  # json and jsonl a cell at a time
    sys.stdout.flush()
    print(fill(render_run(run, warnings_only=True)), file=sys.stderr, end="")
    for line in summary:
        print(fill(line), file=sys.stderr)


def _terminal(fmt: str) -> bool:
    """Whether ``fmt`` is read at a terminal: the run's own view, its notes beside it on stdout."""
    from winml_perf.publish.formats import format_named

    return format_named(fmt).terminal


def _printable(text: str) -> str:
    """Generated text without terminal control codes (a model can emit ESC or BEL): shown escaped."""
    return "".join(c if c in "\n\t" or (c.isprintable() and c != "\x1b") else repr(c)[1:-1] for c in text)


def _print_texts(doc: dict[str, Any], stream: TextIO) -> None:
    """What each route generated from a text prompt (--verbose, --check-outputs), one block per cell."""
    for cell in doc.get("cells", []):
        text = (cell.get("output") or {}).get("text")
        if text:
            label = f"{cell['route']['label']} p{cell['shape']['prompt_tokens']} n{cell['shape']['max_new_tokens']}"
            print(f"\n{label} generated:\n  " + _printable(text).replace("\n", "\n  "), file=stream)


def run_export(run: RunRecord, fmt: str) -> Iterable[str]:
    """The run as ``fmt`` writes it (`--export-FORMAT`, -o), in pieces: json and jsonl a cell at a
    time (publish/render.run_chunks), so a long sweep's record is never whole in memory."""
    from winml_perf.publish.render import run_chunks

    return run_chunks(run, fmt)


def run_text(run: RunRecord, fmt: str) -> str:
    from winml_perf.publish.render import run_text as text

    return text(run, fmt)
