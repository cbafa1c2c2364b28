"""run_benchmark(request): wires validate -> resolve -> prepare -> judge -> sweep -> store. Nothing else.

Every route of one invocation is resolved and prepared before anything is measured, so a bad
route is an exit-2 error before minutes of measuring, and the routes then run interleaved.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from winml_perf.ep.route_request import RouteRequest as RouteRequest
from winml_perf.ep.route_request import parse_route as parse_route
from winml_perf.measure.request import PerfRequest as PerfRequest
from winml_perf.measure.validate import validate_request
from winml_perf.model.defaults import DEFAULTS
from winml_perf.model.record import CellRecord
from winml_perf.model.spec import CellSpec, PromptSpec, RouteSpec, expand_sweep
from winml_perf.support.errors import StoreError

if TYPE_CHECKING:
    from winml_perf.bundle.config import ConfigBook

DEFAULT_PROMPT_TOKENS = DEFAULTS.prompt_tokens


def _cells(req: PerfRequest, routes: Sequence[RouteSpec]) -> list[CellSpec]:
    if not req.token_based:
        return expand_sweep(
            routes, None, None, warmup=req.warmup, iterations=req.iterations, cell_timeout_s=req.cell_timeout_s
        )
    prompt_tokens = req.prompt_tokens
    if req.prompt is None and prompt_tokens is None:
        prompt_tokens = (DEFAULT_PROMPT_TOKENS,)
    prompt = PromptSpec(req.prompt, req.apply_template, req.seed)
    return expand_sweep(
        routes,
        prompt_tokens,
        req.max_new_tokens,
        prompt=prompt,
        warmup=req.warmup,
        iterations=req.iterations,
        cell_timeout_s=req.cell_timeout_s,
    )


@dataclass
class BenchmarkOutcome:
    run: Any  # RunRecord (of the finished cells only when interrupted)
    store: str | None = None  # where the records went (None with --no-store)
    store_errors: list[str] = field(default_factory=list)  # cells that could not be stored, with why
    interrupted: int | None = None  # the signal that stopped the sweep
    unstored_path: Path | None = None  # where the run record goes when cells could not be stored


def run_benchmark(
    req: PerfRequest, argv: Sequence[str] | None = None, on_cell: Callable[[Any], None] | None = None
) -> BenchmarkOutcome:
    """Check the request, resolve and prepare every route, measure the sweep, store each cell as it finishes.

    Each phase takes what the one before it made: the request is settled at a bundle's static
    prompt length (measure/request.py) and checked (measure/validate.py), its routes resolved once
    (ep/resolved.py), prepared from their resolved values with the artifact cache held for the run
    (measure/prepare.py), judged (measure/judge.py), expanded into cells and measured
    (measure/sweep.py). A cell that cannot be stored (a dropped database connection, say) does not
    stop the sweep: the error is kept in the outcome and the caller reports it once the run record
    is safe elsewhere."""
    from winml_perf.bundle.config import ConfigBook
    from winml_perf.ep.resolved import resolve_request
    from winml_perf.measure.judge import judged_routes
    from winml_perf.measure.prepare import prepared_routes

    configs = ConfigBook()  # every genai config the run reads, read once and handed down
    req = req.at_static_prompt(configs)  # a bundle's static prompt length (its bundle errors first)
    # what the bundle or machine cannot take: exit 2 now (the bundle's config from the run's book)
    validate_request(req, (DEFAULT_PROMPT_TOKENS,), configs.of(req.path) if req.token_based else None)
    resolved = resolve_request(req.routes, req.runtime_value, req.ep_options, req.compile, req.ep_libraries)
    with (
        prepared_routes(req, resolved, configs) as routes,  # no `bundle clean` under the run
        configs.reading(),  # equivalence and perplexity read the configs the run has read
    ):
        routes = judged_routes(req, routes)  # what judges them before the sweep (measure/judge.py)
        return _measure_and_store(req, _cells(req, routes), argv, on_cell, configs)


def _measure_and_store(
    req: PerfRequest,
    cells: list[CellSpec],
    argv: Sequence[str] | None,
    on_cell: Callable[[Any], None] | None,
    configs: ConfigBook,
) -> BenchmarkOutcome:
    from winml_perf.measure.progress import make_progress
    from winml_perf.measure.sweep import CellExtras, RunFacts, SweepInterrupted, run_sweep
    from winml_perf.results.locking import StoreLockTimeout

    store = None
    if not req.no_store:
        from winml_perf.record.validation import prepare_checks
        from winml_perf.results.store import open_store

        store = open_store(req.store)
        prepare_checks()  # before measuring: a fixed cost the records' check would pay after the last iteration

    outcome = BenchmarkOutcome(
        run=None,
        store=store.display if store is not None else None,
        unstored_path=store.location.unstored if store is not None else None,
    )
    lock_timed_out: list[str] = []

    def on_cell_done(record: CellRecord) -> None:
        if store is not None and lock_timed_out:  # one wait to the deadline is enough
            outcome.store_errors.append(f"{record.cell_key}: not tried ({lock_timed_out[0]})")
        elif store is not None:
            try:
                store.write_record(record)
            except StoreError as exc:
                outcome.store_errors.append(f"{record.cell_key}: {exc}")
                if isinstance(exc, StoreLockTimeout):
                    lock_timed_out.append(str(exc))
        if on_cell is not None:
            on_cell(record)

    try:
        outcome.run = run_sweep(
            cells,
            rounds=req.rounds,
            seed=req.seed,
            isolate=req.isolate,
            on_cell_done=on_cell_done,
            progress=make_progress(req.quiet),
            facts=RunFacts(argv=argv, series_label=req.series),
            extras=CellExtras(explain=req.explain, configs=configs),
        )
    except SweepInterrupted as exc:
        outcome.run, outcome.interrupted = exc.run, exc.signum
    finally:
        if store is not None:
            store.close()
    return outcome
