"""`winml dashboard`: write the static, self-contained results dashboard (works offline)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from winml_perf.model.flag_bounds import WHEN_TEXT
from winml_perf.support.text_table import say


def dashboard_command(
    output: Annotated[
        Path, typer.Option("--output", "-o", metavar="DIR", help="Folder to write index.html into.")
    ] = Path("site"),
    store: Annotated[
        str | None,
        typer.Option(
            "--store",
            metavar="PATH|URL",
            help="Results store: a file path or postgresql:// URL (default $WINML_PERF_STORE, else results/winml-perf.db).",
        ),
    ] = None,
    title: Annotated[str, typer.Option("--title", metavar="TEXT", help="Page title.")] = "winml-perf results",
    bundle: Annotated[str | None, typer.Option("--bundle", metavar="BUNDLE", help="Only this bundle.")] = None,
    testbed: Annotated[str | None, typer.Option("--testbed", metavar="ID", help="Only this testbed id.")] = None,
    since: Annotated[
        str | None, typer.Option("--since", metavar="WHEN", help=f"Only records from this date/time on ({WHEN_TEXT}).")
    ] = None,
    jobs: Annotated[
        int | None,
        typer.Option(
            "--jobs",
            "-j",
            metavar="N",
            min=1,
            help="Worker processes writing pages (default: by store size, at most the CPUs).",
        ),
    ] = None,
    sustained: Annotated[
        Path | None,
        typer.Option(
            "--sustained",
            metavar="RUN.json",
            help="Draw a sustained run's record (winml perf --duration -o RUN.json) into DIR/sustained.html; no store.",
        ),
    ] = None,
    serving: Annotated[
        Path | None,
        typer.Option(
            "--serving",
            metavar="RUN.json",
            help="Draw a serving run's curves (winml serve -o RUN.json) into DIR/serving.html; no store.",
        ),
    ] = None,
) -> None:
    """Write a static HTML dashboard: an index of every series (sparkline, latest value with its
    interval, newest change point) and a page per testbed x bundle with the full history, the
    interval as a band and change points marked; where the store holds serving cells, serving.html
    with the newest serving run of each bundle and testbed. Change points found are kept in the
    store, so the next build searches only series with new records."""
    from winml_perf.support.output import refuse_stdout_folder

    refuse_stdout_folder(output, "-o")
    if sustained is not None:
        say(f"wrote {write_sustained(sustained, output, title)}")
        return
    if serving is not None:
        say(f"wrote {write_serving(serving, output, title)}")
        return
    from winml_perf.publish.dashboard import write_dashboard
    from winml_perf.results.store import open_store

    with open_store(store, create=False) as s:
        path = write_dashboard(s, output, title=title, jobs=jobs, bundle=bundle, testbed=testbed, since=since)
    say(f"wrote {path}")


def write_sustained(record: Path, output: Path, title: str) -> Path:
    """DIR/sustained.html from a run record with sustained cells; exit 2 when it has none."""
    from winml_perf.publish.dashboard_page import write_file
    from winml_perf.publish.sustained_chart import sustained_page
    from winml_perf.support.errors import UsageError
    from winml_perf.support.json_input import read_json

    run = read_json(record, UsageError)
    if not isinstance(run, dict) or run.get("kind") != "run":
        raise UsageError(f"--sustained {record}: not a run record", "pass the -o file of `winml perf --duration`")
    page, charts = sustained_page(run, title)
    if not charts:
        raise UsageError(
            f"--sustained {record}: no cell has a sustained series",
            "record one with `winml perf BUNDLE --duration 10m -o RUN.json`",
        )
    path = output / "sustained.html"
    write_file(path, page, root=output)
    return path


def write_serving(record: Path, output: Path, title: str) -> Path:
    """DIR/serving.html from a `winml serve` run record; exit 2 when it has no serving cell."""
    from winml_perf.publish.dashboard_page import write_file
    from winml_perf.publish.serving_chart import serving_page
    from winml_perf.support.errors import UsageError
    from winml_perf.support.json_input import read_json

    run = read_json(record, UsageError)
    if not isinstance(run, dict) or run.get("kind") != "run":
        raise UsageError(f"--serving {record}: not a run record", "pass the -o file of `winml serve`")
    page, charts = serving_page(run, title)
    if not charts:
        raise UsageError(
            f"--serving {record}: no closed- or open-loop serving cell to draw",
            "record one with `winml serve BUNDLE --concurrency 1,4 -o RUN.json`",
        )
    path = output / "serving.html"
    write_file(path, page)
    return path
