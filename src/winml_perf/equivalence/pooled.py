"""The tune's equivalence check on fixed prompts, so that what it prunes never depends on the race's --seed.

Every route is judged first on `winml perf`'s check prompt (the synthetic prompt of its default
--seed: the same tokens). A route whose KL there lies within a factor ``NEAR_LIMIT`` of its limit
(the widest band's, the one "not equivalent" begins past) is judged on two more fixed prompts, and
its verdict is the pooled one: the mean KL over the three prompts against the mean of their limits
(a band's limit is twice its own mean KL, so with equal steps per prompt this is what one check over
all their steps would say), the top-1 agreement likewise, and "not equivalent" when any prompt finds
a decoder layer that computes something else. Measured on tiny-qwen2-npu (docs/tune.md): the
per-prompt verdict of a route near its limit flips with the prompt, the pooled one does not.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from winml_perf.model.defaults import DEFAULTS

if TYPE_CHECKING:
    from winml_perf.model.equivalence import Equivalence

#: `winml perf`'s check prompt first (its default --seed), then two more; never the race's --seed.
CHECK_SEEDS = (DEFAULTS.seed, DEFAULTS.seed + 1, DEFAULTS.seed + 2)
#: A KL within this factor of its limit (either side) is near enough to judge over every check prompt.
NEAR_LIMIT = 2.0


@dataclass(frozen=True)
class Judged:
    """One route's verdict and the line that says how it was reached."""

    verdict: str
    line: str
    first: Equivalence | None = None  # the judgement on `winml perf`'s check prompt, for the record
    error: str | None = None  # its teacher-forced pass failed on some prompt: why


def limit_of(e: Equivalence) -> float | None:
    """The widest band's KL limit of a judgement (past it: not equivalent); None without bands."""
    return max((b.kl_limit for b in e.bands), default=None)


def near_limit(e: Equivalence) -> bool:
    limit = limit_of(e)
    if e.figures.identical or not limit:
        return False
    return 1.0 / NEAR_LIMIT <= e.figures.kl_mean / limit <= NEAR_LIMIT


def pooled_verdict(judged: Sequence[Equivalence]) -> str:
    """The verdict of several prompts' judgements of one route, pooled as the module doc says."""
    from winml_perf.model.equivalence import NOT_EQUIVALENT
    from winml_perf.stats.equivalence import verdict

    if any(e.layers is not None and e.layers.first_wrong is not None for e in judged):
        return NOT_EQUIVALENT
    n = len(judged)
    first = judged[0].figures
    figures = replace(
        first,
        kl_mean=sum(e.figures.kl_mean for e in judged) / n,
        top1_agreement=sum(e.figures.top1_agreement for e in judged) / n,
        identical=all(e.figures.identical for e in judged),
    )
    bands = {}
    for name in dict.fromkeys(b.name for b in judged[0].bands):
        same = [b for e in judged for b in e.bands if b.name == name]
        if len(same) == n:
            bands[name] = replace(same[0], kl_limit=sum(b.kl_limit for b in same) / n)
    return verdict(figures, bands.get("noise floor"), bands.get("precision"))


@dataclass(frozen=True)
class CheckReport:
    """What the check cost, for the tune's report: its line on stderr and its figures."""

    line: str
    figures: dict[str, Any]


def _cost(runs: Sequence[Any], cache: bool, pool: Any) -> CheckReport:
    """The cost of every prompt's check together (check.py EquivalenceRun.cost, added up once for its
    figures and its line), and what its ``pool`` (passes/model_pool.ModelPool) loaded and opened, and took
    kept from an earlier prompt."""
    from winml_perf.equivalence.check import CheckCost
    from winml_perf.equivalence.report import pooled_cost_line

    parts = CheckCost()
    for run in runs:
        parts = parts.add(run.cost)
    seconds = sum(run.cost_ms for run in runs) / 1000.0
    figures = {"seconds": round(seconds, 3), "prompts": len(runs), "cache": cache, **parts.to_dict()}
    figures.update(
        models_loaded=pool.loads,
        models_reused=pool.reused,
        layer_sessions_opened=pool.sessions_opened,
        layer_sessions_reused=pool.sessions_reused,
    )
    return CheckReport(pooled_cost_line(runs, parts, cache, pool), figures)


def judge(bundle: str, routes: Sequence[Any], cache: bool = True) -> tuple[dict[str, Judged], CheckReport]:
    """Each route (RouteSpecs, config's own skipped) judged against config as the module doc says,
    each prompt's reference run once and the verdict cache read first (``cache``); returns {label:
    Judged} and what the check cost."""
    from winml_perf.equivalence.check import check_source, judge_routes
    from winml_perf.equivalence.passes.genai_passes import lanes_wanted, pass_lanes
    from winml_perf.equivalence.passes.kept_variants import keep_variants, variant_folders
    from winml_perf.equivalence.passes.model_pool import keep_models
    from winml_perf.equivalence.report import check_prompt_line, pooled_line

    # a near route's three prompts load its model once (in this process, or in its pass lane, where
    # the lanes stay for every prompt); the reference's band variants are made once
    lanes = min(lanes_wanted(), len(routes)) if len(routes) >= 2 else 0
    with keep_models() as models, keep_variants() as variants, pass_lanes(lanes):
        first = judge_routes(check_source(bundle, CHECK_SEEDS[0]), routes, cache=cache)
        near = [r for r in routes if r.label in first.by_label and near_limit(first.by_label[r.label])]
        models.retain([bundle, *(r.session.path for r in near), *variant_folders(variants)])
        more = [judge_routes(check_source(bundle, seed), near, cache=cache) for seed in CHECK_SEEDS[1:]] if near else []
    out = {label: Judged("", "", error=why) for label, why in first.errors.items()}
    for label, e in first.by_label.items():
        line = check_prompt_line(label, e, CHECK_SEEDS[0])
        if not any(r.label == label for r in near):
            out[label] = Judged(e.verdict, line, e)
            continue
        failed = next((run.errors[label] for run in more if label in run.errors), None)
        if failed is not None:
            out[label] = Judged("", line, e, failed)
            continue
        judged = [e, *(run.by_label[label] for run in more)]
        pooled = pooled_verdict(judged)
        kl_limits = [(j.figures.kl_mean, limit_of(j)) for j in judged]
        out[label] = Judged(pooled, pooled_line(label, pooled, kl_limits, CHECK_SEEDS), e)
    return out, _cost([first, *more], cache, models)
