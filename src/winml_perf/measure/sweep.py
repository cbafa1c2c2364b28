"""run_sweep: run cells (interleaved, optionally isolated) and hand back records as they finish."""

from __future__ import annotations

import gc
import signal
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from winml_perf.measure.cell_progress import utc_now
from winml_perf.measure.progress import Progress
from winml_perf.measure.runner import SweepRunner
from winml_perf.model.cell_status import CellStatus
from winml_perf.model.record import CellRecord, RunRecord
from winml_perf.model.result import CellResult
from winml_perf.model.spec import CellSpec
from winml_perf.record.build import cell_record, new_run_id, run_record
from winml_perf.record.cell_spool import CellSpool
from winml_perf.record.device_bandwidth import HOST, NVIDIA_GPU, UNKNOWN, RouteDevices, route_devices, run_devices
from winml_perf.session.factory import open_session
from winml_perf.support.errors import Interrupted

if TYPE_CHECKING:
    from winml_perf.bundle.config import ConfigBook


class SweepInterrupted(Interrupted):
    """A signal stopped the sweep; ``run`` is the run record of the cells that finished."""

    def __init__(self, run: RunRecord, signum: int) -> None:
        super().__init__(signum)
        self.run = run


@contextmanager
def collector_paused() -> Iterator[None]:
    """The cyclic collector off while a cell's record is built and stored: its 10^5 samples become
    millions of new objects, and the passes those trigger walk every live object (~0.1 s at 5,000
    iterations) to free nothing. Reference counting frees as usual; the collector resumes after."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def route_meters(
    cells: Sequence[CellSpec], environment: Mapping[str, Any], given: Mapping[str, Any] | None = None
) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """Each route's energy meter (the meters covering the devices its stages ran on, read as one
    counter) and a note: what it covers, or why there is none. ``given``: route label -> meter (tests)."""
    return _meters_of(cells, route_devices(cells, environment), given)


def _meters_of(
    cells: Sequence[CellSpec], stages: RouteDevices, given: Mapping[str, Any] | None
) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """route_meters of the stages' devices the run decided (record/device_bandwidth.py)."""
    from winml_perf.power.meters import CPU, GPU, SumMeter, meters_for

    meters: dict[str, Any] = {}
    notes: dict[str, dict[str, Any]] = {}
    for cell in cells:
        label = cell.route_label
        if label in notes:
            continue
        devices: list[str] = []
        if given is not None:
            found, why = ([given[label]], []) if label in given else ([], ["no meter given for this route"])
        elif not cell.session.token_based:
            found, why = [], ["energy per token is measured for generation sessions only"]
        else:
            kinds = {_meter_device(ep, stage.device) for ep, stage in stages[label]}
            device = {HOST: CPU, NVIDIA_GPU: GPU, GPU: GPU}
            if not kinds or any(k not in device for k in kinds):
                found, why = [], [f"the route's stages run on a device no meter here covers ({sorted(kinds)})"]
            else:
                found, why = [], []
                devices = sorted({device[k] for k in kinds})
                for kind in sorted(kinds):
                    ok, no = meters_for(device[kind])
                    found, why = found + ok, why + no
        if why or not found:
            notes[label] = {"why_not": "; ".join(why) or "no energy meter"}
            continue
        meter = found[0] if len(found) == 1 else SumMeter(found)
        meters[label] = meter
        notes[label] = {
            "name": meter.name,
            "covers": meter.covers,
            "resolution_j": meter.resolution_j,
            "update_period_s": meter.update_period_s,
            "devices": devices,
        }
    return meters, notes


def _meter_device(ep: str | None, device: str) -> str:
    """The stage's device for choosing a meter: as stage_device found it, or, where ep_devices did
    not name the adapter, a GPU for an EP whose only device class is gpu (WebGPU: its board's meter)."""
    from winml_perf.ep import table as eps

    if device == UNKNOWN and ep and eps.is_known_ep(ep) and eps.ep_info(ep).devices == ("gpu",):
        return "gpu"
    return device


def _explainer(enabled: bool) -> Callable[..., dict[str, Any]] | None:
    if not enabled:
        return None
    from winml_perf.measure.explain_cell import explain_cell

    return explain_cell


def _unique(values: Iterable[Any]) -> list[Any]:
    seen: list[Any] = []
    for v in values:
        if v not in seen:
            seen.append(v)
    return seen


def _sweep_section(
    cells: Sequence[CellSpec],
    routes: list[Any],
    extra: Mapping[str, Any],
    order: Sequence[Mapping[str, Any]],
    bandwidths: tuple[Mapping[str, Any] | None, Mapping[str, Any] | None],
    interrupted: str | None,
) -> dict[str, Any]:
    """The run record's sweep section: what was swept, in which order, against which bandwidths."""
    bandwidth, gpu_bandwidth = bandwidths
    return {
        "routes": routes,
        "prompt_tokens": _unique(c.prompt_tokens for c in cells),
        "max_new_tokens": _unique(c.max_new_tokens for c in cells),
        "cell_count": len(cells),
        **extra,
        "order": [dict(o) for o in order],
        "bandwidth": None if bandwidth is None else dict(bandwidth),
        **({"gpu_bandwidth": dict(gpu_bandwidth)} if gpu_bandwidth else {}),
        **({"interrupted": interrupted} if interrupted else {}),
    }


@dataclass(frozen=True)
class RunFacts:
    """What the run record says of the run besides its cells. ``environment``: collect_environment()
    of this run (collected by run_sweep when None); ``run_id`` (a new one when None); ``argv``: the
    command line; ``series_label``: winml perf --series NAME, recorded with every cell (the series it
    belongs to)."""

    environment: Mapping[str, Any] | None = None
    run_id: str | None = None
    argv: Sequence[str] | None = None
    series_label: str | None = None


@dataclass(frozen=True)
class CellExtras:
    """What each cell measures and keeps besides its timings. ``roofline``: decode's fraction of the
    memory-bandwidth bound (bandwidth measured once per machine, cached); ``sample_memory``: RSS
    sampled while it runs; ``keep_token_ids``: the generated ids in the record; ``explain``: after the
    measured iterations, its route profiled apart (measure/explain_cell.py); ``energy_meters``: route
    label -> EnergyMeter to use instead of the host's (tests); ``configs``: the genai configs the run
    read (bundle/config.ConfigBook), so the roofline does not read a bundle's again."""

    roofline: bool = True
    sample_memory: bool = True
    keep_token_ids: bool = False
    explain: bool = False
    energy_meters: Mapping[str, Any] | None = None
    configs: ConfigBook | None = None


def run_sweep(
    cells: Sequence[CellSpec],
    session_factory: Callable[..., Any] = open_session,
    rounds: int | None = None,
    seed: int = 0,
    isolate: bool | None = None,
    on_cell_done: Callable[[CellRecord], None] | None = None,
    *,
    progress: Progress | None = None,
    facts: RunFacts | None = None,
    extras: CellExtras | None = None,
) -> RunRecord:
    """Measure every cell and return the run's record; ``on_cell_done(record)`` is called as soon as
    each cell is final (store it there); the run's cells are then kept on disk and decoded when
    read (record/cell_spool.py), so memory does not grow with them. ``isolate=None`` isolates when there is more than one route.
    ``facts``: what the record says of the run (RunFacts); ``extras``: what each cell measures besides
    its timings (CellExtras; by default the roofline and memory samples)."""
    facts, extras = facts or RunFacts(), extras or CellExtras()
    cells = list(cells)
    routes = _unique(c.route_label for c in cells)
    if isolate is None:
        isolate = len(routes) > 1 or any(c.iterations.multi_invocation for c in cells)
    environment = facts.environment
    if environment is None:
        from winml_perf.record.environment import collect_environment

        environment = collect_environment()
    run_id = facts.run_id or new_run_id()
    started = utc_now()
    devices = run_devices(cells, environment, extras.roofline)  # each stage's memory and its bandwidth, once
    invocations = (
        max((c.iterations.max_invocations if c.iterations.adaptive else c.iterations.invocations) for c in cells)
        if cells
        else 1
    )
    extra = {"rounds": rounds, "seed": seed, "isolate": isolate, "invocations": invocations}
    spool = CellSpool()  # finished cells on disk: memory flat in the number of cells (issue 36)

    def on_result(result: CellResult) -> None:
        with collector_paused():
            rec = cell_record(
                result,
                run_id=run_id,
                environment=environment,
                policy_extra=extra,
                bandwidth=devices.host,
                keep_token_ids=extras.keep_token_ids,
                gpu_bandwidth=devices.gpu,
                series_label=facts.series_label,
                configs=extras.configs,
            )
            spool.append(rec)
            if on_cell_done is not None:
                on_cell_done(rec)

    runner = SweepRunner(
        cells,
        session_factory,
        rounds=rounds,
        seed=seed,
        isolate=isolate,
        progress=progress,
        on_result=on_result,
        sample_memory=extras.sample_memory,
        explainer=_explainer(extras.explain),
        meters=_meters_of(cells, devices.routes, extras.energy_meters),
    )

    def record(order: Sequence[Mapping[str, Any]], interrupted: str | None = None) -> RunRecord:
        sweep = _sweep_section(cells, routes, extra, order, (devices.host, devices.gpu), interrupted)
        run = run_record(
            spool.cells(),
            run_id=run_id,
            environment=environment,
            started_utc=started,
            finished_utc=utc_now(),
            sweep=sweep,
            argv=facts.argv,
        )
        return replace(run, status=CellStatus.FAILED) if interrupted else run  # not every planned cell ran

    try:
        outcome = runner.run()
    except KeyboardInterrupt as exc:
        signum = getattr(exc, "signum", signal.SIGINT)
        raise SweepInterrupted(record(runner.order_so_far, signal.Signals(signum).name), signum) from exc
    return record(outcome.order)
