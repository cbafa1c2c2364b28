"""The race's config retirement and pooled looks (tune/race.py): config stops racing exactly at the
first look where it would be dropped like any route and every route racing on is shown better than
it (at the look, and by the table's 95 % interval over its pairs with config); after that it is never measured, its rounds keep stating the ratios, the leader is judged
against the last look's leader and the race ends with one route. With three routes or more, a look
compares them on one variance pooled over the racing routes, split over the comparisons with the
leader; with two, on their own pairs."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import stdtrit

from winml_perf.tune.candidates import CONFIG_LABEL
from winml_perf.tune.goal import Budget
from winml_perf.tune.race import Race, RaceSettings, RoundResult
from winml_perf.tune.standings import SHIP_CONFIG, WINNER, standings, verdict

DECODE = "decode_tokens_per_s"


class Noisy:
    """Known speeds times a drift shared by a round, a per-process effect (``process``, 0: none)
    and per-iteration noise; counts invocations."""

    def __init__(self, speeds: dict[str, float], seed: int = 0, noise: float = 0.03, process: float = 0.0):
        self.speeds, self.noise, self.process = speeds, noise, process
        self.rng = np.random.default_rng(seed)
        self.invocations = dict.fromkeys(speeds, 0)
        self.measured: list[list[str]] = []

    def __call__(self, k: int, labels) -> RoundResult:
        drift = float(self.rng.lognormal(0.0, 0.05))
        self.measured.append(list(labels))
        values = {}
        for label in labels:
            self.invocations[label] += 1
            speed = self.speeds[label] * drift
            if self.process:
                speed *= float(self.rng.lognormal(0.0, self.process))
            values[label] = {DECODE: (speed * self.rng.lognormal(0.0, self.noise, 5)).tolist()}
        return RoundResult(values, 100 * len(labels))


class Watched(Race):
    """Records, before each look, whether the rule says config retires at it (worked out from the
    race's own intervals), and after it, whether config did."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.log: list[tuple[int, bool, bool]] = []

    def _eliminate(self) -> None:
        expect = False
        if self.full_rounds >= self.settings.min_rounds and CONFIG_LABEL in self.alive:
            lead, level, pooled = self.leader(), self.look_confidence(), self.pooled_look()
            if lead != CONFIG_LABEL:
                staying = [
                    x
                    for x in self.alive
                    if x != CONFIG_LABEL and (x == lead or not self.look_speedup(x, lead, level, pooled).worse)
                ]
                expect = self.look_speedup(CONFIG_LABEL, lead, level, pooled).worse and all(
                    self.look_speedup(x, CONFIG_LABEL, level, pooled).better and self.speedup(x).better for x in staying
                )
        was = self.config_retired is not None
        super()._eliminate()
        if not was:
            self.log.append((self.full_rounds, expect, self.config_retired is not None))


def settings(seed: int = 0, **kw) -> RaceSettings:
    return RaceSettings(DECODE, Budget(seconds=1e9), seed, **kw)


SPEEDS = {CONFIG_LABEL: 100.0, "ep=a": 150.0, "ep=b": 140.0, "ep=c": 60.0}


@pytest.mark.parametrize("seed", range(6))
def test_config_retires_exactly_at_the_first_look_the_rule_allows(seed):
    fake = Noisy(SPEEDS, seed)
    r = Watched(list(SPEEDS), settings(seed), fake).run()
    assert r.config_retired is not None and CONFIG_LABEL not in r.alive
    assert [expect for _, expect, _ in r.log] == [did for _, _, did in r.log]  # retired when, and only when
    assert [did for _, _, did in r.log].count(True) == 1
    retired_at = next(k for k, _, did in r.log if did)
    assert fake.invocations[CONFIG_LABEL] == retired_at  # never measured after it
    assert all(CONFIG_LABEL not in labels for labels in fake.measured[retired_at:])
    assert f"retired in round {retired_at}" in r.config_retired


def test_after_retirement_the_race_ends_with_one_route_and_states_its_ratio_over_configs_rounds():
    fake = Noisy(SPEEDS, seed=1)
    r = Race(list(SPEEDS), settings(1), fake).run()
    assert r.alive == ["ep=a"] and "last route racing" in (r.stopped or "")
    assert "worse than ep=a" in r.dropped["ep=b"]  # dropped against the leader after config left
    sp = r.speedup("ep=a")
    assert sp.pairs == fake.invocations[CONFIG_LABEL] < fake.invocations["ep=a"]
    assert sp.low > 1.0
    v = verdict(r, {}, "decode")
    assert v.kind == WINNER and v.winner == "ep=a" and "ep=a is 1.5" in v.text
    rows = {s.route: s for s in standings(r, [], {})}
    assert rows[CONFIG_LABEL].status == "retired" and rows[CONFIG_LABEL].why == r.config_retired
    assert rows["ep=a"].status == "leader" and rows["ep=b"].status == "dropped"


def test_config_as_the_fastest_or_under_a_ttft_bound_never_retires():
    fastest = {CONFIG_LABEL: 150.0, "ep=a": 100.0, "ep=b": 90.0}
    r = Race(list(fastest), settings(), Noisy(fastest)).run()
    assert r.config_retired is None and verdict(r, {}, "decode").kind == SHIP_CONFIG
    fake = Noisy(SPEEDS)
    r = Race(list(SPEEDS), settings(max_ttft_ms=1e9, max_rounds=6), fake).run()
    assert r.config_retired is None and fake.invocations[CONFIG_LABEL] == r.full_rounds


@pytest.mark.parametrize("seed", range(4))
def test_a_route_level_with_config_keeps_config_racing_until_it_is_dropped(seed):
    """Retiring needs every route racing on shown better than config: one level with config keeps
    config racing until that route leaves (at the same look at the earliest)."""
    import re

    level = {CONFIG_LABEL: 100.0, "ep=a": 150.0, "ep=same": 100.0}
    r = Race(list(level), settings(seed), Noisy(level, seed)).run()
    assert r.config_retired is not None and "ep=same" in r.dropped
    retired = int(re.search(r"retired in round (\d+)", r.config_retired).group(1))
    dropped = int(re.search(r"\(round (\d+)\)", r.dropped["ep=same"]).group(1))
    assert dropped <= retired


MANY = {CONFIG_LABEL: 100.0, **{f"ep=r{i}": 100.0 * f for i, f in enumerate((1.3, 1.2, 1.0, 0.9, 0.6, 0.45, 0.2, 0.1))}}


@pytest.mark.parametrize("seed", range(8))
def test_a_retired_config_never_leaves_a_verdict_without_its_side(seed):
    """Nine routes pooled from round 2 (8 df) could retire config after 2 pairs, when the table's
    own 95 % interval over those pairs (Student t, 1 df) still holds 1: retiring waits for that
    interval too, so the verdict against config never says 'no route beats config' after it."""
    r = Race(list(MANY), settings(seed), Noisy(MANY, seed, noise=0.05, process=0.03)).run()
    assert r.config_retired is not None
    v = verdict(r, {}, "decode")
    assert v.kind == WINNER and v.winner == "ep=r0" and r.speedup("ep=r0").low > 1.0


class Scripted:
    """The same values every round but for a scripted per-round factor of each route."""

    def __init__(self, table: dict[str, list[float]]):
        self.table = table

    def __call__(self, k: int, labels) -> RoundResult:
        return RoundResult({x: {DECODE: [self.table[x][k]]} for x in labels}, len(labels))


def test_the_pooled_look_is_the_two_way_fit_on_the_log_scale_split_over_the_comparisons():
    table = {CONFIG_LABEL: [100.0, 104.0, 97.0], "ep=a": [150.0, 149.0, 155.0], "ep=b": [121.0, 130.0, 118.0]}
    r = Race(list(table), settings(max_rounds=3, min_rounds=3), Scripted(table))
    for _ in range(3):  # measure three rounds without looking
        r.data.update({x: {**r.data[x], r.rounds: {DECODE: [table[x][r.rounds]]}} for x in r.alive})
        r.rounds += 1
    logs = np.log(np.array([table[x] for x in table]))
    resid = logs - logs.mean(1, keepdims=True) - logs.mean(0, keepdims=True) + logs.mean()
    df = 2 * 2
    se = math.sqrt(2 * float((resid**2).sum()) / df / 3)
    level = r.look_confidence()
    split = 1 - (1 - level) / 2  # two comparisons with the leader
    half = float(stdtrit(df, 0.5 + split / 2)) * se
    d = logs[2].mean() - logs[1].mean()
    pooled = r.pooled_look()
    assert pooled is not None and pooled.df == df
    sp = r.look_speedup("ep=b", "ep=a", level, pooled)
    assert sp.estimate == pytest.approx(math.exp(d))
    assert (sp.low, sp.high) == pytest.approx((math.exp(d - half), math.exp(d + half)))
    two = {CONFIG_LABEL: table[CONFIG_LABEL], "ep=a": table["ep=a"]}
    r2 = Race(list(two), settings(), Scripted(two))
    r2.data.update({x: {k: {DECODE: [two[x][k]]} for k in range(3)} for x in two})
    r2.rounds = 3
    assert r2.pooled_look() is None  # two routes: their own pairs
