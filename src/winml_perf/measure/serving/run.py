"""``winml serve``'s run: resolve and prepare the routes (the same route/derive machinery as
``winml perf``), refuse routes the Engine cannot serve before anything is measured, then for each
invocation run every route in a fresh child (seeded shuffled order per invocation) that serves all
the load points, and finally build each (route, load point) cell and store it.

Where the Engine refuses a route: exit 2 naming why, unless ``fallback`` allows batch-1 generators
stepped in turn, which the record and the table label ``batch1-generators``.
"""

from __future__ import annotations

import random
import signal
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from winml_perf.measure.orchestrate import PerfRequest, RouteRequest
from winml_perf.measure.prepare import prepared_routes
from winml_perf.measure.serving.child import ServingJob, ServingReply, child_main
from winml_perf.model.defaults import DEFAULTS
from winml_perf.model.serving import Lengths, LoadSpec, ServedInvocation, Slo
from winml_perf.model.spec import RouteSpec
from winml_perf.support.errors import BenchmarkFailure, StoreError, UsageError

if TYPE_CHECKING:
    from winml_perf.results.store import Store

FALLBACK_REMEDY = (
    "pass --fallback batch1 to serve it with batch-1 generators stepped in turn (labelled batch1-generators, "
    "not batched), or serve another route"
)


@dataclass(frozen=True)
class ServeRequest:
    path: Path
    routes: tuple[RouteRequest, ...] = (RouteRequest(),)
    ep_libraries: tuple[str, ...] = ()
    ep_options: tuple[tuple[str, str], ...] = ()
    concurrency: tuple[int, ...] = ()
    rates: tuple[float, ...] = ()
    requests: int = 16
    prompt_tokens: Lengths | None = None  # None: DEFAULTS.prompt_tokens, or a static pipeline's length
    max_new_tokens: Lengths = Lengths(32, 32)
    slo: Slo = Slo(200.0, 50.0)
    invocations: int = 3
    seed: int = 0
    sequential_baseline: bool = True
    fallback: bool = False
    quiet: bool = False
    store: str | None = None
    no_store: bool = False
    invocation_timeout_s: float = 600.0

    def loads(self) -> tuple[LoadSpec, ...]:
        if not self.concurrency and not self.rates:
            raise UsageError("no load to serve", "give --concurrency 1,4 and/or --request-rate 2,8/s")
        prompt = self.prompt_tokens or Lengths(DEFAULTS.prompt_tokens, DEFAULTS.prompt_tokens)
        common = (self.requests, prompt, self.max_new_tokens)
        out: list[LoadSpec] = []
        if self.sequential_baseline and self.concurrency:
            out.append(LoadSpec("sequential", *common, seed=self.seed))
        out += [LoadSpec("closed", *common, concurrency=c, seed=self.seed) for c in self.concurrency]
        out += [LoadSpec("open", *common, rate_per_s=r, seed=self.seed) for r in self.rates]
        return tuple(out)


@dataclass
class ServeOutcome:
    run: Any  # RunRecord
    routes: list[RouteSpec]
    store: str | None = None
    store_errors: list[str] = field(default_factory=list)
    interrupted: int | None = None  # the signal that stopped serving: the cells are the finished invocations'
    served: dict[str, int] = field(default_factory=dict)  # invocations served, by route label


def refuse_unservable(routes: Sequence[RouteSpec], fallback: bool) -> dict[str, str]:
    """Routes whose genai_config.json the Engine refuses: exit 2 naming the route and why, unless the
    fallback is allowed (then their notes, by label)."""
    from winml_perf.session.genai_engine import engine_refusal
    from winml_perf.support.json_input import read_json

    notes: dict[str, str] = {}
    for r in routes:
        config_path = Path(r.session.path) / "genai_config.json"
        why = engine_refusal(read_json(config_path))
        if why is None:
            continue
        if not fallback:
            raise UsageError(f"route {r.label} ({config_path}): {why}", FALLBACK_REMEDY)
        notes[r.label] = why
    return notes


def serve_invocation(route: RouteSpec, job: ServingJob, timeout_s: float) -> ServingReply:
    """One invocation of one route in a fresh child; exit 2 (UsageError) where the Engine refused it."""
    from winml_perf.ep.child import ChildContext, Worker

    worker = Worker(child_main, (job,), ChildContext.from_parent(route.session.plugin_libraries), "winml-serve")
    status, payload = "error", "no reply"
    try:
        if not worker.conn.poll(timeout_s):
            worker.kill()
            raise BenchmarkFailure(
                f"route {route.label}: invocation {job.invocation} did not finish in {timeout_s:g} s",
                "serve fewer --requests or shorter lengths",
            )
        try:
            status, payload = worker.conn.recv()
        except EOFError:
            status, payload = "died", ""
    except KeyboardInterrupt:  # the child ignores SIGINT (ep/child.py): end it now, not after the grace below
        worker.kill()
        raise
    finally:
        ended = worker.end(5.0, True)
    if status == "died":
        raise BenchmarkFailure(
            f"route {route.label}: the measuring child died ({ended.text})",
            "run the route alone with winml perf to see where it fails",
        )
    if status == "refused":
        raise UsageError(f"route {route.label}: {payload}", FALLBACK_REMEDY)
    if status != "ok":
        raise BenchmarkFailure(f"route {route.label}: serving failed: {str(payload).splitlines()[0]}", "see above")
    assert isinstance(payload, ServingReply)
    return payload


def _say(quiet: bool, text: str) -> None:
    if not quiet:
        print(text, file=sys.stderr, flush=True)


def at_static_prompt(config: Any, req: ServeRequest) -> ServeRequest:
    """A bundle whose prompt stage takes exactly S tokens is served at S (a note says so) and
    refuses any other prompt length (exit 2), as `winml perf` does."""
    from dataclasses import replace

    asked = None if req.prompt_tokens is None else (req.prompt_tokens.low, req.prompt_tokens.high)
    static = config.static_prompt(asked, None if req.prompt_tokens is None else req.prompt_tokens.text)
    if static is None or req.prompt_tokens is not None:
        return req
    stage, length = static
    _say(req.quiet, f"note: stage `{stage}` of {req.path} has a static prompt length of {length} tokens: serving at it")
    return replace(req, prompt_tokens=Lengths(length, length))


def run_serving(req: ServeRequest, argv: Sequence[str] | None = None) -> ServeOutcome:
    """Prepare, serve and store (module doc). While a forced route serves from a derived folder the
    cache root is held, so `bundle clean` waits for the run instead of removing the folder under it."""
    from winml_perf.bundle.config import ConfigBook
    from winml_perf.ep.resolved import resolve_request
    from winml_perf.measure.validate import check_fits
    from winml_perf.results.store import open_store

    configs = ConfigBook()  # the bundle's config and each derived one's, read once and handed down
    config = configs.of(req.path)
    req = at_static_prompt(config, req)  # bundle errors (exit 2) before anything else
    loads = req.loads()
    longest = loads[0].prompt_tokens.high, loads[0].max_new_tokens.high  # every load point has the same lengths
    check_fits(config.raw, Path(req.path) / "genai_config.json", *longest, in_flight=max(req.concurrency, default=1))
    if req.invocations < 1:
        raise UsageError(f"--invocations must be 1 or more, got {req.invocations}", "e.g. --invocations 3")
    perf_req = PerfRequest(
        path=req.path,
        routes=req.routes,
        ep_libraries=req.ep_libraries,
        ep_options=req.ep_options,
        seed=req.seed,
        quiet=req.quiet,
        equivalence=False,
    )
    # every route resolved once; forced is read from them
    resolved = resolve_request(
        perf_req.routes, perf_req.runtime_value, perf_req.ep_options, perf_req.compile, perf_req.ep_libraries
    )
    with prepared_routes(perf_req, resolved, configs) as routes:
        notes = refuse_unservable(routes, req.fallback)  # exit 2 before the store is touched
        store = None if req.no_store else open_store(req.store)  # one it cannot open: exit 2 before serving
        try:
            return _serve(req, argv, loads, routes, notes, store)
        finally:
            if store is not None:
                store.close()


def _serve(
    req: ServeRequest,
    argv: Sequence[str] | None,
    loads: tuple[LoadSpec, ...],
    routes: list[RouteSpec],
    notes: dict[str, str],
    store: Store | None,
) -> ServeOutcome:
    """Serve every load on every route and build the cells (``notes``: what refuse_unservable said of
    each route); store them in ``store``, open already (None with --no-store)."""
    from winml_perf.measure.cell_progress import utc_now
    from winml_perf.record.build import new_run_id, run_record
    from winml_perf.record.environment import collect_environment

    started = utc_now()
    run_id = new_run_id()
    environment = collect_environment()
    replies: dict[str, list[ServingReply]] = {r.label: [] for r in routes}
    orders: list[list[str]] = []
    interrupted = _serve_invocations(req, loads, routes, replies, orders)
    rounds = min(len(replies[r.label]) for r in routes)  # rounds every route finished (all, unless interrupted)
    served = [[label for label in o if len(replies[label]) > i] for i, o in enumerate(orders)]
    orders = [o for o in served if o]  # as served: an interrupted last round keeps the routes it finished
    routes = [r for r in routes if replies[r.label]]  # interrupted: the routes with a finished invocation
    lengths = loads[0].prompt_tokens, loads[0].max_new_tokens
    sweep = {
        "command": "serve",
        "routes": [r.label for r in routes],
        "prompt_tokens": sorted({lengths[0].low, lengths[0].high}),  # a range: its bounds
        "max_new_tokens": sorted({lengths[1].low, lengths[1].high}),
        "cell_count": len(routes) * len(loads),
        "rounds": rounds,  # one fresh child per route per invocation
        "seed": req.seed,
        "isolate": True,
        "order": [{"group": 0, "round": i, "order": o} for i, o in enumerate(orders)],
        "loads": [ld.to_dict() for ld in loads],
        "slo": req.slo.to_dict(),
        "invocations": req.invocations,
        **({"interrupted": signal.Signals(interrupted).name} if interrupted else {}),
    }
    cells = serving_cells(
        routes, loads, replies, req.slo, notes, run_id=run_id, environment=environment, sweep=sweep, started=started
    )
    run = run_record(
        cells,
        run_id=run_id,
        environment=environment,
        started_utc=started,
        finished_utc=utc_now(),
        sweep=sweep,
        argv=argv,
    )
    if interrupted:  # not every planned invocation ran: the run is no night to compare as a whole
        from dataclasses import replace

        from winml_perf.model.cell_status import CellStatus

        run = replace(run, status=CellStatus.FAILED)
    outcome = ServeOutcome(
        run, routes, interrupted=interrupted, served={r.label: len(replies[r.label]) for r in routes}
    )
    if store is not None:
        outcome.store = store.display
        for cell in cells:
            try:
                store.write_record(cell)
            except StoreError as exc:
                outcome.store_errors.append(f"{cell.cell_key}: {exc}")
    return outcome


def _serve_invocations(
    req: ServeRequest,
    loads: tuple[LoadSpec, ...],
    routes: list[RouteSpec],
    replies: dict[str, list[ServingReply]],
    orders: list[list[str]],
) -> int | None:
    """Each invocation serves every route in a shuffled order (``orders``), a fresh child each; their
    replies into ``replies``. Interrupted: the signal's number, once an invocation has finished (what
    finished is kept); before that, the interrupt goes on up."""
    rng = random.Random(req.seed)
    try:
        for inv in range(req.invocations):
            order = list(routes)
            rng.shuffle(order)
            orders.append([r.label for r in order])
            for route in order:
                t0 = time.perf_counter()
                job = ServingJob(route.session, loads, inv, req.fallback, req.seed)
                replies[route.label].append(serve_invocation(route, job, req.invocation_timeout_s))
                _say(
                    req.quiet,
                    f"  {route.label}: invocation {inv + 1}/{req.invocations} served "
                    f"{len(loads)} load point(s) in {time.perf_counter() - t0:.1f} s",
                )
    except KeyboardInterrupt as exc:
        if not any(replies.values()):
            raise
        return int(getattr(exc, "signum", signal.SIGINT))
    return None


def serving_cells(
    routes: Sequence[RouteSpec],
    loads: Sequence[LoadSpec],
    replies: dict[str, list[ServingReply]],
    slo: Slo,
    notes: dict[str, str],
    *,
    run_id: str,
    environment: dict[str, Any],
    sweep: dict[str, Any],
    started: str,
) -> list[Any]:
    """One CellRecord per (route, load point) over the route's invocations (``replies``, in order);
    ``notes``: why a route is served by the fallback, by label."""
    from winml_perf.measure.cell_progress import utc_now
    from winml_perf.record.serving import serving_record, serving_section

    cells: list[Any] = []
    for route in routes:
        got = replies[route.label]
        for i, load in enumerate(loads):
            served: list[ServedInvocation] = [rep.served[i] for rep in got]
            note = next((rep.server_note for rep in got if rep.server_note), None) or notes.get(route.label)
            caps = next((rep.capabilities for rep in got if rep.capabilities), {})
            section = serving_section(load, slo, served, caps, None if load.mode == "sequential" else note)
            peaks = [s.peak_rss_bytes for s in served if s.peak_rss_bytes is not None]
            memory = {
                "peak_rss_bytes": max(peaks) if peaks else None,
                "scope": "the measuring child's RSS while this load point was served, highest over invocations",
            }
            load_ms = [rep.model_load_ms for rep in got if rep.model_load_ms is not None]
            cells.append(
                serving_record(
                    run_id=run_id,
                    index=len(cells),
                    route=route,
                    section=section,
                    model_load_ms=sorted(load_ms)[len(load_ms) // 2] if load_ms else None,
                    memory=memory,
                    environment=environment,
                    sweep=sweep,
                    started_utc=started,
                    finished_utc=utc_now(),
                )
            )
    return cells
