"""The screen: after the race's short first rounds (every route, one measured iteration each), drop
the routes clearly slower than the screen's leader before a full round is paid for.

One variance is pooled over every route of the screen (stats/pooled.py: routes x rounds on the log
scale, (routes - 1)(rounds - 1) degrees of freedom), so two short rounds already give each route an
interval of its ratio to the leader. A route is dropped when that interval lies wholly below 1. Its
level is the share of one of the race's looks, split again over the routes compared with the leader
(Bonferroni): whichever route the data make leader, the truly fastest route is dropped by the
screen with a chance of at most that look's share. Config is never dropped: it is every ratio's
reference.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from winml_perf.support.human_numbers import fixed


@dataclass(frozen=True)
class ScreenOutcome:
    leader: str
    level: float  # two-sided level of each route's interval of its ratio to the leader
    dropped: dict[str, str]  # label -> why


def screen_level(alpha_look: float, routes: int) -> float:
    """The two-sided level of each comparison: one look's share split over the other routes."""
    return 1.0 - alpha_look / max(routes - 1, 1)


def screen_out(
    values: Mapping[str, Sequence[float]], bigger_is_better: bool, alpha_look: float, keep: str
) -> ScreenOutcome | None:
    """``values``: per route, one value per screening round (its invocation's median), in round
    order. None when no comparison can be made (fewer than 2 routes or rounds, a value that is not
    positive and finite)."""
    from winml_perf.stats.pooled import pooled_log_means

    labels = list(values)
    table = np.array([values[x] for x in labels], dtype=float) if labels else np.zeros((0, 0))
    if table.ndim != 2 or min(table.shape) < 2 or not (np.isfinite(table).all() and (table > 0).all()):
        return None
    pooled = pooled_log_means(table if bigger_is_better else 1.0 / table)  # oriented: larger is better
    lead = int(np.argmax(pooled.means))
    level = screen_level(alpha_look, len(labels))
    dropped: dict[str, str] = {}
    for i, label in enumerate(labels):
        if label in (keep, labels[lead]):
            continue
        ratio, low, high = pooled.difference_interval(i, lead, level)
        if high < 1.0:
            dropped[label] = (
                f"screened out: {fixed(ratio, 2)}× the screen's leader {labels[lead]} [{fixed(low, 2)}, {fixed(high, 2)}]"
                f" at {level:.3%} over {table.shape[1]} short rounds (variance pooled over {len(labels)} routes,"
                f" {pooled.df} df)"
            )
    return ScreenOutcome(labels[lead], level, dropped)
