"""Turn what the runner measured (CellResult) into typed records (model/record.py): statistics,
headline numbers, warnings, output fingerprint, roofline. Pure functions of the samples."""

from __future__ import annotations

import hashlib
import math
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from winml_perf.model.cell_status import CellStatus
from winml_perf.model.metrics import DECODE_THROUGHPUT, ITL, POOLED, get, metric_values, session_metrics
from winml_perf.model.record import CellRecord, RunRecord
from winml_perf.model.record_context import Environment, Explain, Output, Prompt
from winml_perf.model.record_measures import Energy, Invocation, Memory, Roofline, Sustained, Uncertainty
from winml_perf.model.record_sections import Headline, MetricSummary, Policy, RecordSamples, RecordWarning, Shape
from winml_perf.model.result import CellResult
from winml_perf.model.sample import IterationSample
from winml_perf.model.spec import finite_or_none
from winml_perf.record import warnings as W
from winml_perf.record.bundle_identity import bundle_id
from winml_perf.record.warnings import check_same_output
from winml_perf.stats import Interval
from winml_perf.stats import cell_intervals as IV
from winml_perf.stats import sample_stats as stats

if TYPE_CHECKING:
    from winml_perf.bundle.config import ConfigBook


def new_run_id() -> str:
    return uuid.uuid4().hex


def cell_metrics(result: CellResult) -> dict[str, stats.Summary]:
    """Summary statistics of every metric this kind of session measures (model/metrics.py)."""
    return cell_statistics(result)[0]


def cell_statistics(result: CellResult) -> tuple[dict[str, stats.Summary], dict[str, Any]]:
    """Summaries of every metric (their CI: over invocations, see stats/cell_intervals.py) and the
    record's ``uncertainty`` section: the intervals with what they cover, the within-process
    interval, ITL percentile intervals."""
    samples = result.samples
    if not samples or not result.ok:  # a failed cell keeps its raw samples but states no numbers
        return {}, {}
    has_steps = any(s.decode_step_ms for s in samples)  # one new token per iteration: no decode steps
    out: dict[str, stats.Summary] = {}
    intervals: dict[str, Any] = {}
    section: dict[str, Any] = {"invocation_kind": result.invocation_kind}
    for m in session_metrics(result.cell.session.token_based):
        if m.needs_decode_steps and not has_steps:
            continue
        values = metric_values(samples, m.name)
        if m.optional and all(math.isnan(v) for v in values):
            continue
        if m.source == POOLED:
            pcts = IV.itl_percentiles(samples)
            generations = sum(1 for s in samples if s.decode_step_ms)
            section["itl_percentiles"] = [IV.percentile_dict(p, generations) for p in pcts]
            p50 = next(p for p in pcts if p.percentile == 50.0)
            out[m.name] = stats.summarize(values, interval=(p50.low, p50.high))
            continue
        interval = IV.metric_interval(samples, m.name)
        intervals[m.name] = interval_dict(interval)
        summary = stats.summarize(values, interval=(interval.low, interval.high))
        # the ± the stopping rule used: about the interval's own estimate (over invocations: their medians)
        out[m.name] = replace(summary, ci95_half_width_pct=interval.half_width_pct)
    primary = result.cell.primary_metric
    if primary in intervals:
        section["primary"] = intervals[primary]
        section["coverage"] = intervals[primary]["coverage"]
        section["label"] = IV.coverage_text(intervals[primary]["coverage"])
        section["within_process"] = interval_dict(IV.in_process_interval(samples, primary))
    section["metrics"] = intervals
    section["within_process_metrics"] = {
        name: interval_dict(IV.in_process_interval(samples, name)) for name in intervals
    }
    return out, section


def interval_dict(interval: Interval) -> dict[str, Any]:
    return {**interval.to_dict(), "half_width_pct": finite_or_none(interval.half_width_pct)}


def headline(
    result: CellResult, metrics: Mapping[str, stats.Summary], section: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """Flat scalars for tables and stores: medians (their CI for the primary metric), percentiles of pooled metrics."""
    primary = result.cell.primary_metric
    out: dict[str, Any] = {
        "primary_metric": primary,
        "iterations": len(result.samples),
        "warmup_iterations": len(result.warmup_samples),
    }
    for name, s in metrics.items():
        m = get(name)
        if m is not None and m.source == POOLED:
            for q in m.percentiles:
                out[f"{name}_{q}"] = finite_or_none(getattr(s, q))
        else:
            out[name] = finite_or_none(s.median)
    p = metrics.get(primary)
    out["primary_ci95_low"] = finite_or_none(p.ci95_low) if p else None
    out["primary_ci95_high"] = finite_or_none(p.ci95_high) if p else None
    out["primary_ci95_half_width_pct"] = finite_or_none(p.ci95_half_width_pct) if p else None
    out["primary_cv_pct"] = finite_or_none(p.cv_pct) if p else None
    section = section or {}
    out["invocations"] = len({s.invocation for s in result.samples})
    out["primary_ci95_covers"] = section.get("label")
    inproc = section.get("within_process") or {}
    out["primary_inproc_ci95_low"] = inproc.get("low")
    out["primary_inproc_ci95_high"] = inproc.get("high")
    for pct in section.get("itl_percentiles") or ():
        key = f"{ITL.name}_p{pct['percentile']:g}"
        out[f"{key}_ci95_low"], out[f"{key}_ci95_high"] = pct["low"], pct["high"]
    every = list(result.warmup_samples) + list(result.samples)
    out["prompt_tokens_total"] = sum(s.prompt_tokens or 0 for s in every)
    out["generated_tokens_total"] = sum(s.new_tokens or 0 for s in every)
    return out


def output_fingerprint(samples: Sequence[IterationSample]) -> dict[str, Any]:
    """Hash of the generated token ids: equal across routes means the same greedy output."""
    with_ids = [s.token_ids for s in samples if s.token_ids]
    if not with_ids:
        return {}
    first = with_ids[0]
    return {
        "tokens_sha256": hashlib.sha256(",".join(map(str, first)).encode()).hexdigest(),
        "first_token_ids": list(first[:16]),
        "identical_across_iterations": all(ids == first for ids in with_ids),
    }


def cell_warnings(
    result: CellResult, metrics: Mapping[str, stats.Summary], section: Mapping[str, Any] | None = None
) -> list[W.BenchWarning]:
    cell = result.cell
    out: list[W.BenchWarning] = []
    out += W.check_route_effect(cell.route_label, cell.recorded_route)
    out += check_same_output(cell.route_label, cell.recorded_route)
    out += W.check_partial_fallback(cell.route_label, cell.recorded_route)
    out += W.check_stage_eps(cell.recorded_route, result.route_actual)
    out += W.check_power_state(cell.route_label, result.energy.get("power_state_differs"))
    if not result.samples:
        return out
    primary = cell.primary_metric
    values = metric_values(result.samples, primary)
    if cell.session.token_based:
        expected_prompt = result.prompt_info.get("tokens", cell.prompt_tokens)
        out += W.check_token_counts(
            list(result.warmup_samples) + list(result.samples), expected_prompt, cell.max_new_tokens
        )
    sustained = cell.iterations.duration_s is not None
    out += W.check_cv(primary, values, sustained=sustained)
    out += W.check_slow_first([s.latency_ms for s in result.samples])
    out += W.check_outliers(primary, values)
    if result.ok:
        steps = [x for s in result.samples for x in s.decode_step_ms]
        out += (
            W.check_modes("decode steps", steps, sustained=sustained)
            if steps
            else W.check_modes("iteration latencies", [s.latency_ms for s in result.samples], sustained=sustained)
        )
        m = get(primary)
        out += W.check_drift(primary, IV.by_invocation(result.samples, primary), m.short_unit or m.unit if m else "")
    target = cell.iterations.target_ci_pct  # None: a fixed policy
    if target is not None and result.stop_reason not in (None, "ci_target") and result.status == "ok":
        half = (section or {}).get("primary", {}).get("half_width_pct")
        half = stats.ci_half_width_pct(values) if half is None else half
        out += W.ci_not_reached(primary, half, target, result.stop_reason, len(values))
    return out


def cell_record(
    result: CellResult,
    *,
    run_id: str,
    environment: Mapping[str, Any],
    policy_extra: Mapping[str, Any] | None = None,
    bandwidth: Mapping[str, Any] | None = None,
    keep_token_ids: bool = False,
    gpu_bandwidth: Mapping[str, Any] | None = None,
    series_label: str | None = None,
    configs: ConfigBook | None = None,
) -> CellRecord:
    """The self-contained record of one cell (``series_label``: winml perf --series). ``bandwidth``: cached_bandwidth() (the host's) to add a
    roofline; ``gpu_bandwidth``: nvidia_bandwidth() when a stage runs on an NVIDIA GPU; ``configs``: the
    genai configs the run read (the roofline reads the cell's bundle's from there)."""
    cell = result.cell
    metrics, section = cell_statistics(result)
    summary = headline(result, metrics, section)
    route = (
        replace(cell.recorded_route, actual=dict(result.route_actual)) if result.route_actual else cell.recorded_route
    )
    roof = None
    if bandwidth is not None and cell.session.token_based and result.ok:
        from winml_perf.record.decode_roofline import HOST, NVIDIA_GPU, decode_roofline
        from winml_perf.record.device_bandwidth import working_set_bandwidth

        prompt_tokens = result.prompt_info.get("tokens", cell.prompt_tokens)
        assert prompt_tokens is not None and cell.max_new_tokens is not None  # a token cell that ran has both
        roof = decode_roofline(
            summary.get(DECODE_THROUGHPUT.name),
            cell.session.path,
            route,
            prompt_tokens,
            cell.max_new_tokens,
            environment,
            {HOST: bandwidth, NVIDIA_GPU: gpu_bandwidth},
            working_set=working_set_bandwidth,
            config=configs.known(cell.session.path) if configs is not None else None,
        )
    sustained = sustained_section(result)
    return CellRecord(
        run_id=run_id,
        cell_id=uuid.uuid4().hex,
        cell_key=cell.key,
        cell_index=result.index,
        status=result.status,
        runtime=cell.session.runtime,
        bundle=cell.bundle,
        bundle_id=bundle_id(cell.bundle),
        series_label=series_label,
        route=route,
        shape=Shape(result.prompt_info.get("tokens", cell.prompt_tokens), cell.max_new_tokens, cell.prompt_tokens),
        prompt=Prompt.from_dict({**cell.prompt.to_dict(), **result.prompt_info}),
        policy=Policy.of(cell.warmup, cell.iterations, cell.cell_timeout_s, cell.session, dict(policy_extra or {})),
        load=result.load,
        samples=RecordSamples(result.warmup_samples, result.samples, keep_token_ids),
        metrics={k: MetricSummary.of(v) for k, v in metrics.items()},
        summary=Headline(summary),
        memory=Memory.from_dict(dict(result.memory)),
        environment=Environment.from_dict(dict(environment)),
        warnings=tuple(record_warning(w) for w in cell_warnings(result, metrics, section)),
        failure=result.failure,
        stop_reason=result.stop_reason,
        output=Output.from_dict(
            {**output_fingerprint(result.samples), **({"text": result.output_text} if result.output_text else {})}
        ),
        roofline=None if roof is None else Roofline.from_dict(roof),
        started_utc=result.started_utc,
        finished_utc=result.finished_utc,
        wall_s=result.wall_s,
        measure_s=result.measure_s,
        explain=Explain.from_dict(dict(result.explain)) if result.explain else None,
        invocations=tuple(Invocation.from_dict(f) for f in invocation_figures(result)),
        uncertainty=Uncertainty.from_dict(section),
        energy=Energy.from_dict(dict(result.energy)),
        sustained=None if sustained is None else Sustained.from_dict(sustained),
    )


def sustained_section(result: CellResult) -> dict[str, Any] | None:
    """A sustained run's series and findings (stats/series/sustained.py); None for other runs."""
    duration = result.cell.iterations.duration_s
    if duration is None or not result.timeline:
        return None
    from winml_perf.stats.series.sustained import analyse

    return analyse(result.timeline, duration)


def record_warning(w: W.BenchWarning) -> RecordWarning:
    """A warning as the record keeps it."""
    return RecordWarning(w.code, w.message, w.remedy, dict(w.data))


def invocation_figures(result: CellResult) -> list[dict[str, Any]]:
    """Per-invocation figures for the record, JSON-safe (no NaN)."""
    out = []
    for f in result.invocations:
        d = {k: (finite_or_none(v) if isinstance(v, float) else v) for k, v in f.items() if k != "medians"}
        d["medians"] = {k: finite_or_none(v) for k, v in (f.get("medians") or {}).items()}
        out.append(d)
    return out


def run_record(
    cells: Sequence[CellRecord],
    *,
    run_id: str,
    environment: Mapping[str, Any],
    started_utc: str,
    finished_utc: str,
    sweep: Mapping[str, Any],
    argv: Sequence[str] | None = None,
) -> RunRecord:
    """The run of ``cells``: a spooled view (record/cell_spool.py) stays one, anything else becomes a tuple."""
    from winml_perf.record.cell_spool import SpooledCells, ok_cells

    status = CellStatus.OK if cells and len(ok_cells(cells)) == len(cells) else CellStatus.FAILED
    return RunRecord(
        run_id=run_id,
        started_utc=started_utc,
        finished_utc=finished_utc,
        status=status,
        sweep=dict(sweep),
        environment=dict(environment),
        cells=cells if isinstance(cells, SpooledCells) else tuple(cells),
        argv=None if argv is None else tuple(argv),
    )
