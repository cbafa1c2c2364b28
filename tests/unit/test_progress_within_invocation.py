"""Progress moves within an invocation and the closing line counts iterations per invocation, as
the table does (issue 28)."""

from __future__ import annotations

from tests.unit.fakes import FAKE_ENV, fake_spec, open_fake_session
from winml_perf.measure.sweep import CellExtras, RunFacts, run_sweep
from winml_perf.model.route import Route
from winml_perf.model.spec import IterationPolicy, RouteSpec, expand_sweep


class Recorder:
    def __init__(self) -> None:
        self.done: list[tuple[int, int | None]] = []
        self.summaries: list[str] = []

    def sweep_started(self, total_cells):
        pass

    def cell_started(self, key, planned):
        pass

    def cell_advanced(self, key, done, planned, metric, running_median):
        self.done.append((done, planned))

    def cell_finished(self, key, status, summary):
        self.summaries.append(summary)

    def sweep_finished(self):
        pass


def _run(progress: Recorder, iterations: int, invocations: int):
    routes = [RouteSpec("config", fake_spec(), route=Route("config", "config", "config"))]
    cells = expand_sweep(routes, [8], [4], iterations=IterationPolicy(iterations=iterations, invocations=invocations))
    return run_sweep(
        cells,
        open_fake_session,
        isolate=False,
        progress=progress,
        facts=RunFacts(environment=FAKE_ENV, argv=["perf"]),
        extras=CellExtras(roofline=False),
    )


def test_progress_moves_before_the_first_invocation_ends():
    progress = Recorder()
    _run(progress, iterations=6, invocations=2)
    first_done, planned = progress.done[0]
    assert planned == 12 and first_done < 6  # an update inside the first invocation, not at its end
    assert progress.done[-1] == (12, 12)


def test_the_closing_line_counts_iterations_per_invocation():
    progress = Recorder()
    run = _run(progress, iterations=4, invocations=3)
    assert "3 inv. x 4 it." in progress.summaries[0] and len(run.cells[0].samples.iterations) == 12


def test_the_bar_shows_the_time_remaining():
    import io

    from rich.console import Console
    from rich.progress import TimeRemainingColumn

    from winml_perf.measure.progress import RichProgress

    bar = RichProgress(console=Console(file=io.StringIO()))
    assert any(isinstance(c, TimeRemainingColumn) for c in bar._bar.columns)
