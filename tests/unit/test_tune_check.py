"""The tune's equivalence check (equivalence/pooled.py): fixed check prompts, never the race's --seed, and a
route near its limit judged over three prompts pooled, so two tunes with different seeds prune alike."""

from __future__ import annotations

from types import SimpleNamespace

from tests.conftest import TINY_PIPELINE
from tests.unit.test_tune_race import FakeRounds
from winml_perf.equivalence.pooled import CHECK_SEEDS, near_limit, pooled_verdict
from winml_perf.model.equivalence import NOT_EQUIVALENT as NOT
from winml_perf.model.equivalence import WITHIN_PRECISION as WITHIN
from winml_perf.model.equivalence import Band, Equivalence, Layers, LogitFigures
from winml_perf.stats.equivalence import verdict

LIMITS = {0: 1.88e-4, 1: 1.84e-4, 2: 8.12e-4, 3: 1.77e-4}  # precision limits per prompt, as measured on tiny-qwen2-npu


def _judged(label: str, seed: int, ratio: float, layers: Layers | None = None) -> Equivalence:
    limit = LIMITS.get(seed, 2e-4)
    figures = LogitFigures(16, ratio * limit, 3 * ratio * limit, 0.01, 1.0, 1.0, None, False)
    noise = Band("noise floor", "graph_optimization_level", figures, 1e-6)
    precision = Band("precision", "MatMulNBits accuracy_level 0", figures, limit)
    return Equivalence(
        "config", "b", f"b/{label}", 16, seed, figures, verdict(figures, noise, precision), (noise, precision),
        layers=layers,
    )  # fmt: skip


def test_only_a_verdict_near_its_limit_is_judged_again():
    assert not near_limit(_judged("a", 0, 0.26)) and not near_limit(_judged("a", 0, 2.5))
    assert near_limit(_judged("a", 0, 0.76)) and near_limit(_judged("a", 0, 1.19))


def test_the_pooled_verdict_is_the_mean_kl_against_the_mean_limit():
    # ep=cpu[iterator] on tiny-qwen2-npu, prompts of seeds 0, 1, 2: 0.76x, 1.006x (not equivalent alone), 0.25x
    alone = [_judged("it", s, r) for s, r in zip(CHECK_SEEDS, (0.76, 1.006, 0.25))]
    assert [e.verdict for e in alone] == [WITHIN, NOT, WITHIN]
    assert pooled_verdict(alone) == WITHIN
    # all three over their limits: pooled is over too
    assert pooled_verdict([_judged("x", s, 1.3) for s in CHECK_SEEDS]) == NOT
    # a layer that computes something else on any prompt decides, whatever the KL
    wrong = Layers(16, "precision", (), 3, "context", 3, "jump", first_wrong=3)
    assert pooled_verdict([*alone[:2], _judged("it", 2, 0.25, wrong)]) == NOT


# ratio of KL to the limit per (route, prompt seed): seed 2's prompt passes ep=webgpu[iterator], seed 3's fails it
RATIOS = {
    "ep=webgpu[context]": {0: 0.26, 1: 0.25, 2: 0.10, 3: 0.27},
    "ep=webgpu[iterator]": {0: 0.96, 1: 1.19, 2: 0.34, 3: 1.38},
    "ep=webgpu[context,iterator]": {0: 3.0, 1: 3.0, 2: 0.9, 3: 3.0},
}


def _tune(monkeypatch, race_seed: int, seeds_asked: list[int], said: list[str] | None = None, cache: bool = True):
    from winml_perf.equivalence import check as eq
    from winml_perf.model.spec import RouteSpec, SessionSpec
    from winml_perf.tune import prune as prune_mod
    from winml_perf.tune import session as session_mod
    from winml_perf.tune.goal import Budget

    def judge_routes(source, routes, **kw):
        assert kw["cache"] is cache  # --no-equivalence-cache reaches every check
        seed = source.seed
        seeds_asked.append(seed)
        judged = {r.label: _judged(r.label, seed, RATIOS[r.label][seed]) for r in routes if r.label != "config"}
        return SimpleNamespace(
            by_label=judged, errors={}, cost_ms=1.0, cost=eq.CheckCost(judged=len(judged)), reference="config"
        )

    monkeypatch.setattr(eq, "judge_routes", judge_routes)
    monkeypatch.setattr(
        prune_mod, "prepare_one", lambda settings, c: RouteSpec(c.label, SessionSpec("winml-genai", str(TINY_PIPELINE)))
    )
    monkeypatch.setattr(session_mod, "_eps", lambda request: ["CPUExecutionProvider", "WebGpuExecutionProvider"])
    request = session_mod.TuneRequest(
        TINY_PIPELINE,
        Budget(seconds=600),
        stages=("context", "iterator"),
        seed=race_seed,
        no_store=True,
        max_rounds=2,
        equivalence_cache=cache,
    )
    outcome = session_mod.run_tune(
        request,
        measure_factory=lambda specs, *_: FakeRounds(dict.fromkeys(specs, 100.0)),
        say=(said.append if said is not None else lambda line: None),
    )
    if said is not None:
        said.append(outcome.to_dict(request))
    return {p.label: p.reason for p in outcome.pruned}, {s.route: s.equivalence for s in outcome.standings}


def test_two_tunes_with_different_seeds_prune_the_same_routes(monkeypatch):
    asked_2: list[int] = []
    asked_3: list[int] = []
    pruned_2, kept_2 = _tune(monkeypatch, 2, asked_2)
    pruned_3, kept_3 = _tune(monkeypatch, 3, asked_3)
    assert set(pruned_2) == set(pruned_3) == {"ep=webgpu[context,iterator]"}  # 3x its limit on the first prompt
    assert kept_2 == kept_3 and kept_2["ep=webgpu[iterator]"] == WITHIN  # pooled: 0.57x over seeds 0-2
    assert pruned_2["ep=webgpu[context,iterator]"].endswith("(check prompt: seed 0)")  # far off: one prompt decides
    assert sorted(asked_2) == sorted(asked_3) == list(CHECK_SEEDS)  # each once, never the race's seed


def test_the_check_says_what_it_cost_and_the_report_keeps_it(monkeypatch):
    said: list = []
    _tune(monkeypatch, 0, [], said, cache=False)
    line = next(x for x in said if isinstance(x, str) and x.startswith("tune: equivalence: "))
    # 3 routes on the first prompt, ep=webgpu[iterator] (near its limit) on two more
    assert line.startswith("tune: equivalence: 5 route(s) over 3 check prompts against config in ")
    assert "(5 judged: reference " in line and line.endswith("before the race")
    check = said[-1]["equivalence_check"]
    assert check["prompts"] == 3 and check["judged"] == 5 and check["cache"] is False and check["seconds"] > 0


def test_the_prompts_check_costs_are_added_up_once_for_the_figures_and_the_line(monkeypatch):
    from winml_perf.equivalence import check as eq
    from winml_perf.equivalence.pooled import _cost

    added: list[int] = []
    add = eq.CheckCost.add
    monkeypatch.setattr(eq.CheckCost, "add", lambda self, other: added.append(other.judged) or add(self, other))
    runs = [
        SimpleNamespace(
            by_label={"a": None}, errors={}, cost_ms=1000.0, cost=eq.CheckCost(judged=j), reference="config"
        )
        for j in (2, 1, 1)
    ]
    pool = SimpleNamespace(loads=1, reused=0, sessions_opened=0, sessions_reused=0)
    report = _cost(runs, True, pool)
    assert added == [2, 1, 1]  # each prompt's cost once (twice before: for the figures, then for the line)
    assert report.figures["judged"] == 4 and "4 judged" in report.line and "over 3 check prompts" in report.line
