"""The answer of a tune: every candidate ranked (its ratio to config with the 95 % interval over
paired invocations, its equivalence verdict, why it left the race) and one verdict sentence."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from winml_perf.model.spec import finite_or_none
from winml_perf.support.human_numbers import fixed
from winml_perf.support.text_table import fitted
from winml_perf.tune.candidates import CONFIG_LABEL
from winml_perf.tune.goal import INTERRUPTED
from winml_perf.tune.prune import Pruned
from winml_perf.tune.race import Race, Speedup

#: Verdict.kind values.
SHIP_CONFIG, WINNER, NO_BETTER, TIED = "ship config", "winner", "no route beats config", "tied"
NO_VERDICT = "no verdict"  # config, the reference of every ratio, failed; or no paired measurement to judge by


@dataclass(frozen=True)
class Standing:
    rank: int | None  # None: pruned, never measured
    route: str
    status: str  # "leader" | "racing" | "retired" (config, no longer raced) | "dropped" | "pruned"
    speedup: float | None  # over config, > 1 better on the objective
    low: float | None
    high: float | None
    pairs: int
    equivalence: str | None  # the verdict against config; "reference" for config itself
    why: str  # why it left the race, or what it was when the race stopped

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Verdict:
    kind: str  # SHIP_CONFIG | WINNER | NO_BETTER | TIED | NO_VERDICT
    winner: str  # the route to ship (config unless a route beats it; the leader when tied)
    text: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def standings(race: Race, pruned: Sequence[Pruned], equivalence: Mapping[str, str | None]) -> list[Standing]:
    """Racing routes first (best ratio first), then dropped ones (best first), then pruned ones."""
    lead = race.leader()

    def row(label: str, status: str, why: str) -> Standing:
        sp = race.speedup(label)
        if label == CONFIG_LABEL:  # the reference: its ratio is 1 by definition, no interval
            return Standing(
                None, label, status, 1.0, None, None, len(race.series(label, race.settings.objective)), "reference", why
            )
        eq = equivalence.get(label)
        return Standing(
            None,
            label,
            status,
            finite_or_none(sp.estimate),
            finite_or_none(sp.low),
            finite_or_none(sp.high),
            sp.pairs,
            eq,
            why,
        )

    def key(s: Standing) -> float:
        return -(s.speedup if s.speedup is not None else -math.inf)

    racing = sorted(
        [
            row(x, "leader" if x == lead else "racing", "" if x == lead else "not shown worse than the leader")
            for x in race.alive
        ]
        + ([row(CONFIG_LABEL, "retired", race.config_retired)] if race.config_retired is not None else []),
        key=key,
    )
    dropped = sorted((row(x, "dropped", why) for x, why in race.dropped.items()), key=key)
    ranked = [Standing(**{**s.to_dict(), "rank": i + 1}) for i, s in enumerate(racing + dropped)]
    return ranked + [
        Standing(None, p.label, "pruned", None, None, None, 0, None, f"{p.check}: {p.reason}") for p in pruned
    ]


def _ratio_text(sp: Speedup) -> str:
    if not sp.has_interval:
        return f"{fixed(sp.estimate, 2)}× (too few paired invocations for an interval)"
    return f"{fixed(sp.estimate, 2)}× [{fixed(sp.low, 2)}, {fixed(sp.high, 2)}]"


def verdict(
    race: Race, equivalence: Mapping[str, str | None], objective_word: str, load_label: str | None = None
) -> Verdict:
    """Ship config, a winner, no route beating config within the budget, or the top two tied.
    ``load_label`` ('concurrency 4'): the serving load a goodput race measured, named in the verdict."""
    kind, winner, text = _verdict(race, equivalence, objective_word, load_label)
    if load_label is not None and kind != WINNER:  # say what was ranked
        text += f" (objective: goodput at {load_label})"
    return Verdict(kind, winner, text)


def _winner_text(lead: str, sp: Speedup, objective_word: str, load_label: str | None) -> str:
    """'X is 1.3× faster than config [...]' or, for goodput, 'X serves 1.3× the goodput of config at concurrency 4 [...]'."""
    interval = f"[{fixed(sp.low, 2)}, {fixed(sp.high, 2)}]"
    if load_label is not None:
        return f"{lead} serves {fixed(sp.estimate, 2)}× the goodput of config at {load_label} {interval}"
    better = "faster" if objective_word == "decode" else f"better on {objective_word}"
    return f"{lead} is {fixed(sp.estimate, 2)}× {better} than config {interval}"


def _verdict(
    race: Race, equivalence: Mapping[str, str | None], objective_word: str, load_label: str | None
) -> tuple[str, str, str]:
    if CONFIG_LABEL in race.dropped:
        return (
            NO_VERDICT,
            CONFIG_LABEL,
            f"no verdict: config, the reference of every ratio, failed ({race.dropped[CONFIG_LABEL]})",
        )
    others = [x for x in race.alive if x != CONFIG_LABEL]
    if others and race.full_rounds < 2:  # no route has an interval against config: nothing was decided by measuring
        measured = "no round ran" if not race.rounds else f"{_rounds_ran(race)}; an interval needs 2 paired invocations"
        ended = "interrupted" if race.stopped == INTERRUPTED else "the budget ran out"
        return (
            NO_VERDICT,
            CONFIG_LABEL,
            f"no verdict: {ended} before racing ({measured}; {len(others)} route(s) besides config"
            f" left to race{'' if race.stopped in (None, INTERRUPTED) else ', stopped: ' + race.stopped})",
        )
    lead = race.leader()
    if lead == CONFIG_LABEL and race.config_retired is not None:  # config left the race, then every route failed
        return (NO_VERDICT, CONFIG_LABEL, f"no verdict: config {race.config_retired}; then every route left failed")
    if lead == CONFIG_LABEL:
        if not others:
            return (SHIP_CONFIG, CONFIG_LABEL, "ship config: every other route was pruned or shown worse")
        return (NO_BETTER, CONFIG_LABEL, f"no route beats config within the budget ({len(others)} not yet shown worse)")
    sp = race.speedup(lead)
    if not sp.better:
        return (NO_BETTER, CONFIG_LABEL, f"no route beats config within the budget (leader {lead}: {_ratio_text(sp)})")
    runner_up = max((x for x in others if x != lead), key=lambda x: _finite(race.speedup(x).estimate), default=None)
    if runner_up is not None and not race.speedup(runner_up, lead).worse:
        return (
            TIED,
            lead,
            f"top two tied within their intervals: {lead} {_ratio_text(sp)} and {runner_up}"
            f" {_ratio_text(race.speedup(runner_up))} against config",
        )
    eq = equivalence.get(lead) or "equivalence not judged"
    return WINNER, lead, f"{_winner_text(lead, sp, objective_word, load_label)}, {eq}"


def _rounds_ran(race: Race) -> str:
    full = "1 round ran" if race.full_rounds == 1 else f"{race.full_rounds} full rounds ran"
    return full if not race.screened else f"{race.screened} short screening rounds and {full}"


def _finite(x: float) -> float:
    return x if math.isfinite(x) else -math.inf


def table_text(rows: Sequence[Standing], metric: str, width: int | None = None) -> str:
    """The ranked table as plain text, fitted to ``width`` (the terminal's by default) by the one
    table writer (support/text_table.py); ends with a newline."""
    head = ("#", "route", f"{metric} vs config (95% CI)", "pairs", "equivalence", "status", "why")
    body = []
    for s in rows:
        if s.speedup is None:
            ratio = "-"
        elif s.route == CONFIG_LABEL:
            ratio = "1 (reference)"
        elif s.low is None or s.high is None:
            ratio = f"{fixed(s.speedup, 3)}×"
        else:
            ratio = f"{fixed(s.speedup, 3)}× [{fixed(s.low, 3)}, {fixed(s.high, 3)}]"
        body.append(
            ("" if s.rank is None else str(s.rank), s.route, ratio, str(s.pairs), s.equivalence or "-", s.status, s.why)
        )
    return fitted(head, body, width, drop=("pairs", "status", "equivalence"), where="--format json has every column")
