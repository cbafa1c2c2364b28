"""`winml results list | show ID | export`: what the store holds, as tables, JSON, CSV, markdown,
Bencher BMF or github-action-benchmark JSON."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer
from tabulate import tabulate

from winml_perf.errors import UsageError

app = typer.Typer(help="List, show and export stored benchmark results.", no_args_is_help=True)

StoreOpt = Annotated[Optional[str], typer.Option("--store", help="Results store: a file path or postgresql:// URL (default $WINML_PERF_STORE, else results/winml-perf.db).")]
BundleOpt = Annotated[Optional[str], typer.Option("--bundle", help="Only this bundle (name or path).")]
RouteOpt = Annotated[Optional[str], typer.Option("--route", help="Only this route (config, ep=cpu, device=gpu, ...).")]
TestbedOpt = Annotated[Optional[str], typer.Option("--testbed", help="Only this testbed id.")]
RunOpt = Annotated[Optional[str], typer.Option("--run", help="Only this run id.")]
SinceOpt = Annotated[Optional[str], typer.Option("--since", help="Only records from this date/time on (2025-01-31, ISO time, or 7d / 12h).")]
UntilOpt = Annotated[Optional[str], typer.Option("--until", help="Only records before this date/time (a bare date includes that day).")]
StatusOpt = Annotated[Optional[str], typer.Option("--status", help="ok or failed.")]
CommitOpt = Annotated[Optional[str], typer.Option("--commit", help="Only records of this git commit (prefix).")]

LIST_FORMATS = ("table", "json", "csv", "markdown")
SHOW_FORMATS = ("table", "json")


def _check_format(fmt: str, allowed: tuple[str, ...]) -> None:
    if fmt not in allowed:
        raise UsageError(f"--format {fmt!r} is not one of {', '.join(allowed)}", f"pass --format {allowed[0]}")


def _filters(bundle, route, testbed, run, since, until, status, commit) -> dict:  # noqa: ANN001
    if status is not None and status not in ("ok", "failed"):
        raise UsageError(f"--status {status!r} is not ok or failed", "pass --status ok or --status failed")
    return {"bundle": bundle, "route": route, "testbed": testbed, "run_id": run, "since": since, "until": until,
            "status": status, "git_commit": commit}


def _load(store: str | None, filters: dict, limit: int | None = None):  # noqa: ANN202
    from winml_perf.results import load
    from winml_perf.results.store import open_store

    with open_store(store, create=False) as s:
        return load(s, limit=limit, **filters), s.display


@app.command("list")
def list_command(
    store: StoreOpt = None, bundle: BundleOpt = None, route: RouteOpt = None, testbed: TestbedOpt = None, run: RunOpt = None,
    since: SinceOpt = None, until: UntilOpt = None, status: StatusOpt = None, commit: CommitOpt = None,
    limit: Annotated[Optional[int], typer.Option("--limit", help="Only the newest N records.")] = None,
    fmt: Annotated[str, typer.Option("--format", help="table, json, csv or markdown.")] = "table",
) -> None:
    """List stored records (oldest first), with headline numbers."""
    from winml_perf.results import export as ex

    _check_format(fmt, LIST_FORMATS)
    if limit is not None and limit < 1:
        raise UsageError(f"--limit must be >= 1, got {limit}")
    df, where = _load(store, _filters(bundle, route, testbed, run, since, until, status, commit), limit)
    if fmt == "table":
        print(f"{len(df)} record(s) in {where}", file=sys.stderr)
        if len(df):
            print(tabulate(ex.summary_rows(df), headers=ex.MARKDOWN_HEADERS, tablefmt="simple", disable_numparse=True))
        return
    sys.stdout.write(ex.export(df, fmt))


def _show_table(row: dict) -> str:
    from winml_perf.results.compare import shape_label

    rec = row["record"]
    lines = [
        f"record {row['id']}  cell {row['record_uid']}  run {row['run_id']}",
        f"  {row['bundle']}  route {row['route']}  {shape_label(row['prompt_tokens'], row['max_new_tokens'])}  "
        f"runtime {row['runtime']}  status {row['status']}",
        f"  testbed {row['testbed_id']} ({row['hostname']})  at {row['created_utc']}  commit {row['git_commit']}  "
        f"winml-perf {row['winml_perf_version']}  onnxruntime {row['onnxruntime_version']}  genai {row['genai_version']}",
    ]
    if rec.get("failure"):
        lines.append(f"  failure: {rec['failure'].get('kind')}: {rec['failure'].get('message')}")
    metrics = rec.get("metrics") or {}
    if metrics:
        table = [[name, m.get("n"), *(("" if m.get(k) is None else f"{m[k]:.4g}") for k in ("median", "ci95_low", "ci95_high", "mean", "cv_pct", "p90", "p99"))]
                 for name, m in sorted(metrics.items())]
        lines.append(tabulate(table, headers=["metric", "n", "median", "CI low", "CI high", "mean", "CV %", "p90", "p99"], tablefmt="simple"))
    for w in rec.get("warnings") or ():
        lines.append(f"  warning [{w.get('code')}]: {w.get('message')} ({w.get('remedy')})")
    return "\n".join(lines)


@app.command("show")
def show_command(
    record_id: Annotated[str, typer.Argument(help="The record's numeric id (from `winml results list`) or its cell id (prefix).")],
    store: StoreOpt = None,
    fmt: Annotated[str, typer.Option("--format", help="table or json (the whole stored record).")] = "table",
) -> None:
    """Show one stored record: its identity, metrics and warnings, or the whole record as JSON."""
    from winml_perf.results.store import open_store

    _check_format(fmt, SHOW_FORMATS)
    with open_store(store, create=False) as s:
        row = s.get(record_id)
    if fmt == "json":
        print(json.dumps(row["record"], indent=2))
    else:
        print(_show_table(row))


def _write(path: Path, text: str) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"-o {path}: cannot write ({exc})", "pass -o with a writable path") from None
    print(f"wrote {path}", file=sys.stderr)


def gab_paths(output: Path) -> dict[str, Path]:
    """-o PATH for --format gab without --direction: PATH.bigger.json and PATH.smaller.json."""
    stem = output.with_suffix("") if output.suffix == ".json" else output
    return {d: stem.with_name(f"{stem.name}.{d}.json") for d in ("bigger", "smaller")}


@app.command("export")
def export_command(
    fmt: Annotated[str, typer.Option("--format", help="csv, json, markdown, bmf (Bencher) or gab (github-action-benchmark).")],
    output: Annotated[Optional[Path], typer.Option("--output", "-o", help="Write here instead of stdout.")] = None,
    direction: Annotated[Optional[str], typer.Option("--direction", help="gab only: bigger (customBiggerIsBetter) or smaller (customSmallerIsBetter); without it -o PATH writes both.")] = None,
    store: StoreOpt = None, bundle: BundleOpt = None, route: RouteOpt = None, testbed: TestbedOpt = None, run: RunOpt = None,
    since: SinceOpt = None, until: UntilOpt = None, status: StatusOpt = None, commit: CommitOpt = None,
) -> None:
    """Export stored records. bmf and gab take the newest ok record of each bundle x route x shape
    (one testbed); each metric's direction comes from its name (throughputs up, times down)."""
    from winml_perf.results import export as ex

    _check_format(fmt, tuple(ex.EXPORTERS))
    if direction is not None and fmt != "gab":
        raise UsageError("--direction applies to --format gab only", "drop --direction")
    df, _ = _load(store, _filters(bundle, route, testbed, run, since, until, status, commit))
    if fmt == "gab" and direction is None and output is not None:
        for d, path in gab_paths(output).items():
            _write(path, ex.export(df, "gab", direction=d))
        return
    text = ex.export(df, fmt, direction=direction)
    if output is None:
        sys.stdout.write(text)
    else:
        _write(output, text)
