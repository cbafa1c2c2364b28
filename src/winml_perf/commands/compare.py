"""`winml compare routes | runs`: routes of one interleaved sweep against the config route, and a
baseline run against a candidate run (a CI gate with --fail-on-regression)."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Annotated, Any

import typer

from winml_perf.commands.help_style import PlainTyper
from winml_perf.commands.option_groups import option_groups
from winml_perf.publish.formats import Offer, Rows, check_format, format_help, shown_text
from winml_perf.support.errors import BenchmarkFailure, UsageError
from winml_perf.support.text_table import fill

if TYPE_CHECKING:
    from winml_perf.compare.routes import RoutesReport
    from winml_perf.compare.runs import RunsReport

app = PlainTyper(help="Compare routes of one run, or a baseline run with a candidate run.", no_args_is_help=True)

StoreOpt = Annotated[
    str | None,
    typer.Option(
        "--store",
        metavar="PATH|URL",
        help="Results store: a file path or postgresql:// URL (default $WINML_PERF_STORE, else results/winml-perf.db).",
    ),
]
MetricOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--metric",
        metavar="METRIC",
        help="Metric(s) to compare (repeatable; default: every per-iteration metric both sides have).",
    ),
]
EquivalenceOpt = Annotated[
    str, typer.Option("--equivalence", metavar="PCT", help="Differences within this band count as equivalent, e.g. 2%.")
]
FormatOpt = Annotated[str, typer.Option("--format", metavar="FORMAT", help=format_help(Offer.ROWS))]
BundleOpt = Annotated[
    str | None,
    typer.Option(
        "--bundle",
        metavar="BUNDLE",
        help="Only this bundle: its name or --series label, its path (or the tail listings show, a/tiny-qwen2), or name (a1b2c3) for one content digest.",
    ),
]
TestbedOpt = Annotated[str | None, typer.Option("--testbed", metavar="ID", help="Only this testbed id.")]
PromptOpt = Annotated[int | None, typer.Option("--prompt-tokens", metavar="N", help="Only this prompt length.")]
NewOpt = Annotated[int | None, typer.Option("--max-new-tokens", metavar="N", help="Only this number of new tokens.")]


@dataclass(frozen=True)
class Bootstrap:
    """The bootstrap of `compare routes`' intervals."""

    resamples: Annotated[int, typer.Option("--resamples", metavar="N", help="Bootstrap resamples.")] = 2000
    seed: Annotated[
        int, typer.Option("--seed", metavar="N", help="Bootstrap seed (same data + seed = same interval).")
    ] = 20240601


@dataclass(frozen=True)
class RouteCells:
    """`compare routes`: only the cells of this bundle, testbed and shape."""

    bundle: BundleOpt = None
    testbed: TestbedOpt = None
    prompt_tokens: PromptOpt = None
    max_new_tokens: NewOpt = None


@dataclass(frozen=True)
class Gate:
    """`compare runs`' gate: the regression that fails it, and whether unlike runs may be compared."""

    fail_on_regression: Annotated[
        str | None,
        typer.Option(
            "--fail-on-regression",
            metavar="PCT",
            help="Exit 1 when the gate finds a regression worse than this in a candidate series' history: a significant change point among its newest runs, or every invocation of its newest run beyond the band of the earlier runs (short history: the candidate's interval wholly beyond the earlier runs' median). Needs its unit, e.g. 5%.",
        ),
    ] = None
    force: Annotated[
        bool, typer.Option("--force", help="Compare even when testbed, bundle, route or shape differ.")
    ] = False


@dataclass(frozen=True)
class RunCells:
    """`compare runs`: only the cells of this bundle, route, testbed and shape."""

    bundle: BundleOpt = None
    route: Annotated[str | None, typer.Option("--route", metavar="ROUTE", help="Only this route.")] = None
    testbed: TestbedOpt = None
    prompt_tokens: PromptOpt = None
    max_new_tokens: NewOpt = None


ROUTES_HEAD = [
    "bundle",
    "testbed",
    "prompt",
    "new",
    "route",
    "baseline",
    "metric",
    "speedup",
    "CI low",
    "CI high",
    "rounds",
    "verdict",
    "equivalence",
    "equivalence against",
]
RUNS_HEAD = [
    "series",
    "metric",
    "inv base",
    "inv cand",
    "baseline",
    "candidate",
    "Δ %",
    "Δ 95% CI",
    "p",
    "verdict",
    "gate",
]  # publish/runs_table.HEAD, read without importing the comparison code
#: The runs CSV's columns: the interval's two bounds as numbers in place of its text.
RUNS_CSV_HEAD = [
    h for head in RUNS_HEAD for h in (("Δ 95% CI low %", "Δ 95% CI high %") if head == "Δ 95% CI" else (head,))
]


@app.command("routes")
@option_groups
def routes_command(
    run: Annotated[
        str | None,
        typer.Option(
            "--run",
            metavar="RUN",
            help="Run id (or prefix); default: the latest run with the baseline route and another.",
        ),
    ] = None,
    baseline_route: Annotated[
        str, typer.Option("--baseline-route", metavar="ROUTE", help="The route the others are compared with.")
    ] = "config",
    route: Annotated[
        list[str] | None, typer.Option("--route", metavar="ROUTE", help="Only these routes (repeatable).")
    ] = None,
    metric: MetricOpt = None,
    equivalence: EquivalenceOpt = "2%",
    bootstrap: Bootstrap = Bootstrap(),
    cells: RouteCells = RouteCells(),
    store: StoreOpt = None,
    fmt: FormatOpt = "table",
) -> None:
    """Each forced route against the config route of the same interleaved sweep: speedup per
    metric with a 95% CI (bootstrap over paired rounds) and a verdict."""
    from winml_perf.commands.compare_store import compare_stored_routes, stored_serving_cells
    from winml_perf.compare.text import parse_pct
    from winml_perf.results.store import open_store

    check_format(Offer.ROWS, fmt)
    if bootstrap.resamples < 100:
        raise UsageError(f"--resamples must be >= 100, got {bootstrap.resamples}", "the default 2000 is a good choice")
    eq = parse_pct(equivalence, "--equivalence")
    assert eq is not None  # --equivalence has a default
    with open_store(store, create=False) as s:
        filters = asdict(cells)
        serving = stored_serving_cells(s, run, baseline_route, {k: v for k, v in filters.items() if v is not None})
        if serving is not None:  # a `winml serve` run: goodput per load point (compare/serving.py)
            _print_serving(*serving, baseline_route, route, fmt)
            return
        report = compare_stored_routes(
            s,
            run,
            baseline_route=baseline_route,
            routes=route,
            metrics=metric,
            equivalence_pct=eq,
            resamples=bootstrap.resamples,
            seed=bootstrap.seed,
            **filters,
        )
    _print_routes(report, fmt)


def _print_routes(report: RoutesReport, fmt: str) -> None:
    """`compare routes`' report in ``fmt``: sentences (table) or figures; its notes on stderr."""
    rows = [
        [
            r.bundle,
            r.testbed_id,
            r.prompt_tokens,
            r.max_new_tokens,
            r.route,
            r.baseline_route,
            r.metric,
            r.speedup,
            r.ci_low,
            r.ci_high,
            r.rounds,
            r.verdict_shown(),
            r.equivalence.label(),  # 'not checked' when the run did not judge the route
            r.equivalence.reference or "",
        ]
        for r in report.rows
    ]
    doc = report.to_dict()
    sys.stdout.write(shown_text(fmt, Rows(doc, doc["comparisons"], ROUTES_HEAD, rows, view=lambda: _sentences(report))))
    for note in report.notes:
        print(fill(f"note: {note}"), file=sys.stderr)


def _sentences(report: RoutesReport) -> str:
    """`compare routes`' table: one sentence a route and metric, under its heading on stderr."""
    how = (
        "over paired invocations"
        if report.rows and all(r.pairing == "invocations" for r in report.rows)
        else "bootstrap over paired rounds"
    )
    print(fill(f"run {report.run_id}: routes against {report.baseline_route} (95% CI, {how})"), file=sys.stderr)
    return "".join(fill(row.sentence()) + "\n" for row in report.rows)


@dataclass(frozen=True)
class _ServingShown(Rows):
    """A serving run's verdicts: their figures in json and jsonl, the sentences in every other format."""

    def markdown(self) -> Iterable[str]:
        return self.table()

    def csv(self) -> Iterable[str]:
        return self.table()


def _sweep_command(cells: list[Any]) -> str | None:
    """The command that made a run's cells, as their policy recorded it (serve, tune)."""
    return next((str(c.policy.rest.get("command")) for c in cells if c.policy.rest.get("command")), None)


def _print_serving(run_id: str, cells: list[Any], baseline_route: str, routes: list[str] | None, fmt: str) -> None:
    """A serving run's verdicts: each route's goodput against the baseline route per load point, and
    each route's batching gain; sentences (table) or their figures (json/jsonl)."""
    from winml_perf.compare.serving import batching_gains, route_verdicts

    kept = [c for c in cells if not routes or c.route.label in routes or c.route.label == baseline_route]
    found = route_verdicts(kept, baseline_route) + batching_gains(kept)
    items = [
        {
            "route": v.route,
            "load": v.load,
            "against": v.against,
            "figure": v.figure,
            "ratio": v.ratio.estimate,
            "ci_low": v.ratio.low,
            "ci_high": v.ratio.high,
            "pairs": v.ratio.pairs,
            "verdict": v.ratio.verdict.value,
            "sentence": v.sentence,
        }
        for v in found
    ]
    made_by = "a round of winml tune --objective goodput" if _sweep_command(cells) == "tune" else "winml serve"

    def sentences() -> str:
        print(
            f"run {run_id}: a serving run ({made_by}); routes against {baseline_route} per load point", file=sys.stderr
        )
        return "".join(f"{v.sentence}\n" for v in found)

    doc = {"run_id": run_id, "baseline_route": baseline_route, "serving": items}
    sys.stdout.write(shown_text(fmt, _ServingShown(doc, items, view=sentences)))


def _raw_rows(report: RunsReport) -> list[list[Any]]:
    """The runs table's rows with numbers as measured (csv)."""
    from winml_perf.publish.runs_table import gate_cell
    from winml_perf.support.finite_numbers import finite_number

    return [
        [
            report.label(r.key),
            r.metric,
            r.n_baseline,
            r.n_candidate,
            r.baseline_median,
            r.candidate_median,
            r.delta_pct,
            finite_number(r.delta_low_pct),  # none (too few invocations): empty, as JSON's null
            finite_number(r.delta_high_pct),
            r.p_value,
            r.verdict,
            gate_cell(r),
        ]
        for r in report.rows
    ]


@app.command("runs")
@option_groups
def runs_command(
    ids: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="[BASELINE [CANDIDATE]]",
            help="The two runs as positional arguments (same forms as --baseline; CANDIDATE defaults to latest).",
            show_default=False,
        ),
    ] = None,
    baseline: Annotated[
        str | None,
        typer.Option(
            "--baseline",
            metavar="RUN",
            help="run:ID, commit:SHA, version:X.Y, date:YYYY-MM-DD, latest, previous, or a bare id/commit/version/date.",
        ),
    ] = None,
    candidate: Annotated[
        str | None, typer.Option("--candidate", metavar="RUN", help="Same forms as --baseline (default: latest).")
    ] = None,
    gate_flags: Gate = Gate(),
    metric: MetricOpt = None,
    equivalence: EquivalenceOpt = "2%",
    cells: RunCells = RunCells(),
    store: StoreOpt = None,
    fmt: FormatOpt = "table",
) -> None:
    """A baseline against a candidate on the same testbed, bundle, route and shape, per metric over
    invocations (fresh processes): the medians of the invocation medians, Δ% with its 95% interval,
    a Mann-Whitney p-value over the invocation medians and the verdict the interval gives."""
    from winml_perf.commands.compare_store import compare_stored_runs
    from winml_perf.compare.text import parse_pct
    from winml_perf.results.store import open_store

    check_format(Offer.ROWS, fmt)
    (baseline, candidate), named = _two_runs(ids or [], baseline, candidate)
    eq = parse_pct(equivalence, "--equivalence")
    assert eq is not None  # --equivalence has a default
    gate = parse_pct(gate_flags.fail_on_regression, "--fail-on-regression")
    with open_store(store, create=False) as s:
        report = compare_stored_runs(
            s,
            baseline,
            candidate,
            metrics=metric,
            equivalence_pct=eq,
            fail_threshold_pct=gate,
            force=gate_flags.force,
            named=named,
            **asdict(cells),
        )
    _print_runs(report, fmt)
    if report.regressions:
        worst = report.regressions[0]
        raise BenchmarkFailure(
            f"{len(report.regressions)} regression(s) beyond {gate:g}% (judged on each candidate series'"
            f" history), e.g. {report.failure_text(worst)}",
            "the model changed: compare the two builds (winml results list --digest HEX shows each one's runs)"
            if report.model_changes.get(tuple(worst.candidate_key))
            else "investigate the candidate's commit and testbed",
        )


def _print_runs(report: RunsReport, fmt: str) -> None:
    """`compare runs`' report in ``fmt``, then its notes and the gate's explanation on stderr."""
    from winml_perf.compare.gate import explanation_lines
    from winml_perf.publish.runs_table import human_rows

    doc = report.to_dict()
    shown = Rows(
        doc,
        doc["changes"],
        RUNS_HEAD,
        human_rows(report),
        csv_rows=_raw_rows(report),
        view=lambda: _runs_table(report),
        csv_headers=RUNS_CSV_HEAD,
    )
    sys.stdout.write(shown_text(fmt, shown))
    for note in report.notes:
        print(fill(f"note: {note}"), file=sys.stderr)
    for line in explanation_lines(report):
        print(fill(line), file=sys.stderr)


def _runs_table(report: RunsReport) -> str:
    """`compare runs`' table, fitted to the terminal (publish/runs_table.py says what gives way),
    under the two runs named on stderr."""
    from winml_perf.publish.run_table import terminal_width
    from winml_perf.publish.runs_table import fitted_runs_table

    print(fill(f"baseline: {report.baseline}\ncandidate: {report.candidate}"), file=sys.stderr)
    return fitted_runs_table(report, terminal_width())


def _two_runs(ids: list[str], baseline: str | None, candidate: str | None) -> tuple[tuple[str, str], tuple[str, str]]:
    """BASELINE [CANDIDATE] as positional arguments (as hyperfine and asv take them) or --baseline
    and --candidate; not both ways at once. Then the two runs, and how each was given (an error
    about one names it so)."""
    if len(ids) > 2:
        raise UsageError(
            f"compare runs takes two runs, got {len(ids)}: {' '.join(ids)}", "winml compare runs BASELINE CANDIDATE"
        )
    if ids and baseline is not None:
        raise UsageError(f"the baseline is named twice: {ids[0]!r} and --baseline {baseline!r}", "give it one way")
    if len(ids) == 2 and candidate is not None:
        raise UsageError(f"the candidate is named twice: {ids[1]!r} and --candidate {candidate!r}", "give it one way")
    baseline = ids[0] if ids else baseline
    if baseline is None:
        raise UsageError(
            "compare runs needs a baseline",
            "winml compare runs BASELINE [CANDIDATE] (e.g. winml compare runs previous latest), or --baseline RUN",
        )
    runs = baseline, (ids[1] if len(ids) == 2 else candidate or "latest")
    return runs, ("BASELINE" if ids else "--baseline", "--candidate" if candidate is not None else "CANDIDATE")
