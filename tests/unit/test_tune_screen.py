"""The race's screen (tune/screen.py over stats/pooled.py): two short rounds of every route, one
variance pooled over the routes, and the clearly slower routes dropped before a full round. It must
drop a far slower route after the screen, never drop a route whose interval of its ratio to the
leader holds 1, drop an equal route no more often than its level, and leave the full race's rules,
budget and verdicts as they were."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from tests.unit.test_tune_race import DECODE, SPEEDS, TOKENS_PER_INVOCATION, FakeRounds
from winml_perf.stats.pooled import pooled_log_means
from winml_perf.tune.candidates import CONFIG_LABEL
from winml_perf.tune.goal import Budget
from winml_perf.tune.race import Race, RaceSettings, RoundResult
from winml_perf.tune.screen import screen_level, screen_out
from winml_perf.tune.standings import NO_VERDICT, WINNER, verdict

SHORT_TOKENS = TOKENS_PER_INVOCATION // 3


class ScreenedRounds(FakeRounds):
    """FakeRounds whose short() round measures one iteration per route at a third of the tokens."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.short_invocations: dict[str, int] = dict.fromkeys(self.speeds, 0)

    def short(self, k: int, labels) -> RoundResult:
        drift = float(self.rng.lognormal(0.0, 0.05))
        values = {}
        for label in labels:
            self.short_invocations[label] += 1
            self.now += 0.5
            values[label] = {DECODE: (self.speeds[label] * drift * self.rng.lognormal(0.0, self.noise, 1)).tolist()}
        return RoundResult(values, SHORT_TOKENS * len(labels))


def screened_race(speeds, budget=Budget(seconds=10_000), seed=0, noise=0.03, screen_rounds=2, **kw):
    fake = ScreenedRounds(speeds, noise=noise, seed=seed)
    settings = RaceSettings(
        DECODE,
        budget,
        seed,
        tokens_per_invocation=TOKENS_PER_INVOCATION,
        screen_rounds=screen_rounds,
        screen_tokens_per_invocation=SHORT_TOKENS,
        **kw,
    )
    return Race(list(speeds), settings, fake, clock=fake.clock, screen=fake.short).run(), fake


def test_pooled_log_means_is_the_two_way_layout_by_hand():
    table = [[100.0, 110.0, 90.0], [50.0, 60.0, 40.0], [200.0, 190.0, 230.0]]
    p = pooled_log_means(table)
    logs = np.log(table)
    resid = logs - logs.mean(1, keepdims=True) - logs.mean(0, keepdims=True) + logs.mean()
    assert p.df == 4  # (3 routes - 1) x (3 rounds - 1)
    assert p.se_difference == pytest.approx(math.sqrt(2 * (resid**2).sum() / 4 / 3))
    ratio, low, high = p.difference_interval(1, 0, 0.95)
    assert ratio == pytest.approx(math.exp(logs[1].mean() - logs[0].mean()))
    half = math.log(high / ratio)
    assert half == pytest.approx(2.7764451 * p.se_difference, rel=1e-6)  # t(4) at 97.5 %
    assert math.log(ratio / low) == pytest.approx(half)
    with pytest.raises(ValueError, match="2 routes"):
        pooled_log_means([[1.0, 2.0]])
    with pytest.raises(ValueError, match="positive"):
        pooled_log_means([[1.0, 2.0], [0.0, 1.0]])


def test_a_far_slower_route_is_screened_out_after_its_short_rounds_and_never_runs_in_full():
    r, fake = screened_race(SPEEDS)
    assert r.dropped["ep=slow"].startswith("screened out: ") and "(round 2)" in r.dropped["ep=slow"]
    assert fake.short_invocations["ep=slow"] == 2 and fake.invocations["ep=slow"] == 0
    assert r.screened == 2 and r.rounds == r.full_rounds + 2
    assert r.tokens == 2 * 4 * SHORT_TOKENS + sum(fake.invocations.values()) * TOKENS_PER_INVOCATION
    assert verdict(r, {}, "decode").winner == "ep=a"  # the full rounds still decide against config


def test_the_screen_never_drops_config_nor_a_route_whose_interval_holds_1():
    rng = np.random.default_rng(5)
    labels = [CONFIG_LABEL, "a", "b", "c", "d", "e"]
    true = np.log([100.0, 104.0, 96.0, 60.0, 30.0, 101.0])
    checked_kept = checked_dropped = 0
    for _ in range(200):
        table = np.exp(true[:, None] + rng.normal(0, 0.1, (len(labels), 2)) + rng.normal(0, 0.05, (1, 2)))
        out = screen_out(dict(zip(labels, table.tolist())), True, 0.05, CONFIG_LABEL)
        assert out is not None and CONFIG_LABEL not in out.dropped
        p = pooled_log_means(table)
        lead = labels.index(out.leader)
        for i, label in enumerate(labels):
            _, low, high = p.difference_interval(i, lead, out.level)
            if high >= 1.0:  # overlaps the leader's speed: kept
                assert label not in out.dropped
                checked_kept += label not in (CONFIG_LABEL, out.leader)
            else:
                assert label in out.dropped or label == CONFIG_LABEL
                checked_dropped += label != CONFIG_LABEL
    assert checked_kept > 200 and checked_dropped > 200  # both sides of the rule were exercised


def test_an_equal_route_is_screened_out_no_more_often_than_the_level():
    """Twelve equal routes, 2000 screens at a (deliberately loose) 5 % look: whichever the data
    make leader, one given route is dropped at most 2.5 % of the time (one tail of the interval,
    split over the 11 routes compared). Without the split over routes it is dropped far more often."""
    rng = np.random.default_rng(11)
    labels = [CONFIG_LABEL] + [f"r{i}" for i in range(11)]
    screens = 2000
    dropped = dropped_unsplit = 0
    for _ in range(screens):
        table = np.exp(rng.normal(0, 0.06, (12, 2)) + rng.normal(0, 0.05, (1, 2)))
        values = dict(zip(labels, table.tolist()))
        dropped += "r0" in screen_out(values, True, 0.05, CONFIG_LABEL).dropped
        dropped_unsplit += "r0" in screen_out(values, True, 0.05 * 11, CONFIG_LABEL).dropped  # level 95 % each
    assert dropped / screens <= 0.025
    assert dropped_unsplit > 2 * max(dropped, 1)
    assert screen_level(0.05, 12) == pytest.approx(1 - 0.05 / 11)


def test_equal_routes_are_not_dropped_by_the_screened_race_more_often_than_the_level():
    equal = {CONFIG_LABEL: 100.0, "ep=a": 150.0, "ep=b": 150.0, "ep=c": 150.0, "ep=slow": 20.0}
    races, wrongly = 40, 0
    for seed in range(races):
        r, _ = screened_race(equal, seed=seed, noise=0.05, max_rounds=20)
        assert "ep=slow" in r.dropped
        wrongly += sum(x in r.dropped for x in ("ep=a", "ep=b", "ep=c"))
    assert wrongly <= 0.05 * races * 3


def test_the_screen_counts_as_a_look_and_only_full_rounds_count_for_max_rounds():
    r, fake = screened_race({CONFIG_LABEL: 100.0, "ep=a": 100.0, "ep=b": 100.0}, max_rounds=4)
    assert r.look_confidence() == pytest.approx(1 - 0.05 / 4)  # looks after full rounds 2..4, and the screen
    assert r.full_rounds == 4 and r.rounds == 6 and "--max-rounds 4" in (r.stopped or "")
    assert all(len(r.series(x, DECODE)) == 4 for x in r.alive)  # short rounds feed no ratio


def test_without_a_screen_seam_or_with_few_routes_the_race_is_as_before():
    a, fake_a = screened_race({CONFIG_LABEL: 100.0, "ep=a": 150.0})  # two routes: nothing to pool
    assert a.screened == 0 and sum(fake_a.short_invocations.values()) == 0
    b, _ = screened_race(SPEEDS, max_ttft_ms=500.0)  # a leader must meet the bound: full rounds only
    assert b.screened == 0
    assert verdict(b, {}, "decode").kind == WINNER and verdict(b, {}, "decode").winner == "ep=a"


@pytest.mark.parametrize("tokens", [2 * 4 * SHORT_TOKENS + 3 * TOKENS_PER_INVOCATION, 2 * 4 * SHORT_TOKENS - 1])
def test_the_screened_race_stays_within_a_token_budget(tokens):
    """The first full round is priced at full invocations, not at the short rounds' tokens."""
    r, _ = screened_race(
        {CONFIG_LABEL: 100.0, "ep=a": 101.0, "ep=b": 100.5, "ep=c": 100.2}, budget=Budget(tokens=tokens)
    )
    assert r.tokens <= tokens and "budget" in (r.stopped or "")


def test_only_screening_rounds_within_the_budget_is_no_verdict():
    speeds = {CONFIG_LABEL: 100.0, "ep=a": 101.0, "ep=b": 100.5, "ep=c": 100.2}
    r, _ = screened_race(speeds, budget=Budget(tokens=2 * 4 * SHORT_TOKENS + TOKENS_PER_INVOCATION))
    assert r.screened == 2 and r.full_rounds == 0
    v = verdict(r, {}, "decode")
    assert v.kind == NO_VERDICT and "2 short screening rounds and 0 full rounds ran" in v.text


def test_the_time_budget_prices_the_first_full_round_from_the_short_ones_scaled_by_tokens():
    speeds = {CONFIG_LABEL: 100.0, "ep=a": 101.0, "ep=b": 100.5}
    # short rounds cost 0.5 s per route; a full round of 3 routes is priced at 0.5 x 3 (tokens) x 3 x 1.25
    r, fake = screened_race(speeds, budget=Budget(seconds=8.6))
    assert r.screened == 2 and r.full_rounds == 0 and fake.now <= 8.6
    r, fake = screened_race(speeds, budget=Budget(seconds=8.8))
    assert r.full_rounds >= 1 and fake.now <= 8.8


def test_the_real_seam_screens_with_one_iteration_and_the_same_store_lists():
    from winml_perf.tune.rounds import RealRounds, Shape
    from winml_perf.tune.session import TuneRequest, _screen

    full = RealRounds({}, Shape(16, 32, 5, 1), (DECODE,), 0, environment={"here": 1})
    short = full.short()
    assert short.shape == Shape(16, 32, 1, 1) and short.shape.tokens_per_invocation == 2 * 48
    assert short.run_ids is full.run_ids and short.store_errors is full.store_errors
    said: list[str] = []
    request = TuneRequest(Path("b"), Budget(seconds=60))
    assert isinstance(_screen(request, full, said.append), RealRounds)
    assert _screen(replace(request, screen_rounds=0), full, said.append) is None
    assert _screen(replace(request, objective="goodput"), full, said.append) is None
    assert _screen(request, FakeRounds(SPEEDS), said.append) is None  # a seam without short()
    assert not said
    assert _screen(replace(request, max_ttft_ms=200.0), full, said.append) is None
    assert said and "--max-ttft-ms" in said[0]


def test_a_route_without_a_value_in_every_short_round_is_kept_and_the_rest_are_still_screened():
    class Gappy(ScreenedRounds):
        def short(self, k, labels):
            result = super().short(k, labels)
            values = {x: ({DECODE: [math.nan]} if x == "ep=b" and k == 0 else v) for x, v in result.values.items()}
            return RoundResult(values, result.tokens)

    fake = Gappy(SPEEDS)
    settings = RaceSettings(DECODE, Budget(seconds=10_000), 0, tokens_per_invocation=200, screen_rounds=2)
    r = Race(list(SPEEDS), settings, fake, clock=fake.clock, screen=fake.short).run()
    assert r.dropped["ep=slow"].startswith("screened out")
    assert not r.dropped.get("ep=b", "").startswith("screened out")  # not compared: the full rounds judge it
    assert fake.invocations["ep=b"] >= 2


def test_after_a_full_round_the_time_budget_prices_full_rounds_by_their_own_cost():
    """Short rounds that are dear (0.5 s for a third of the tokens: scaled, 1.5 s) must not keep
    pricing full rounds (1 s each) once these have run: the race uses its budget for full rounds."""
    speeds = {CONFIG_LABEL: 100.0, "ep=a": 100.0, "ep=b": 100.0}
    r, fake = screened_race(speeds, budget=Budget(seconds=28.0), max_rounds=100)
    # 3 s of screen, then full rounds of 3 s priced at 3.75 s, not at the short rounds' 5.7 s:
    # the 8th starts at 24 s (24 + 3.75 <= 28), where 24 + 5.7 would not
    assert r.full_rounds == 8 and fake.now == pytest.approx(27.0)
