"""winml tune's race over a fake measurement seam with known route speeds: it must pick the fastest,
drop a slow route early, call a tie a tie, never race a route the equivalence check refused, stay
within its budget, and on an interrupt keep the rounds it measured and print the standings."""

from __future__ import annotations

import math
import re
from types import SimpleNamespace

import numpy as np
import pytest

from winml_perf.tune.candidates import CONFIG_LABEL
from winml_perf.tune.goal import Budget
from winml_perf.tune.race import Race, RaceSettings, RoundResult
from winml_perf.tune.standings import NO_BETTER, NO_VERDICT, SHIP_CONFIG, TIED, WINNER, standings, verdict

DECODE = "decode_tokens_per_s"
TOKENS_PER_INVOCATION = 200


class FakeRounds:
    """Each route's decode tok/s is its known speed times a round's drift (shared by the routes of
    a round, as a machine's drift is) and per-iteration noise; every invocation costs 1 s."""

    def __init__(self, speeds: dict[str, float], noise: float = 0.03, seed: int = 0, ttft: dict | None = None):
        self.speeds, self.noise, self.ttft = speeds, noise, ttft or {}
        self.rng = np.random.default_rng(seed)
        self.now = 0.0
        self.invocations: dict[str, int] = dict.fromkeys(speeds, 0)

    def clock(self) -> float:
        return self.now

    def __call__(self, k: int, labels) -> RoundResult:
        drift = float(self.rng.lognormal(0.0, 0.05))
        values = {}
        for label in labels:
            self.invocations[label] += 1
            self.now += 1.0
            decode = self.speeds[label] * drift * self.rng.lognormal(0.0, self.noise, 5)
            ttft = self.ttft.get(label, 10.0) * self.rng.lognormal(0.0, self.noise, 5)
            values[label] = {DECODE: decode.tolist(), "ttft_ms": ttft.tolist()}
        return RoundResult(values, TOKENS_PER_INVOCATION * len(labels))


def race(speeds, budget=Budget(seconds=10_000), max_rounds=30, seed=0, noise=0.03, **kw) -> tuple[Race, FakeRounds]:
    fake = FakeRounds(speeds, noise=noise, seed=seed, ttft=kw.pop("ttft", None))
    settings = RaceSettings(
        DECODE, budget, seed, max_rounds=max_rounds, tokens_per_invocation=TOKENS_PER_INVOCATION, **kw
    )
    return Race(list(speeds), settings, fake, clock=fake.clock).run(), fake


SPEEDS = {CONFIG_LABEL: 100.0, "ep=a": 150.0, "ep=b": 120.0, "ep=slow": 20.0}


def test_the_race_picks_the_fastest_route_and_says_by_how_much():
    r, _ = race(SPEEDS)
    v = verdict(r, {"ep=a": "equivalent"}, "decode")
    assert v.kind == WINNER and v.winner == "ep=a"
    sp = r.speedup("ep=a")
    assert sp.low <= 1.5 <= sp.high and sp.low > 1.0
    assert "ep=a is 1.5" in v.text and "equivalent" in v.text


def test_a_slow_route_is_dropped_early_and_costs_fewer_invocations():
    r, fake = race({**SPEEDS, "ep=b": 147.0})  # a and b close: the race goes on after slow is dropped
    assert "ep=slow" in r.dropped and "worse than" in r.dropped["ep=slow"]
    assert fake.invocations["ep=slow"] <= 3  # dropped once two or three pairs show it
    assert fake.invocations["ep=slow"] < fake.invocations["ep=a"]


def test_routes_of_the_same_speed_are_declared_tied_not_ranked():
    r, _ = race({CONFIG_LABEL: 100.0, "ep=a": 150.0, "ep=b": 150.0}, max_rounds=8)
    v = verdict(r, {}, "decode")
    assert v.kind == TIED and "top two tied" in v.text
    assert {"ep=a", "ep=b"} <= set(r.alive)


def test_config_as_the_fastest_is_shipped():
    r, _ = race({CONFIG_LABEL: 100.0, "ep=a": 50.0, "ep=b": 30.0})
    v = verdict(r, {}, "decode")
    assert v.kind == SHIP_CONFIG and v.winner == CONFIG_LABEL


def test_a_route_no_better_than_config_within_the_budget_is_not_a_winner():
    r, _ = race({CONFIG_LABEL: 100.0, "ep=a": 100.0}, max_rounds=6, seed=1)
    v = verdict(r, {}, "decode")
    assert v.kind == NO_BETTER and v.winner == CONFIG_LABEL


@pytest.mark.parametrize("budget", [Budget(tokens=20_000), Budget(seconds=60)])
def test_the_race_stays_within_its_budget(budget):
    r, fake = race({CONFIG_LABEL: 100.0, "ep=a": 101.0, "ep=b": 100.5, "ep=c": 100.2}, budget=budget)
    assert r.stopped is not None and "budget" in r.stopped
    if budget.tokens is not None:
        assert r.tokens <= budget.tokens
    else:
        assert fake.now <= budget.seconds
    # the stop says what the next round would cost and what is left, so the user can size --budget
    m = re.search(r"a round of (\d+) route\(s\) is priced at (\d+) (s|tokens), (\d+)( s)? (are|is) left", r.stopped)
    assert m, r.stopped
    assert int(m.group(1)) == len(r.alive) and int(m.group(2)) >= int(m.group(4))  # rounded to whole units


def test_a_route_over_the_ttft_bound_is_dropped_and_never_leads():
    r, _ = race(SPEEDS, max_ttft_ms=50.0, ttft={"ep=a": 120.0})
    assert "ep=a" in r.dropped and "--max-ttft-ms" in r.dropped["ep=a"]
    assert verdict(r, {}, "decode").winner == "ep=b"


def test_standings_rank_racing_then_dropped_then_pruned_with_reasons():
    from winml_perf.tune.prune import Pruned

    r, _ = race(SPEEDS)
    rows = standings(r, [Pruned("ep=x", "placement", "stage lm_head: 0 of 3 nodes")], {})
    assert rows[0].route == "ep=a" and rows[0].status == "leader"
    assert [s.status for s in rows][-1] == "pruned" and "placement" in rows[-1].why
    dropped = next(s for s in rows if s.route == "ep=slow")
    assert dropped.status == "dropped" and dropped.speedup is not None and dropped.speedup < 0.5


def test_the_same_seed_gives_the_same_race():
    a, _ = race(SPEEDS, seed=7)
    b, _ = race(SPEEDS, seed=7)
    assert a.dropped == b.dropped and a.rounds == b.rounds
    assert math.isclose(a.speedup("ep=a").estimate, b.speedup("ep=a").estimate)


def test_a_route_the_equivalence_check_refuses_never_races_even_when_fastest(monkeypatch, tmp_path):
    from winml_perf.equivalence import check as eq
    from winml_perf.tune import prune as prune_mod
    from winml_perf.tune.candidates import Candidate

    def fake_spec(label):
        from winml_perf.model.spec import RouteSpec, SessionSpec

        return RouteSpec(label, SessionSpec("winml-genai", str(tmp_path)))

    from tests.unit.test_tune_check import _judged
    from winml_perf.equivalence.check import CheckCost

    ratios = {"ep=wrong": 5.0, "ep=a": 0.1}  # KL against the precision limit: far over, far under

    def judge_routes(source, routes, **kw):
        by_label = {r.label: _judged(r.label, source.seed, ratios[r.label]) for r in routes if r.label in ratios}
        cost = CheckCost(judged=len(by_label))
        return SimpleNamespace(by_label=by_label, errors={}, cost_ms=1.0, cost=cost, reference="config")

    # the folder is no bundle: the check's source stands in for the one each check prompt makes of it
    monkeypatch.setattr(eq, "check_source", lambda bundle, seed=0: SimpleNamespace(path=bundle, seed=seed))
    monkeypatch.setattr(eq, "judge_routes", judge_routes)
    monkeypatch.setattr(prune_mod, "prepare_one", lambda settings, c: fake_spec(c.route.label))
    from winml_perf.measure.orchestrate import RouteRequest

    cands = [Candidate((), RouteRequest())] + [
        Candidate((("s", x),), RouteRequest(ep=x.removeprefix("ep="))) for x in ("ep=wrong", "ep=a")
    ]
    settings = prune_mod.PruneSettings(tmp_path, 0.5, None)
    survivors, pruned, _ = prune_mod.prune(settings, cands, ({}, {}), say=lambda line: None)
    assert [p.label for p in pruned] == ["ep=wrong"] and pruned[0].check == "equivalence"
    labels = [s.label for s in survivors]
    assert "ep=wrong" not in labels
    r, _ = race({x: {"config": 100.0, "ep=a": 110.0}[x] for x in labels})
    assert verdict(r, {}, "decode").winner in labels


def test_a_dearer_round_than_the_last_is_priced_in_so_a_slow_spell_does_not_overrun_the_budget():
    class Slowing(FakeRounds):
        def __call__(self, k, labels):
            result = super().__call__(k, labels)
            self.now += 30.0 if k % 2 == 0 else 0.0  # rounds 1, 3, ... are slow (a busy machine)
            return result

    fake = Slowing({CONFIG_LABEL: 100.0, "ep=a": 100.0, "ep=b": 100.0})
    settings = RaceSettings(DECODE, Budget(seconds=68), 0, tokens_per_invocation=TOKENS_PER_INVOCATION)
    r = Race(list(fake.speeds), settings, fake, clock=fake.clock).run()
    # priced at the last round only, round 3 would start at 36 s (after a fast round 2) and end at 69 s
    assert fake.now <= 68 and r.rounds >= 1 and "budget" in (r.stopped or "")


def test_ctrl_c_in_the_race_exits_130_keeping_the_rounds_and_printing_the_standings(monkeypatch, capsys):
    """Through the real command: pruning and the rounds faked, the interrupt raised by the seam in round 3."""
    import signal

    from tests.conftest import TINY_PIPELINE
    from winml_perf import cli
    from winml_perf.measure.orchestrate import RouteRequest
    from winml_perf.model.spec import RouteSpec, SessionSpec
    from winml_perf.support.errors import Interrupted
    from winml_perf.tune import prune as prune_mod
    from winml_perf.tune import rounds as rounds_mod
    from winml_perf.tune import session as session_mod
    from winml_perf.tune.candidates import Candidate

    labels = {CONFIG_LABEL: 100.0, "ep=webgpu[context]": 100.5, "ep=webgpu[lm_head]": 10.0}  # undecided at round 2

    def fake_prune(settings, candidates, stage_paths, say):
        spec = lambda label: RouteSpec(label, SessionSpec("winml-genai", str(TINY_PIPELINE)))  # noqa: E731
        return [prune_mod.Survivor(Candidate((), RouteRequest()), spec(x)) for x in labels], [], None

    class InterruptedRounds(FakeRounds):
        def __init__(self, *args, **kwargs):
            super().__init__(labels)

        def __call__(self, k, order):
            if k == 2:
                raise Interrupted(signal.SIGINT)
            return super().__call__(k, order)

    monkeypatch.setattr(session_mod, "_eps", lambda request: ["CPUExecutionProvider", "WebGpuExecutionProvider"])
    monkeypatch.setattr(prune_mod, "prune", fake_prune)
    monkeypatch.setattr(rounds_mod, "RealRounds", InterruptedRounds)
    with pytest.raises(SystemExit) as ended:
        cli.main(["tune", str(TINY_PIPELINE), "--no-store", "--eps", "cpu,webgpu", "--budget", "600s"])
    out, err = capsys.readouterr()
    assert ended.value.code == 130
    assert "ep=webgpu[context]" in out and "vs config (95% CI)" in out  # the standings
    assert "2 round(s)" in out and "stopped: interrupted" in out  # the two finished rounds are kept
    assert "ep=webgpu[lm_head]" in out and "worse than" in out
    assert "interrupted by SIGINT" in err


def test_a_failed_config_route_ends_the_race_with_no_verdict_not_a_crash():
    # Seen here: every cell of a round failed (a broken import in the session child); the standings
    # then asked for the leader of no route and the command died with "max() arg is an empty sequence".
    fake = FakeRounds(SPEEDS)

    def failing(k, labels):
        return RoundResult({}, 0, failed=dict.fromkeys(labels, "the child exited 1"))

    settings = RaceSettings(DECODE, Budget(seconds=10_000), 0, max_rounds=5, tokens_per_invocation=200)
    r = Race(list(SPEEDS), settings, failing, clock=fake.clock).run()
    assert r.stopped == "the config route failed: no ratio can be stated"
    v = verdict(r, {}, "decode")
    assert v.kind == NO_VERDICT and "the child exited 1" in v.text
    rows = standings(r, [], {})
    assert {row.route for row in rows} == set(SPEEDS) and all(row.status == "dropped" for row in rows)


def test_no_round_within_the_budget_is_no_verdict_not_a_speed_claim():
    r, fake = race(SPEEDS, budget=Budget(tokens=TOKENS_PER_INVOCATION))  # less than one round of 4 routes
    assert r.rounds == 0 and sum(fake.invocations.values()) == 0
    v = verdict(r, {}, "decode")
    assert v.kind == NO_VERDICT and v.winner == CONFIG_LABEL
    assert v.text.startswith("no verdict: the budget ran out before racing (no round ran; 3 route(s)")


def test_a_race_interrupted_before_racing_says_so_not_that_the_budget_ran_out():
    """Ctrl-C while the routes were judged said 'the budget ran out before racing' with 57 s of 60 left."""
    r, _ = race(SPEEDS, budget=Budget(tokens=TOKENS_PER_INVOCATION))
    r.stopped = "interrupted"  # as tune/session.py marks a race a signal ended
    v = verdict(r, {}, "decode")
    assert v.kind == NO_VERDICT
    assert v.text == "no verdict: interrupted before racing (no round ran; 3 route(s) besides config left to race)"


def test_one_round_is_no_verdict_either():
    r, _ = race(SPEEDS, budget=Budget(tokens=TOKENS_PER_INVOCATION * 4 + 1))
    assert r.rounds == 1
    v = verdict(r, {}, "decode")
    assert v.kind == NO_VERDICT and "1 round ran" in v.text


def test_only_config_left_needs_no_round():
    r, _ = race({CONFIG_LABEL: 100.0}, budget=Budget(tokens=1))
    assert verdict(r, {}, "decode").kind == SHIP_CONFIG


def test_looking_after_every_round_is_corrected_for():
    """Routes as fast as the leader: looked at after every round of up to 20, the uncorrected 95 %
    interval drops one of them in many races; at the Bonferroni level over the looks, at most 5 %."""
    equal = {CONFIG_LABEL: 100.0, "ep=a": 150.0, "ep=b": 150.0, "ep=c": 150.0}
    races = 40

    def wrongly_dropped(uncorrected: bool) -> int:
        n = 0
        for seed in range(races):
            fake = FakeRounds(equal, noise=0.05, seed=seed)
            settings = RaceSettings(DECODE, Budget(seconds=10_000), seed, max_rounds=20)
            r = Race(list(equal), settings, fake, clock=fake.clock)
            if uncorrected:
                r.look_confidence = lambda: 0.95  # type: ignore[method-assign]
            r.run()
            n += any(x in r.dropped for x in ("ep=a", "ep=b", "ep=c"))
        return n

    corrected = wrongly_dropped(False)
    assert corrected <= 0.05 * races * 3  # 3 routes, each at most ALPHA over the race
    assert wrongly_dropped(True) > corrected
    assert RaceSettings(DECODE, Budget(seconds=1)).max_rounds == 30
    r, _ = race(SPEEDS)
    assert r.look_confidence() == pytest.approx(1 - 0.05 / 29)  # looks after rounds 2..30
