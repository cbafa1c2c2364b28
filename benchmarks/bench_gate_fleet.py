"""How often the regression gate fails a fleet with nothing wrong (issue 15). Run on demand, not in CI.

    python benchmarks/bench_fleet.py --cells 1000000 --keep DIR --invocations 10 --name fleetinv --fill-only
    python benchmarks/bench_gate_fleet.py DIR/fleetinv-1000000.db [--nights 6]

For each of the newest --nights nights of a fleet store (benchmarks/bench_fleet.py), judges every
series' decode tokens/s as ``winml compare runs --fail-on-regression 5%`` does on that night
(compare/gate.judge_series: the newest GATE_HISTORY records up to it), and counts the regression verdicts by
kind and size, the series flagged on several nights, and the shifts bench_fleet injected into the
nights judged (the series and shifts depend on its seed only), so a verdict can be told true or false.
"""

from __future__ import annotations

import argparse
import collections
import json

import sqlalchemy as sa

from bench_fleet import _series
from winml_perf.compare.gate import GATE_HISTORY, judge_series
from winml_perf.results import migrations as mig
from winml_perf.results.invocation_history import invocation_histories
from winml_perf.results.store import open_store

METRIC = "decode_tokens_per_s"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("store", help="a fleet store: a SQLite file or a PostgreSQL URL")
    ap.add_argument("--nights", type=int, default=6)
    ap.add_argument("--seed", type=int, default=1, help="bench_fleet's fill seed (which series shift, and when)")
    a = ap.parse_args()
    r = mig.records.c
    with open_store(a.store, create=False) as store:
        with store.engine.connect() as conn:
            keys = conn.execute(sa.select(r.series_key).distinct().order_by(r.series_key)).scalars().all()
            total_nights = conn.execute(sa.select(sa.func.count()).where(r.series_key == keys[0])).scalar_one()
            nights = (
                conn.execute(
                    sa.select(r.created_utc)
                    .where(r.series_key == keys[0])
                    .order_by(r.created_utc.desc())
                    .limit(a.nights)
                )
                .scalars()
                .all()
            )
        kinds: collections.Counter = collections.Counter()
        flagged: collections.Counter = collections.Counter()
        for night in nights:
            until = night[:16] + ":59Z"  # the fleet's cells of a night share its minute
            for key in keys:  # the gate's own judgement of a candidate whose newest record is that night's
                history = invocation_histories(store, key, [METRIC], until=until, newest=GATE_HISTORY)
                verdict = judge_series(history, [METRIC], 5.0)[METRIC]
                if verdict.is_regression:
                    cp = verdict.change_point
                    kinds[f"{cp.kind} {round(cp.shift * 100):+d}%" if cp else verdict.method] += 1
                    flagged[key] += 1
        with store.engine.connect() as conn:
            ident = {
                k: tuple(
                    conn.execute(
                        sa.select(r.testbed_id, r.bundle, r.route, r.prompt_tokens).where(r.series_key == k).limit(1)
                    ).one()
                )
                for k in flagged
            }
    injected = [
        (s["testbed"], s["bundle"], s["route"], s["p"], round(s["shift"], 3), int(s["shift_at"] * total_nights))
        for s in _series(a.seed)
        if s["shift_at"] is not None and int(s["shift_at"] * total_nights) >= total_nights - a.nights - GATE_HISTORY
    ]
    print(
        json.dumps(
            {
                "series": len(keys),
                "nights_judged": len(nights),
                "series_nights": len(keys) * len(nights),
                "regression_verdicts": sum(kinds.values()),
                "by_kind_and_shift": dict(sorted(kinds.items())),
                "series_by_nights_flagged": dict(sorted(collections.Counter(flagged.values()).items())),
                "flagged": sorted((*ident[k], n) for k, n in flagged.items()),
                "shifts_injected_in_the_window_judged": injected,
            }
        )
    )


if __name__ == "__main__":
    main()
