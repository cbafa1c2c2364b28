"""Typed warnings about a measurement, each with a remedy (after hyperfine's warnings.rs).

Each ``check_*`` is a pure function of values already measured; it returns a list (empty when all
is well) so callers can concatenate them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from winml_perf.model.route import CPU, Route
from winml_perf.stats import detect_drift, detect_modes
from winml_perf.stats import sample_stats as stats
from winml_perf.support.human_numbers import fixed, human

#: Coefficient of variation above which a cell's numbers are called unstable.
CV_THRESHOLD_PCT = 5.0

HIGH_CV = "high_cv"
SLOW_FIRST_ITERATION = "slow_first_iteration"
ROUTE_NO_EFFECT = "route_no_effect"
TOKEN_COUNT_MISMATCH = "token_count_mismatch"
EP_MISMATCH = "ep_mismatch"
CI_TARGET_NOT_REACHED = "ci_target_not_reached"
OUTLIERS = "outliers"
OUTPUT_MISMATCH = "output_mismatch"
PARTIAL_CPU_FALLBACK = "partial_cpu_fallback"
BIMODAL = "bimodal"
DRIFT = "drift"
POWER_STATE_DIFFERS = "power_state_differs"
CODES = (
    HIGH_CV,
    SLOW_FIRST_ITERATION,
    ROUTE_NO_EFFECT,
    TOKEN_COUNT_MISMATCH,
    EP_MISMATCH,
    CI_TARGET_NOT_REACHED,
    OUTLIERS,
    OUTPUT_MISMATCH,
    PARTIAL_CPU_FALLBACK,
    BIMODAL,
    DRIFT,
    POWER_STATE_DIFFERS,
)


@dataclass(frozen=True)
class BenchWarning:
    code: str
    message: str
    remedy: str
    data: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "remedy": self.remedy, "data": dict(self.data)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> BenchWarning:
        return cls(d["code"], d["message"], d["remedy"], dict(d.get("data") or {}))

    def __str__(self) -> str:
        return f"{self.message}; {self.remedy}"


def check_cv(
    metric: str, values: Sequence[float], threshold_pct: float = CV_THRESHOLD_PCT, sustained: bool = False
) -> list[BenchWarning]:
    """``sustained``: a --duration run, whose remedy names no flag it refuses (--target-ci)."""
    cv = stats.cv_pct(values)
    if math.isnan(cv) or cv <= threshold_pct:
        return []
    return [
        BenchWarning(
            HIGH_CV,
            f"{metric} varied a lot between iterations (CV {fixed(cv)} % > {threshold_pct:g} %)",
            "close other programs, pin the power plan / CPU governor to performance, add warmup, or use --target-ci"
            if not sustained
            else "close other programs, pin the power plan / CPU governor to performance, or add warmup;"
            " the tokens/s over time (winml dashboard --sustained) shows when it varied",
            {"metric": metric, "cv_pct": cv, "threshold_pct": threshold_pct},
        )
    ]


def check_slow_first(latencies_ms: Sequence[float]) -> list[BenchWarning]:
    """The first measured iteration is an outlier on the slow side: the warmup was too short.
    Claimed from ``stats.MIN_OUTLIER_SAMPLES`` iterations on only."""
    if len(latencies_ms) < stats.MIN_OUTLIER_SAMPLES:
        return []
    z = stats.modified_z_scores(latencies_ms)[0]
    med = stats.median(latencies_ms)
    if z <= stats.MODIFIED_Z_THRESHOLD or latencies_ms[0] <= med:
        return []
    return [
        BenchWarning(
            SLOW_FIRST_ITERATION,
            f"the first measured iteration was much slower than the rest ({human(latencies_ms[0])} ms vs median {human(med)} ms)",
            "raise --warmup, or use --warmup auto to warm up until times settle",
            {"first_ms": latencies_ms[0], "median_ms": med, "modified_z": z},
        )
    ]


def check_outliers(metric: str, values: Sequence[float]) -> list[BenchWarning]:
    """Iterations far from the median (modified z), claimed from ``stats.MIN_OUTLIER_SAMPLES`` values
    on; the remedy speaks of the CI only where there is one (``stats.min_ci_samples()``)."""
    if len(values) < stats.MIN_OUTLIER_SAMPLES:
        return []
    idx = stats.outlier_indices(values)
    if not idx:
        return []
    robust = (
        "the median and its CI are robust to a few outliers"
        if len(values) >= stats.min_ci_samples()
        else f"the median is robust to a few outliers; {stats.min_ci_samples()} or more iterations give it a CI"
    )
    return [
        BenchWarning(
            OUTLIERS,
            f"{len(idx)} of {len(values)} iterations of {metric} are outliers (|modified z| > {stats.MODIFIED_Z_THRESHOLD})",
            f"look for background load or thermal throttling; {robust}",
            {"metric": metric, "indices": list(idx)},
        )
    ]


def check_route_effect(label: str, route: Route) -> list[BenchWarning]:
    """A forced route whose every stage already ran where it was sent: it measures the config again."""
    if label == "config" or not route.resolved:
        return []
    if any(c.status == "compiled" for c in route.compile):  # it runs compiled EPContext stages: not the config
        return []
    stages = route.stages
    unchanged = route.effective == "config" or (stages and all(s.ep_before == s.ep_after for s in stages))
    if not unchanged:
        return []
    eps = sorted({str(s.ep_after) for s in stages}) or ["?"]
    return [
        BenchWarning(
            ROUTE_NO_EFFECT,
            f"route {label} changed nothing: every stage already runs on {', '.join(eps)} in the config",
            "drop this route (it duplicates config) or force a different --ep/--device",
            {"route": label, "eps": eps},
        )
    ]


def check_token_counts(samples: Sequence[Any], prompt_tokens: int | None, new_tokens: int | None) -> list[BenchWarning]:
    """Every iteration must have fed ``prompt_tokens`` and produced ``new_tokens`` (one decode step
    per token after the first). Throughputs are derived from the counts observed either way."""
    bad = []
    for i, s in enumerate(samples):
        if s.new_tokens is None:
            continue
        steps_ok = len(s.decode_step_ms) == max(0, s.new_tokens - 1)
        if (
            (prompt_tokens is not None and s.prompt_tokens != prompt_tokens)
            or (new_tokens is not None and s.new_tokens != new_tokens)
            or not steps_ok
        ):
            bad.append(
                {
                    "iteration": i,
                    "prompt_tokens": s.prompt_tokens,
                    "new_tokens": s.new_tokens,
                    "decode_steps": len(s.decode_step_ms),
                }
            )
    if not bad:
        return []
    return [
        BenchWarning(
            TOKEN_COUNT_MISMATCH,
            f"{len(bad)} iteration(s) did not feed {prompt_tokens} prompt tokens and produce {new_tokens} new tokens "
            f"(first: {bad[0]})",
            "check search.max_length / context_length in genai_config.json and the prompt length; throughputs use the observed counts",
            {"expected_prompt_tokens": prompt_tokens, "expected_new_tokens": new_tokens, "iterations": bad[:20]},
        )
    ]


def check_stage_eps(route: Route, actual: Mapping[str, Any] | None = None) -> list[BenchWarning]:
    """A stage that ran on another EP than the route asked (``ep_actual`` from its placement, or the
    session's own report ``actual`` = {stage: ep})."""
    out = []
    actual = dict(actual or {})
    for s in route.stages:
        asked = s.ep_after
        ran = s.ep_actual or actual.get(s.stage)
        if isinstance(asked, str) and isinstance(ran, str) and ran and ran != asked:
            out.append(
                BenchWarning(
                    EP_MISMATCH,
                    f"stage {s.stage} was asked to run on {asked} but ran on {ran}",
                    "onnxruntime fell back silently: check that the EP is installed and supports the model (winml devices)",
                    {"stage": s.stage, "asked": asked, "ran": ran},
                )
            )
    return out


def check_power_state(label: str, differs: Mapping[str, Mapping[str, Any]] | None) -> list[BenchWarning]:
    """Interleaved routes that ran in different power states (governor, GPU performance state,
    power limit, AC/battery): their comparison mixes the route with the state."""
    out = []
    for other, keys in (differs or {}).items():
        said = ", ".join(f"{k} {v[0]} here, {v[1]} there" for k, v in keys.items())
        out.append(
            BenchWarning(
                POWER_STATE_DIFFERS,
                f"{label} ran in another power state than {other}: {said}",
                "pin the governor, clocks and power limit (and stay on AC) for the whole sweep, then rerun",
                {"other": other, "keys": {k: list(v) for k, v in keys.items()}},
            )
        )
    return out


def check_partial_fallback(label: str, route: Route, strict: bool = True) -> list[BenchWarning]:
    """A stage on a non-CPU EP (forced, or so in the config) some of whose nodes onnxruntime placed on CPU
    (from the prepare step's placement). ``strict``: the command takes --strict (`winml serve` does not)."""
    out = []
    remedy = "the EP has no kernel for these ops; the timings include the copies between devices" + (
        " (--strict makes this an error)" if strict else ""
    )
    for s in route.stages:
        p = s.placement
        if s.ep_after == CPU or p is None or not p.cpu_fallback_nodes:  # forced or as the config says
            continue
        if p.ep_actual:  # wholly elsewhere: check_stage_eps reports it
            continue
        ops = ", ".join(f"{op} x{n}" if n > 1 else op for op, n in sorted(p.cpu_fallback_ops.items()))
        out.append(
            BenchWarning(
                PARTIAL_CPU_FALLBACK,
                f"route {label}: stage {s.stage} runs {p.cpu_fallback_nodes} of {p.nodes} nodes on CPU ({ops})",
                remedy,
                {"stage": s.stage, "cpu_fallback_ops": p.cpu_fallback_ops},
            )
        )
    return out


def ci_not_reached(
    metric: str, half_width_pct: float, target_pct: float, stop_reason: str, n: int
) -> list[BenchWarning]:
    width = f"is ±{fixed(half_width_pct, 2)} %" if math.isfinite(half_width_pct) else "has no width yet"
    return [
        BenchWarning(
            CI_TARGET_NOT_REACHED,
            f"the 95 % CI of the median {metric} {width} after {n} iterations, not within ±{target_pct:g} % "
            f"(stopped by {stop_reason})",
            "raise --max-time / --max-iterations, or accept a wider --target-ci",
            {
                "metric": metric,
                "ci95_half_width_pct": None if math.isnan(half_width_pct) else half_width_pct,
                "target_ci_pct": target_pct,
                "stop_reason": stop_reason,
            },
        )
    ]


def check_modes(what: str, values: Sequence[float], unit: str = "ms", sustained: bool = False) -> list[BenchWarning]:
    """Two modes in ``values`` (decode steps, iteration latencies): a median between them describes
    neither. ``what`` names the values in the sentence ("decode steps"); ``sustained``: a --duration
    run, one process, whose remedy names no flag it refuses (--invocations)."""
    arr = np.asarray(values, dtype=float)  # None becomes NaN
    report = detect_modes(arr[np.isfinite(arr) & (arr > 0)])  # the finite positive values, in order
    if not report.bimodal:
        return []
    parts = " / ".join(f"{human(m.centre)} {unit} ({m.share:.0%})" for m in report.modes)
    return [
        BenchWarning(
            BIMODAL,
            f"{what} are bimodal: {parts}",
            "the median sits between two behaviours of the machine or EP (clocks, placement, a kernel choice); "
            + (
                "the tokens/s over time (winml dashboard --sustained) shows when each held; look at ITL percentiles"
                " rather than one median"
                if sustained
                else "compare routes over several --invocations and look at ITL percentiles rather than one median"
            ),
            {
                "what": what,
                "unit": unit,
                "modes": [{"centre": m.centre, "share": m.share} for m in report.modes],
                "separation": report.separation,
                "n": report.n,
                "method": report.method,
            },
        )
    ]


def check_drift(metric: str, invocations: Sequence[Sequence[float]], unit: str) -> list[BenchWarning]:
    """Invocation medians of ``metric`` that differ by more than their own intervals allow."""
    report = detect_drift(invocations)
    if not report.drifting:
        return []
    return [
        BenchWarning(
            DRIFT,
            f"invocation medians of {metric} drift {human(report.low)}–{human(report.high)} {unit} "
            f"({report.relative_spread:.0%} over {report.invocations} invocations)",
            "processes differ more than their iterations do: the interval over invocations covers it; for a tighter one "
            "add --invocations rather than --iterations",
            {
                "metric": metric,
                "unit": unit,
                "low": report.low,
                "high": report.high,
                "relative_spread": report.relative_spread,
                "invocations": report.invocations,
                "method": report.method,
            },
        )
    ]


def check_same_output(label: str, route: Route) -> list[BenchWarning]:
    """The warning for a route whose output_check found a difference."""
    check = route.output_check
    if check is None or check.first_difference is None:  # no check, or the outputs are equal (check.equal)
        return []
    pos = check.first_difference
    ref, got = check.config_token_ids, check.route_token_ids
    return [
        BenchWarning(
            OUTPUT_MISMATCH,
            f"route {label} generates different greedy tokens than config: first "
            f"difference at new token {pos} (config {ref[pos] if pos < len(ref) else 'end'}, "
            f"route {got[pos] if pos < len(got) else 'end'})",
            "its speed is not comparable as is: check the EP's precision (fp16 accumulation, int4 kernels) before trusting it",
            {"first_difference": pos},
        )
    ]
