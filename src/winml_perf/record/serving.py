"""The record of a serving cell (``winml serve``): one route at one load point over its invocations.

A CellRecord as every cell has (route, shape, policy, load phases, memory, environment), with no
per-iteration samples and its figures in the typed ``serving`` section (model/serving.py): per
figure the estimate and 95 % interval over invocations (stats/serving.py), the saturation verdict
of each invocation and of the cell (saturated when most invocations were), the Engine's
capabilities and speculative statistics. Its headline scalars are prefixed ``serve_`` so that no
reader takes them for a single-stream cell's figures.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from winml_perf.model.cell_status import CellStatus
from winml_perf.model.record import CellRecord
from winml_perf.model.record_context import Environment, Prompt
from winml_perf.model.record_measures import Memory
from winml_perf.model.record_sections import Headline, Policy, RecordSamples, Shape
from winml_perf.model.result import LoadPhases
from winml_perf.model.serving import SERVING_PRIMARY, LoadSpec, ServedInvocation, ServingSection, Slo
from winml_perf.model.spec import IterationPolicy, RouteSpec, WarmupPolicy
from winml_perf.record.bundle_identity import bundle_id
from winml_perf.stats import serving as S

#: The figures a cell's headline carries (estimates over invocations), besides the counts.
HEADLINE = (
    "output_tokens_per_s",
    "requests_per_s",
    "goodput_requests_per_s",
    "ttft_ms_p50",
    "ttft_ms_p99",
    "tpot_ms_p50",
    "tpot_ms_p99",
    "itl_ms_p99",
    "e2e_ms_p50",
    "queue_ms_p50",
    "batch_occupancy_mean",
)

#: Speculative decoding statistics kept in the record (the Engine reports ~60 keys, mostly zeros).
SPECULATIVE_KEYS = ("rounds", "draft_tokens_proposed", "draft_tokens_accepted", "acceptance_rate", "observed_speedup")


def speculative_summary(served: Sequence[ServedInvocation]) -> dict[str, Any]:
    """Whether the Engine drafted tokens (speculative decoding) for this cell, and its figures."""
    stats = [s.speculative for s in served if s.speculative]
    if not stats:
        return {"offered": False, "note": "no speculative statistics from this server"}
    used = any((st.get("rounds") or 0) > 0 or (st.get("draft_tokens_proposed") or 0) > 0 for st in stats)
    if not used:
        return {
            "offered": False,
            "note": "the Engine ran no speculative rounds: this bundle has no draft model or MTP head configured",
            "target_forward_passes": [st.get("target_forward_passes") for st in stats],
        }
    return {"offered": True, **{k: [st.get(k) for st in stats] for k in SPECULATIVE_KEYS}}


def serving_section(
    load: LoadSpec,
    slo: Slo,
    served: Sequence[ServedInvocation],
    capabilities: Mapping[str, Any],
    note: str | None,
) -> ServingSection:
    per = [S.invocation_figures(s.requests, s.steps, slo) for s in served]
    verdicts = [S.saturation(s.requests, s.steps, load.rate_per_s) for s in served]
    saturated = sum(1 for v in verdicts if v.get("saturated"))
    cell_verdict: dict[str, Any] = {
        "saturated": saturated * 2 > len(verdicts),
        "invocations_saturated": saturated,
        "invocations": len(verdicts),
        "per_invocation": verdicts,
    }
    cell_verdict["verdict"] = verdicts[0]["verdict"] if verdicts else ""
    if load.mode == "open" and verdicts:
        shown = next((i for i, v in enumerate(verdicts) if v.get("saturated")), 0)
        cell_verdict["verdict"] = (
            f"{verdicts[shown]['verdict']} (invocation {shown + 1}; saturated in {saturated} of {len(verdicts)})"
        )
    server = served[0].server if served else "engine"
    return ServingSection(
        load,
        slo,
        server,
        note,
        dict(capabilities),
        S.over_invocations(per),
        cell_verdict,
        tuple(served),
        speculative_summary(served),
    )


def serving_record(
    *,
    run_id: str,
    index: int,
    route: RouteSpec,
    section: ServingSection,
    model_load_ms: float | None,
    memory: Mapping[str, Any],
    environment: Mapping[str, Any],
    sweep: Mapping[str, Any],
    started_utc: str,
    finished_utc: str,
) -> CellRecord:
    load = section.load
    k = len(section.invocations)
    scalars: dict[str, Any] = {
        "primary_metric": SERVING_PRIMARY,
        "iterations": 0,
        "warmup_iterations": 0,
        "invocations": k,
        "serve_requests": load.requests * k,
    }
    for name in HEADLINE:
        scalars[f"serve_{name}"] = section.figure(name)
    good = section.figures.get("goodput_requests_per_s") or {}
    scalars["primary_ci95_low"], scalars["primary_ci95_high"] = good.get("low"), good.get("high")
    scalars["serve_saturation"] = (
        "saturated" if section.saturation.get("saturated") else "keeps up" if load.mode == "open" else "not judged"
    )
    policy = Policy.of(
        WarmupPolicy(count=1),
        IterationPolicy(iterations=load.requests, invocations=max(1, k)),
        None,
        route.session,
        {**sweep, "load": load.to_dict()},
    )
    wall = sum(s.wall_s for s in section.invocations)
    return CellRecord(
        run_id=run_id,
        cell_id=uuid.uuid4().hex,
        cell_key=f"{route.label}|{load.key}|p{load.prompt_tokens.text}|n{load.max_new_tokens.text}",
        cell_index=index,
        status=CellStatus.OK,
        runtime=route.session.runtime,
        bundle=route.bundle,
        bundle_id=bundle_id(route.bundle),
        route=route.recorded_route,
        shape=Shape(
            load.prompt_tokens.low if load.prompt_tokens.fixed else None,
            load.max_new_tokens.low if load.max_new_tokens.fixed else None,
        ),
        prompt=Prompt.from_dict({"mode": "synthetic", "seed": load.seed, "lengths": load.prompt_tokens.text}),
        policy=policy,
        load=LoadPhases(
            plugin_registration_ms=route.recorded_route.plugin_registration_ms,
            prepare_ms=route.prepare_ms,
            compile_ms=route.compile_ms,
            model_load_ms=model_load_ms,
        ),
        samples=RecordSamples(),
        metrics={},
        summary=Headline(scalars),
        memory=Memory.from_dict(
            {**dict(memory), "peak_rss_bytes_per_invocation": [s.peak_rss_bytes for s in section.invocations]}
        ),
        environment=Environment.from_dict(dict(environment)),
        stop_reason="iterations",  # a fixed count: every request of the load point served
        started_utc=started_utc,
        finished_utc=finished_utc,
        wall_s=wall,
        measure_s=wall,
        serving=section,
        warnings=route_warnings(route),
    )


def route_warnings(route: RouteSpec) -> tuple[Any, ...]:
    """What a route's cells warn of before any request: a forced stage that runs partly on CPU (from
    its placement), as `winml perf` warns (serve takes no --strict)."""
    from winml_perf.record.build import record_warning
    from winml_perf.record.warnings import check_partial_fallback

    return tuple(record_warning(w) for w in check_partial_fallback(route.label, route.recorded_route, strict=False))
