"""Serving figures: pure functions over the requests and engine steps of a load point
(model/serving.py), as vLLM's ``benchmark_serving`` and GenAI-Perf define them.

* TTFT: from a request's arrival (when it was due, not when the harness got to it) to its first
  token; TPOT: (last token - first token) / (tokens - 1) per request; ITL: every gap between two
  tokens of a request, pooled over the requests; e2e: arrival to last token; queueing delay: arrival
  to the start of the engine step that produced its first token (that step ran its prompt).
* Throughput over the load point's makespan (first arrival to last token): output tokens/s,
  requests/s, and goodput: requests/s of those that met every SLO.
* Batch occupancy: requests that got a token in a step, weighted by the step's duration.
* Saturation (open loop): the queue grows over the run: the requests that arrived in the last third
  waited longer than those of the first third by more than ``QUEUE_GROWTH_FACTOR`` times and by
  more than one request's service time (the first third's median e2e less its queueing; at least
  one mean step), so the harness's own lateness on a busy machine is not taken for a queue; and the
  achieved request rate fell below the offered one by more than ``RATE_SHORTFALL``.
* Over invocations (fresh processes), each figure's interval is hierarchical.median_interval over
  the per-invocation values (Student t below 6 invocations); ratios between two servings measured in
  the same invocations are paired (paired.paired_ratio).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from winml_perf.model.serving import RequestTiming, Slo, StepPoint
from winml_perf.stats.hierarchical import median_interval
from winml_perf.stats.paired import RatioResult, paired_ratio

PERCENTILES = (50, 90, 99)
#: Latency figures, each reported at PERCENTILES.
LATENCIES = ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms", "queue_ms")
#: Aggregate figures of a load point (higher is better for all three rates).
RATES = ("output_tokens_per_s", "requests_per_s", "goodput_requests_per_s")
#: The late third's median queueing delay must exceed the early third's by this factor...
QUEUE_GROWTH_FACTOR = 2.0
#: ...and the achieved request rate must fall short of the offered one by more than this fraction.
RATE_SHORTFALL = 0.10


def _pct(values: Sequence[float], q: float) -> float | None:
    finite = [v for v in values if v is not None and math.isfinite(v)]
    return float(np.percentile(np.asarray(finite), q)) if finite else None


def makespan_s(requests: Sequence[RequestTiming]) -> float:
    """First arrival to last token (0 when nothing was generated)."""
    done = [r.token_s[-1] for r in requests if r.token_s]
    if not done:
        return 0.0
    return max(done) - min(r.arrival_s for r in requests)


def occupancy(steps: Sequence[StepPoint]) -> tuple[float | None, int]:
    """Time-weighted mean batch occupancy over the steps, and the largest batch."""
    total = sum(s.end_s - s.start_s for s in steps)
    if not steps or total <= 0:
        return None, max((s.batch for s in steps), default=0)
    return sum(s.batch * (s.end_s - s.start_s) for s in steps) / total, max(s.batch for s in steps)


def invocation_figures(
    requests: Sequence[RequestTiming], steps: Sequence[StepPoint], slo: Slo
) -> dict[str, float | None]:
    """Every figure of one invocation of a load point (see the module doc); None where not defined."""
    out: dict[str, float | None] = {}
    per: dict[str, list[float]] = {
        "ttft_ms": [r.ttft_ms for r in requests if r.ttft_ms is not None],
        "tpot_ms": [r.tpot_ms for r in requests if r.tpot_ms is not None],
        "itl_ms": [x for r in requests for x in r.itl_ms],
        "e2e_ms": [r.e2e_ms for r in requests if r.e2e_ms is not None],
        "queue_ms": [r.queue_ms for r in requests],
    }
    for name in LATENCIES:
        for q in PERCENTILES:
            out[f"{name}_p{q}"] = _pct(per[name], q)
    span = makespan_s(requests)
    done = [r for r in requests if r.token_s]
    good = [r for r in done if slo.met(r.ttft_ms, r.tpot_ms, r.e2e_ms)]
    tokens = sum(r.generated for r in requests)
    out["output_tokens_per_s"] = tokens / span if span > 0 else None
    out["requests_per_s"] = len(done) / span if span > 0 else None
    out["goodput_requests_per_s"] = len(good) / span if span > 0 else None
    out["slo_met_pct"] = 100.0 * len(good) / len(requests) if requests else None
    out["makespan_s"] = span
    mean_batch, max_batch = occupancy(steps)
    out["batch_occupancy_mean"] = mean_batch
    out["batch_max"] = float(max_batch)
    out["steps"] = float(len(steps))
    return out


def over_invocations(per_invocation: Sequence[Mapping[str, float | None]]) -> dict[str, dict[str, Any]]:
    """Each figure's estimate and 95 % interval over the invocations (what it covers included)."""
    names = [k for k in per_invocation[0]] if per_invocation else []
    out: dict[str, dict[str, Any]] = {}
    for name in names:
        values = [v for v in (inv.get(name) for inv in per_invocation) if v is not None and math.isfinite(v)]
        if not values:
            out[name] = {"estimate": None, "low": None, "high": None, "invocations": 0}
            continue
        iv = median_interval([[v] for v in values])
        d = iv.to_dict()
        out[name] = {
            "estimate": d["estimate"],
            "low": d["low"],
            "high": d["high"],
            "method": d["method"],
            "invocations": len(values),
        }
    return out


def _median(values: Sequence[float]) -> float | None:
    return float(np.median(values)) if len(values) else None


def saturation(
    requests: Sequence[RequestTiming], steps: Sequence[StepPoint], rate_per_s: float | None
) -> dict[str, Any]:
    """Whether an open-loop load point saturated the route (module doc), with the figures the verdict
    rests on: the queueing delay of the first and last third of arrivals, the waiting count over the
    steps, and the offered against the achieved request rate. A closed loop is never called
    saturated: it admits a request only when one ends."""
    ordered = sorted(requests, key=lambda r: r.arrival_s)
    third = max(1, len(ordered) // 3)
    early = _median([r.queue_ms for r in ordered[:third]])
    late = _median([r.queue_ms for r in ordered[-third:]])
    span = makespan_s(ordered)
    achieved = len([r for r in ordered if r.token_s]) / span if span > 0 else None
    mean_step_ms = 1000.0 * float(np.mean([s.end_s - s.start_s for s in steps])) if steps else 0.0
    waiting = [s.waiting for s in steps]
    out: dict[str, Any] = {
        "offered_requests_per_s": rate_per_s,
        "achieved_requests_per_s": achieved,
        "queue_ms_first_third_p50": early,
        "queue_ms_last_third_p50": late,
        "waiting_max": max(waiting, default=0),
        "waiting_first_step": waiting[0] if waiting else 0,
        "mean_step_ms": mean_step_ms,
    }
    if rate_per_s is None:
        out.update(saturated=False, verdict="closed loop: not judged")
        return out
    service = _median([r.e2e_ms - r.queue_ms for r in ordered[:third] if r.e2e_ms is not None]) or 0.0
    out["service_ms_first_third_p50"] = service
    growing = (
        early is not None
        and late is not None
        and late > early * QUEUE_GROWTH_FACTOR
        and late - early > max(mean_step_ms, service)
    )
    short = achieved is not None and achieved < rate_per_s * (1.0 - RATE_SHORTFALL)
    out["queue_growing"] = bool(growing)
    out["saturated"] = bool(growing and short)
    if out["saturated"]:
        out["verdict"] = (
            f"saturated: {rate_per_s:g} req/s offered, {achieved:.3g} served; the queue grew from "
            f"{early:.3g} ms to {late:.3g} ms (first to last third of arrivals)"
        )
    else:
        out["verdict"] = "keeps up" + ("" if not growing else " (queue growing, rate met)")
    return out


def ratio(a: Sequence[float], b: Sequence[float], higher_is_better: bool = True) -> RatioResult:
    """A over B, paired by invocation (the same invocation ran both), with its interval."""
    return paired_ratio([[x] for x in a], [[y] for y in b], higher_is_better=higher_is_better)
