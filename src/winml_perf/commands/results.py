"""`winml results list | show ID | export`: what the store holds, as tables, JSON, CSV, markdown,
Bencher BMF or github-action-benchmark JSON."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from winml_perf.commands.help_style import PlainTyper
from winml_perf.commands.option_groups import option_groups
from winml_perf.model.cell_status import CellStatus
from winml_perf.model.flag_bounds import WHEN_TEXT
from winml_perf.publish import exporters
from winml_perf.publish.formats import Offer, Rows, check_format, format_help, format_named, shown_text, table_text
from winml_perf.support.errors import UsageError
from winml_perf.support.text_table import fill, say

if TYPE_CHECKING:
    import pandas as pd

    from winml_perf.results.store import Store

app = PlainTyper(help="List, show and export stored benchmark results.", no_args_is_help=True)

StoreOpt = Annotated[
    str | None,
    typer.Option(
        "--store",
        metavar="PATH|URL",
        help="Results store: a file path or postgresql:// URL (default $WINML_PERF_STORE, else results/winml-perf.db).",
    ),
]
BundleOpt = Annotated[
    str | None,
    typer.Option(
        "--bundle",
        metavar="BUNDLE",
        help="Only this bundle: its name or --series label, its path (or the tail listings show, a/tiny-qwen2), or name (a1b2c3) for one content digest.",
    ),
]
RouteOpt = Annotated[
    str | None, typer.Option("--route", metavar="ROUTE", help="Only this route (config, ep=cpu, device=gpu, ...).")
]
TestbedOpt = Annotated[str | None, typer.Option("--testbed", metavar="ID", help="Only this testbed id.")]
RunOpt = Annotated[
    str | None,
    typer.Option(
        "--run",
        metavar="RUN",
        help="Only this run (its id or a unique prefix, e.g. the 8 characters `results list` shows).",
    ),
]
SinceOpt = Annotated[
    str | None,
    typer.Option(
        "--since",
        metavar="WHEN",
        help=f"Only records from this date/time on ({WHEN_TEXT}).",
    ),
]
UntilOpt = Annotated[
    str | None,
    typer.Option("--until", metavar="WHEN", help="Only records before this date/time (a bare date includes that day)."),
]
StatusOpt = Annotated[str | None, typer.Option("--status", metavar="STATUS", help="ok or failed.")]
CommitOpt = Annotated[
    str | None, typer.Option("--commit", metavar="SHA", help="Only records of this git commit (prefix).")
]
VerdictOpt = Annotated[
    str | None,
    typer.Option(
        "--verdict",
        metavar="VERDICT",
        help="Only records whose route's equivalence verdict is this: equivalent, within-precision, not-equivalent or not-checked.",
    ),
]
DigestOpt = Annotated[
    str | None,
    typer.Option(
        "--digest",
        metavar="HEX",
        help="Only records of the bundle whose content digest starts with this (the 'model changed a1b2c3 → d4e5f6' of compare runs and the dashboard).",
    ),
]


def _verdict(verdict: str | None) -> str | None:
    """--verdict as the stored verdict (model/equivalence_view.py); exit 2 naming the words otherwise."""
    from winml_perf.model.equivalence_view import VERDICT_WORDS

    if verdict is None:
        return None
    if verdict.strip().lower() not in VERDICT_WORDS:
        raise UsageError(
            f"--verdict {verdict!r} is not an equivalence verdict",
            "pass --verdict equivalent, within-precision, not-equivalent or not-checked",
        )
    return VERDICT_WORDS[verdict.strip().lower()]


def _digest(digest: str | None) -> str | None:
    """--digest: 1-40 hex digits (a prefix of a bundle's content digest); exit 2 otherwise."""
    import re

    if digest is None:
        return None
    text = digest.strip().lower()
    if not re.fullmatch(r"[0-9a-f]{1,40}", text):
        raise UsageError(
            f"--digest {digest!r} is not a bundle content digest (hex digits)",
            "pass the digest's first hex digits as results list or compare runs show them, e.g. --digest a1b2c3",
        )
    return text


@dataclass(frozen=True)
class RecordFilter:
    """Which stored records `results list` and `results export` select."""

    bundle: BundleOpt = None
    route: RouteOpt = None
    testbed: TestbedOpt = None
    run: RunOpt = None
    since: SinceOpt = None
    until: UntilOpt = None
    status: StatusOpt = None
    commit: CommitOpt = None
    verdict: VerdictOpt = None
    digest: DigestOpt = None

    def filters(self) -> dict[str, Any]:
        """The store's filters (results/filters.py); exit 2 on a status, digest or verdict it cannot be."""
        if self.status is not None and self.status not in tuple(CellStatus):
            raise UsageError(
                f"--status {self.status!r} is not {' or '.join(CellStatus)}", "pass --status ok or --status failed"
            )
        return {
            "digest": _digest(self.digest),
            "verdict": _verdict(self.verdict),
            "bundle": self.bundle,
            "route": self.route,
            "testbed": self.testbed,
            "run_id": self.run,
            "since": self.since,
            "until": self.until,
            "status": self.status,
            "git_commit": self.commit,
        }


def _load(store: str | None, filters: dict[str, Any], limit: int | None = None) -> tuple[pd.DataFrame, str]:
    """Records as a frame; a run id in the filters may be any unique prefix of one (exit 2 naming
    the candidates when it is unknown or ambiguous)."""
    from winml_perf.results import load
    from winml_perf.results.selectors import resolve_run_id
    from winml_perf.results.store import open_store

    with open_store(store, create=False) as s:
        if filters.get("run_id"):
            others = {k: v for k, v in filters.items() if k != "run_id"}
            filters = {**filters, "run_id": resolve_run_id(s, filters["run_id"], "--run", **others)}
        return load(s, limit=limit, **filters), s.display


@app.command("list")
@option_groups
def list_command(
    store: StoreOpt = None,
    select: RecordFilter = RecordFilter(),
    limit: Annotated[int | None, typer.Option("--limit", metavar="N", help="Only the newest N records.")] = None,
    fmt: Annotated[str, typer.Option("--format", metavar="FORMAT", help=format_help(Offer.ROWS))] = "table",
) -> None:
    """List stored records (oldest first), with headline numbers."""
    from winml_perf.publish.exporters.markdown import MARKDOWN_HEADERS, summary_rows

    check_format(Offer.ROWS, fmt)
    if limit is not None and limit < 1:
        raise UsageError(f"--limit must be >= 1, got {limit}")
    df, where = _load(store, select.filters(), limit)
    if format_named(fmt).terminal:  # the list's own table; any other format is its exporter's text
        print(fill(f"{len(df)} record(s) in {where}"), file=sys.stderr)
        if len(df):
            sys.stdout.write(table_text(MARKDOWN_HEADERS, summary_rows(df), "table", drop=LIST_DROP_ORDER))
        return
    sys.stdout.write(exporters.export(df, fmt))


#: The columns of `results list` that leave a narrow terminal, in this order (id, bundle, route,
#: shape and decode tokens/s always stay).
LIST_DROP_ORDER = (
    "commit",
    "when (UTC)",
    "e2e ms",
    "testbed",
    "prompt tok/s",
    "run",
    "TTFT ms",
    "equivalence",
    "status",
)

METRIC_HEAD = ["metric", "n", "median", "CI low", "CI high", "mean", "CV %", "p90", "p99"]
_METRIC_STATS = ("median", "ci95_low", "ci95_high", "mean", "cv_pct", "p90", "p99")


def _metric_rows(rec: dict[str, Any]) -> list[list[Any]]:
    from winml_perf.model.metrics import sort_key

    metrics = rec.get("metrics") or {}
    return [
        [name, m.get("n"), *(m.get(k) for k in _METRIC_STATS)]
        for name, m in sorted(metrics.items(), key=lambda kv: sort_key(kv[0]))
    ]


def _bundle_id_text(row: dict[str, Any]) -> str:
    """' (series label, bundle id a1b2c3d4e5f6)': the record's --series label and its bundle's
    content digest, where it has them (record/bundle_identity.py)."""
    parts = [f"series label of {row['bundle_path']}"] if row.get("series_label") else []
    parts += [f"bundle id {row['bundle_id']}"] if row.get("bundle_id") else []
    return f" ({', '.join(parts)})" if parts else ""


def _show_table(row: dict[str, Any]) -> str:
    from winml_perf.compare.text import shape_label
    from winml_perf.model.equivalence_view import view_of_record

    rec = row["record"]
    lines = [
        f"record {row['id']}  cell {row['record_uid']}  run {row['run_id']}",
        f"  {row['bundle']}{_bundle_id_text(row)}  route {row['route']}  {shape_label(row['prompt_tokens'], row['max_new_tokens'])}  "
        f"runtime {row['runtime']}  status {row['status']}",
        f"  testbed {row['testbed_id']} ({row['hostname']})  at {row['created_utc']}  commit {row['git_commit'] or '?'}  "
        f"winml-perf {row['winml_perf_version']}  onnxruntime {row['onnxruntime_version']}  genai {row['genai_version']}",
    ]
    if rec.get("failure"):
        lines.append(f"  failure: {rec['failure'].get('kind')}: {rec['failure'].get('message')}")
    lines.append(f"  equivalence: {view_of_record(rec).text()}")
    if rec.get("serving"):
        from winml_perf.model.serving import ServingSection
        from winml_perf.publish.serving_table import serving_summary

        lines += [f"  {line}" for line in serving_summary(ServingSection.from_dict(rec["serving"]))]
    rows = _metric_rows(rec)
    if rows:
        lines.append(table_text(METRIC_HEAD, rows, "table").rstrip("\n"))
    for w in rec.get("warnings") or ():
        lines.append(f"  warning [{w.get('code')}]: {w.get('message')} ({w.get('remedy')})")
    return "\n".join(fill(line) for line in lines)


def _shown_rows(s: Store, ref: str) -> list[dict[str, Any]]:
    """The record ``ref`` names (numeric id or record id prefix), else every record of the run
    whose id starts with it."""
    from winml_perf.results.selectors import run_matches
    from winml_perf.support.errors import StoreError

    try:
        return [s.get(ref)]
    except StoreError as exc:
        runs = [] if ref.strip().isdigit() else run_matches(s, ref.strip())
        if len(runs) != 1:
            if len(runs) > 1:
                raise UsageError(
                    f"{ref!r} is no record id and matches {len(runs)} runs: {', '.join(runs[:6])}",
                    "give more characters of the run id",
                ) from None
            raise exc from None
        return [s.get(r["id"]) for r in s.records(run_id=runs[0])]


@app.command("show")
def show_command(
    record_id: Annotated[
        str,
        typer.Argument(
            metavar="RECORD",
            help="A record's numeric id (from `winml results list`), its cell id (prefix), or a run id (prefix: every record of that run).",
        ),
    ],
    store: StoreOpt = None,
    fmt: Annotated[
        str,
        typer.Option(
            "--format",
            metavar="FORMAT",
            help=format_help(Offer.ROWS, "(json and jsonl: each whole stored record; csv and markdown: its metrics)"),
        ),
    ] = "table",
) -> None:
    """Show stored records: identity, metrics and warnings, or the whole record as JSON."""
    from winml_perf.results.store import open_store

    check_format(Offer.ROWS, fmt)
    with open_store(store, create=False) as s:
        rows = _shown_rows(s, record_id)
    docs = [r["record"] for r in rows]
    head = ["record", *METRIC_HEAD] if len(rows) > 1 else METRIC_HEAD
    table = [([r["id"]] if len(rows) > 1 else []) + m for r in rows for m in _metric_rows(r["record"])]
    shown = Rows(docs[0] if len(docs) == 1 else docs, docs, head, table, view=lambda: _show_tables(rows))
    sys.stdout.write(shown_text(fmt, shown))


def _show_tables(rows: list[dict[str, Any]]) -> str:
    """Each record's identity, metrics and warnings (`results show`'s table)."""
    return "\n\n".join(_show_table(r) for r in rows) + "\n"


def _write(path: Path, text: str) -> None:
    from winml_perf.support.output import names_stdout, write_output

    write_output(path, text)  # checked before the store was read
    if not names_stdout(path):
        say(f"wrote {path}")


@app.command("export")
@option_groups
def export_command(
    fmt: Annotated[
        str,
        typer.Option(
            "--format",
            metavar="FORMAT",
            help=exporters.format_help(),
        ),
    ],
    output: Annotated[
        Path | None, typer.Option("--output", "-o", metavar="FILE", help="Write here instead of stdout.")
    ] = None,
    direction: Annotated[
        str | None,
        typer.Option(
            "--direction",
            metavar="DIRECTION",
            help="With --format gab: bigger or smaller (the same as gab-bigger / gab-smaller).",
        ),
    ] = None,
    store: StoreOpt = None,
    select: RecordFilter = RecordFilter(),
) -> None:
    """Export stored records. bmf and gab take the newest ok record of each bundle x route x shape
    (one testbed); each metric's direction comes from its name (throughputs up, times down)."""
    exporters.check_options(fmt, direction=direction)  # exit 2: a format or an option it does not take
    if output is not None:
        from winml_perf.support.output import check_output

        check_output(output, stdout_ok=True)  # before reading the store; -: stdout, as without -o
    df, where = _load(store, select.filters())
    if df.empty:
        raise UsageError(
            f"the export selects no records in {where}", "loosen the filters; `winml results list` shows what is stored"
        )
    text = exporters.export(df, fmt, direction=direction)
    if exporters.selects_nothing(fmt, text):
        raise UsageError(
            f"--format {fmt} has nothing to export from the {len(df)} selected record(s) (no ok record with such metrics)",
            "select ok records (`winml results list --status ok`), or pick the other direction",
        )
    if output is None:
        sys.stdout.write(text)
    else:
        _write(output, text)


@app.command("import")
def import_command(
    files: Annotated[
        list[Path], typer.Argument(metavar="FILE", help="Run record files (`winml perf -o`) or cell records.")
    ],
    store: StoreOpt = None,
) -> None:
    """Store the cells of record files written on testbeds that cannot reach the store (a cell
    already stored, by its id, is not stored again)."""
    from winml_perf.results.importing import import_files
    from winml_perf.results.store import open_store

    with open_store(store) as s:
        report = import_files(s, files)
        where = s.display
    print(
        f"imported {report.new} new cell(s) from {report.files} file(s) into {where}"
        f" ({report.already_stored} already stored)",
        file=sys.stderr,
    )


@app.command("prune")
def prune_command(
    older_than: Annotated[
        str,
        typer.Option(
            "--older-than",
            metavar="AGE",
            help="Delete records older than this age (90d, 12w, 48h; m is minutes: 3m keeps 3 minutes) or date (2025-01-31).",
        ),
    ],
    store: StoreOpt = None,
) -> None:
    """Delete records (with their metrics and samples) older than an age or a date."""
    from winml_perf.results.filters import parse_when
    from winml_perf.results.store import open_store

    cutoff = parse_when(older_than, "--older-than")
    with open_store(store, create=False) as s:
        deleted = s.prune(cutoff)
        where = s.display
    print(f"pruned {deleted} record(s) created before {cutoff} from {where}", file=sys.stderr)
