"""The race: successive elimination over paired fresh-process invocations (F-race style).

Each round runs one invocation of every route still in the race, in a seeded shuffled order, so a
slow drift of the machine hits the routes of a round alike and cancels in their ratio (the round
pairs them, as `winml perf --invocations` pairs its routes). After each round the leader is the
route with the best ratio to config; a route whose 95 % interval of the ratio to the leader lies
wholly on the worse side of 1 is dropped (and one whose TTFT interval lies wholly above
--max-ttft-ms). Config runs until it retires (below): every ratio is stated against it. The race
stops when no route but config is left, when one route is left against config and its interval has
a side (or config retired), at --max-rounds (full rounds), or before a round the budget cannot pay
for.

With a ``screen`` seam, three or more routes and no --max-ttft-ms, the race opens with
``screen_rounds`` short rounds (one measured iteration per invocation) and drops the routes
tune/screen.py shows slower than the screen's leader; the screen is one more look in the
correction, and its short rounds feed no ratio of the full rounds.

Config stops racing (retires) at a look where it would be dropped like any route and every route
that races on is shown better than it: every ratio to config then has its side, and the rounds
config ran keep stating them (the table's pairs against config end there). From then on the
leader is judged against the last look's leader, and the race stops when one route is left. With
three routes or more racing, a look compares them on one variance pooled over the racing routes'
full rounds (stats/pooled.py), its share of the error split over the comparisons with the leader;
with two, on their own pairs.

The ratios and intervals come from compare.routes.invocation_ratio (stats.paired_ratio underneath);
nothing here computes an interval of its own but the pooled look (stats/pooled.py). How a round is
measured is the ``measure`` seam: rounds.py runs the real thing, tests and benchmarks pass known
speeds.
"""

from __future__ import annotations

import math
import random
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from winml_perf.compare.routes import invocation_ratio
from winml_perf.model.metrics import bigger_is_better
from winml_perf.stats import significance as sig
from winml_perf.stats.pooled import PooledLogMeans
from winml_perf.support.human_numbers import fixed, human
from winml_perf.tune.candidates import CONFIG_LABEL
from winml_perf.tune.goal import TTFT_METRIC, Budget

#: The next round's time is projected at this multiple of the dearest round's time per route.
ROUND_TIME_MARGIN = 1.25


@dataclass(frozen=True)
class RoundResult:
    """What one round measured: per route, per metric, the iteration values of its invocation;
    ``tokens`` processed (prompt + generated, warmups included); routes whose cell failed, with why."""

    values: Mapping[str, Mapping[str, Sequence[float]]]
    tokens: int
    failed: Mapping[str, str] = field(default_factory=dict)


#: measure(round_index, labels in the order to run them) -> RoundResult
Measure = Callable[[int, Sequence[str]], RoundResult]


@dataclass(frozen=True)
class Speedup:
    """A route's ratio to another, oriented so > 1 means better on the objective; its 95 % interval
    (nan when the pairs are too few) over ``pairs`` paired invocations."""

    estimate: float
    low: float
    high: float
    pairs: int

    @property
    def has_interval(self) -> bool:
        return self.pairs >= 2 and math.isfinite(self.low) and math.isfinite(self.high)

    @property
    def worse(self) -> bool:
        return self.has_interval and self.high < 1.0

    @property
    def better(self) -> bool:
        return self.has_interval and self.low > 1.0


@dataclass
class RaceSettings:
    objective: str  # the metric ranked by (goal.OBJECTIVES)
    budget: Budget
    seed: int = 0
    min_rounds: int = 2
    max_rounds: int = 30
    max_ttft_ms: float | None = None
    tokens_per_invocation: int = 0  # the plan's tokens in one invocation: the first round's projection
    screen_rounds: int = 0  # short rounds of every route before the full ones (tune/screen.py); 0: none
    screen_tokens_per_invocation: int = 0  # the tokens of one short invocation: the screen's projection


class Race:
    """The race's state; ``run()`` advances it. An interrupt leaves every finished round in it."""

    def __init__(
        self,
        labels: Sequence[str],
        settings: RaceSettings,
        measure: Measure,
        clock: Callable[[], float] = time.monotonic,
        on_round: Callable[[Race], None] | None = None,
        screen: Measure | None = None,
    ) -> None:
        assert labels and labels[0] == CONFIG_LABEL, "config runs first in the list and always"
        self.settings = settings
        self.measure = measure
        self.clock = clock
        self.on_round = on_round
        self.started = clock()
        self.alive: list[str] = list(labels)
        self.labels: list[str] = list(labels)
        self.dropped: dict[str, str] = {}
        self.data: dict[str, dict[int, Mapping[str, Sequence[float]]]] = {label: {} for label in labels}
        self.rounds = 0
        self.tokens = 0
        self.stopped: str | None = None
        self._rng = random.Random(settings.seed)
        self._last_round = (0.0, 0, 0)  # seconds, tokens, routes
        self._slowest_route_s = 0.0  # the dearest full round's seconds per route: what the next may cost
        self._slowest_short_s = 0.0  # the same over the short rounds
        self._short_scale = 1.0  # a full invocation's tokens over a short one's
        self.screen = screen  # measures a short round (one iteration per invocation), or None
        # the screen runs when it has a seam, two or more rounds and three or more routes to compare;
        # not under --max-ttft-ms (a leader must meet the bound, which short rounds do not judge)
        self.screens = (
            screen is not None and settings.screen_rounds >= 2 and len(labels) >= 3 and settings.max_ttft_ms is None
        )
        self.screened = 0  # short rounds run so far
        self.screen_data: dict[str, dict[int, float]] = {label: {} for label in labels}
        # config stops racing once it is shown worse than the leader and every other route still
        # racing is shown better than it (its rounds so far keep stating every ratio): why, or None
        self.config_retired: str | None = None
        self._anchor = CONFIG_LABEL  # after config retires: the route the leader is judged against

    # -- the loop ----------------------------------------------------------------------------------
    def run(self) -> Race:
        while (reason := self.stop_reason()) is None:
            order = self._rng.sample(self.alive, len(self.alive))
            screening = self.screening_next()
            t0 = self.clock()
            result = (self.screen if screening and self.screen is not None else self.measure)(self.rounds, order)
            self._last_round = (self.clock() - t0, result.tokens, len(order))
            self._price(screening)
            self.tokens += result.tokens
            for label in order:
                if label in result.failed:
                    self._drop(label, f"its cell failed in round {self.rounds + 1}: {result.failed[label]}")
                elif label in result.values:
                    self._keep(label, result.values[label], screening)
            self.rounds += 1
            self.screened += screening
            if CONFIG_LABEL in self.dropped:
                self.stopped = "the config route failed: no ratio can be stated"
                return self
            if not screening:
                self._eliminate()
            elif self.screened == self.settings.screen_rounds:
                self._screen_out()
            if self.on_round is not None:
                self.on_round(self)
        self.stopped = reason
        return self

    def screening_next(self) -> bool:
        """Whether the next round is a short screening round."""
        return self.screens and self.screened < self.settings.screen_rounds

    @property
    def full_rounds(self) -> int:
        """The rounds of full invocations: what every interval, min_rounds and max_rounds count."""
        return self.rounds - self.screened

    def _price(self, screening: bool) -> None:
        seconds, tokens, routes = self._last_round
        if not screening:
            self._slowest_route_s = max(self._slowest_route_s, seconds / routes)
            return
        self._slowest_short_s = max(self._slowest_short_s, seconds / routes)
        full, short = self.settings.tokens_per_invocation, tokens / routes
        self._short_scale = full / short if full > short > 0 else 1.0

    def _route_s(self) -> float:
        """What the next round may cost per route: the dearest round of its kind so far; for the first
        full round, the dearest short one scaled by the full invocation's tokens over a short one's
        (an upper bound while an invocation's time grows with its tokens)."""
        if self.screening_next():
            return self._slowest_short_s
        return self._slowest_route_s if self.full_rounds else self._slowest_short_s * self._short_scale

    def _keep(self, label: str, values: Mapping[str, Sequence[float]], screening: bool) -> None:
        if not screening:
            self.data[label][self.rounds] = values
            return
        finite = [v for v in values.get(self.settings.objective, ()) if math.isfinite(v)]
        self.screen_data[label][self.rounds] = statistics.median(finite) if finite else math.nan

    def _screen_out(self) -> None:
        """After the last short round: drop the routes the screen shows slower than its leader."""
        from winml_perf.tune.screen import screen_out

        values = {x: [self.screen_data[x][k] for k in sorted(self.screen_data[x])] for x in self.alive}
        # a route without a positive value in every short round is not compared (and not dropped)
        values = {x: v for x, v in values.items() if len(v) == self.screened and all(y > 0 for y in v)}
        outcome = screen_out(values, bigger_is_better(self.settings.objective), sig.ALPHA / self.looks(), CONFIG_LABEL)
        for label, why in ({} if outcome is None else outcome.dropped).items():
            self._drop(label, f"{why} (round {self.rounds})")

    def elapsed_s(self) -> float:
        return self.clock() - self.started

    def stop_reason(self) -> str | None:
        s = self.settings
        others = [x for x in self.alive if x != CONFIG_LABEL]
        if not others:
            return (
                "no route but config is left"
                if self.config_retired is None
                else "every route left after config retired failed"
            )
        if self.full_rounds >= s.max_rounds:
            return f"--max-rounds {s.max_rounds} reached"
        if len(others) == 1 and self.config_retired is not None:
            return f"{others[0]} is the last route racing; config {self.config_retired}"
        if len(others) == 1 and self.full_rounds >= s.min_rounds:
            level = self.look_confidence()  # this is a look too: the same correction as a drop
            sp = self.speedup(others[0], confidence=level)
            if sp.better or sp.worse:
                return f"{others[0]} against config has a side at {level:.2%} (95 % over the race's looks)"
        _, tokens, routes = self._last_round
        n = len(self.alive)
        if s.budget.seconds is not None:
            # priced at the dearest round so far, plus a margin: rounds on a busy machine vary
            next_s = self._route_s() * n * ROUND_TIME_MARGIN
            if self.elapsed_s() + next_s > s.budget.seconds:
                left_s = max(0.0, s.budget.seconds - self.elapsed_s())
                return (
                    f"the budget ({s.budget.describe()}) cannot pay for another round"
                    f" (a round of {n} route(s) is priced at {next_s:.0f} s, {left_s:.0f} s are left)"
                )
        if s.budget.tokens is not None:
            next_tokens = self._next_tokens_per_route(tokens, routes) * n
            if self.tokens + next_tokens > s.budget.tokens:
                left = max(0, s.budget.tokens - self.tokens)
                return (
                    f"the budget ({s.budget.describe()}) cannot pay for another round"
                    f" (a round of {n} route(s) is priced at {next_tokens:.0f} tokens, {left} are left)"
                )
        return None

    def _next_tokens_per_route(self, tokens: int, routes: int) -> float:
        """The last round's tokens per route, or the plan's when the next round is of another kind
        (the first round, or the first full round after the screen)."""
        if self.screening_next():
            return tokens / routes if routes else self.settings.screen_tokens_per_invocation
        if routes and self.full_rounds > 0:
            return tokens / routes
        return self.settings.tokens_per_invocation or (tokens / routes if routes else 0)

    def time_left_s(self) -> float | None:
        b = self.settings.budget.seconds
        return None if b is None else max(b - self.elapsed_s(), 0.0)

    # -- ratios ------------------------------------------------------------------------------------
    def series(self, label: str, metric: str) -> dict[int, list[float]]:
        return {k: list(v[metric]) for k, v in self.data[label].items() if metric in v and len(v[metric])}

    def speedup(
        self, label: str, against: str = CONFIG_LABEL, metric: str | None = None, confidence: float | None = None
    ) -> Speedup:
        """``label`` over ``against`` on the objective (or ``metric``), oriented so > 1 is better; its
        interval at ``confidence`` (default 95 %: what the table and the verdict state)."""
        metric = metric or self.settings.objective
        if label == against:
            return Speedup(1.0, 1.0, 1.0, self.rounds)
        level = sig.CONFIDENCE_LEVEL if confidence is None else confidence
        ci = invocation_ratio(self.series(against, metric), self.series(label, metric), level)
        s, lo, hi = sig.speedup_ci(ci, bigger_is_better(metric))
        return Speedup(s, lo, hi, ci.rounds)

    def pooled_look(self) -> PooledLogMeans | None:
        """With three routes or more racing, each route's log value per full round fitted as route +
        round + noise, one variance pooled over the racing routes (stats/pooled.py): (routes - 1)
        (rounds - 1) degrees of freedom where a route's own pairs give rounds - 1. None with fewer
        routes, fewer than two full rounds, or a value that is not positive and finite (then each
        comparison uses its own pairs)."""
        from winml_perf.stats.pooled import pooled_log_means

        metric = self.settings.objective
        series = [self.series(x, metric) for x in self.alive]
        rounds = sorted(set.intersection(*(set(v) for v in series))) if series else []
        if len(series) < 3 or len(rounds) < 2:
            return None
        table = np.array([[np.median(v[k]) if len(v[k]) else math.nan for k in rounds] for v in series])
        if not (np.isfinite(table).all() and (table > 0).all()):
            return None
        return pooled_log_means(table if bigger_is_better(metric) else 1.0 / table)

    def look_speedup(self, label: str, against: str, level: float, pooled: PooledLogMeans | None) -> Speedup:
        """``label`` over ``against`` as a look judges it: from the pooled fit when there is one, at
        ``level`` split over the racing routes compared with the leader (Bonferroni within the
        look); else over their own paired invocations at ``level``."""
        if pooled is None:
            return self.speedup(label, against, confidence=level)
        split = 1.0 - (1.0 - level) / max(len(self.alive) - 1, 1)
        ratio, low, high = pooled.difference_interval(self.alive.index(label), self.alive.index(against), split)
        return Speedup(ratio, low, high, self.full_rounds)

    def _look_text(self, sp: Speedup, level: float, pooled: PooledLogMeans | None) -> str:
        interval = f"{fixed(sp.estimate, 2)}× [{fixed(sp.low, 2)}, {fixed(sp.high, 2)}]"
        if pooled is None:
            return f"{interval} at {level:.2%} (95 % over the race's looks) over {sp.pairs} paired invocations"
        split = 1.0 - (1.0 - level) / max(len(self.alive) - 1, 1)
        return (
            f"{interval} at {split:.3%} (95 % over the race's looks, split over {len(self.alive) - 1} comparisons)"
            f" over {sp.pairs} rounds, variance pooled over {len(self.alive)} routes ({pooled.df} df)"
        )

    def ttft_interval(self, label: str) -> tuple[float, float, float] | None:
        """(median, low, high) of the route's TTFT over its invocations (stats.median_interval)."""
        from winml_perf.stats import median_interval

        rounds = self.series(label, TTFT_METRIC)
        if not rounds:
            return None
        iv = median_interval([rounds[k] for k in sorted(rounds)])
        return iv.estimate, iv.low, iv.high

    def meets_constraint(self, label: str) -> bool:
        """Whether the route's TTFT median is within --max-ttft-ms (always, without the flag)."""
        bound = self.settings.max_ttft_ms
        if bound is None:
            return True
        ttft = self.ttft_interval(label)
        return ttft is not None and ttft[0] <= bound

    def leader(self) -> str:
        """The best route still racing by its ratio to config, among those within the constraint.
        Once config has retired, its ratios stop moving: the leader is then the route with the best
        ratio to the last look's leader (the anchor), over the rounds the two ran together."""
        pool = [x for x in self.alive if self.meets_constraint(x)] or list(self.alive)
        if not pool:  # every route failed or left: config stays the reference named
            return CONFIG_LABEL
        if self.config_retired is None:
            return max(pool, key=lambda x: (_finite(self.speedup(x).estimate), x == CONFIG_LABEL))
        anchor = self._anchor if self._anchor in pool else max(pool, key=lambda x: _finite(self.speedup(x).estimate))
        return max(pool, key=lambda x: (1.0 if x == anchor else _finite(self.speedup(x, anchor).estimate), x == anchor))

    def _eliminate(self) -> None:
        if self.full_rounds < self.settings.min_rounds:
            return
        bound = self.settings.max_ttft_ms
        if bound is not None:
            for label in [x for x in self.alive if x != CONFIG_LABEL]:
                ttft = self.ttft_interval(label)
                if ttft is not None and math.isfinite(ttft[1]) and ttft[1] > bound:
                    self._drop(
                        label,
                        f"TTFT {human(ttft[0])} ms [{human(ttft[1])}, {human(ttft[2])}] lies above --max-ttft-ms {bound:g}",
                    )
        lead = self.leader()
        level = self.look_confidence()
        pooled = self.pooled_look()
        verdicts = {x: self.look_speedup(x, lead, level, pooled) for x in self.alive if x != lead}
        worse = [x for x, sp in verdicts.items() if x != CONFIG_LABEL and sp.worse]
        retire = self._retires_config(lead, level, pooled, verdicts, worse)
        for label in worse:
            self._drop(
                label, f"worse than {lead}: {self._look_text(verdicts[label], level, pooled)} (round {self.rounds})"
            )
        self._anchor = self.leader()
        if retire is not None:
            self.alive.remove(CONFIG_LABEL)
            self.config_retired = retire

    def _retires_config(
        self,
        lead: str,
        level: float,
        pooled: PooledLogMeans | None,
        verdicts: Mapping[str, Speedup],
        dropping: Sequence[str],
    ) -> str | None:
        """Config stops racing when it would be dropped like any route (its interval against the
        leader wholly worse at this look) and every route that stays in the race is shown better
        than it at the same look and by the table's own interval (95 % over its pairs with config):
        every ratio to config then has its side, and its rounds so far keep stating them. Not
        under --max-ttft-ms, nor while config leads. Why, or None."""
        if CONFIG_LABEL not in verdicts or self.settings.max_ttft_ms is not None:
            return None
        staying = [x for x in self.alive if x != CONFIG_LABEL and x not in dropping]
        if not verdicts[CONFIG_LABEL].worse or not all(
            self.look_speedup(x, CONFIG_LABEL, level, pooled).better and self.speedup(x).better for x in staying
        ):
            return None
        return (
            f"retired in round {self.rounds}: worse than {lead}, {self._look_text(verdicts[CONFIG_LABEL], level, pooled)},"
            f" and the {len(staying)} route(s) racing on shown better than config"
        )

    def looks(self) -> int:
        """How often the race may look at a route's interval to drop it: after every full round from
        min_rounds to max_rounds, and once after the screen when there is one."""
        s = self.settings
        return max(1, s.max_rounds - max(s.min_rounds, 1) + 1) + int(self.screens)

    def look_confidence(self) -> float:
        """The level of each look's interval: Bonferroni over the race's looks, so that a route no
        worse than the leader is dropped at most ALPHA of the time over the whole race, however
        many rounds it is looked at (peeking after every round otherwise raises that rate)."""
        return 1.0 - sig.ALPHA / self.looks()

    def _drop(self, label: str, why: str) -> None:
        if label in self.alive:
            self.alive.remove(label)
        self.dropped[label] = why


def _finite(x: float) -> float:
    return x if math.isfinite(x) else -math.inf
