"""The regression gate night after night on synthetic series (issue 15). Run on demand, not in CI.

    python benchmarks/bench_gate.py [--noise h200-testbed] [--invocations 10] [--series 20] [--nights 200] [--alpha A]

What ``winml compare runs --fail-on-regression 5%`` decides each night when it judges a series by
the change points of its newest GATE_HISTORY runs (results/changepoint.judge_newest, as
compare/gate.py calls it), under the noise models of benchmarks/changepoint_sim.py:

- shift-free series: the gate runs on each of --nights nights after a first full history; every
  regression verdict is a false alarm (per series-night, and the series that got one);
- series with one regression step of 5, 10, 20, 25, 30 or 63 % (throughput lower by that much; 63 %
  is a model made 2.7x slower) at a night:
  the gate runs on the 20 nights from the step on; the delay is the first night (1 = the night of
  the step) whose verdict is a regression, and the recall is the share found within 10 nights;
  ``named_the_step`` is the share of those first verdicts whose change point is the step's own run
  (the run a reader bisects from), ``runs_off`` how far the others were (negative: earlier), and
  ``called_a_mode_share_change`` the share of them whose change point is of the modes' share, not
  of the level (a misreading: every step here moves both modes alike); ``caught_on_its_night`` the
  share of series failed on the step's own night, ``by_band`` the share of first verdicts made by
  the first-night rule (stats/series/history_band.py) rather than a change point.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter

import numpy as np

from changepoint_sim import NOISES, simulate
from winml_perf.compare.gate import GATE_HISTORY
from winml_perf.stats.series.changepoint import BY_BAND, GATE_ALPHA, MODE_SHARE, judge_newest

STEP_SIZES = (0.05, 0.10, 0.20, 0.25, 0.30, 0.63)
AFTER = 20  # nights judged from a step on
FOUND_WITHIN = 10


def verdicts(runs: np.ndarray, nights: range, alpha: float) -> list:
    """(failed, change point index into ``runs``, its kind, the verdict's method) of the gate on each
    night of ``nights`` (indices into runs, the newest judged)."""
    out = []
    for t in nights:
        first = max(0, t + 1 - GATE_HISTORY)
        verdict = judge_newest(
            [list(r) for r in runs[first : t + 1]], higher_is_better=True, threshold=0.05, alpha=alpha
        )
        point = verdict.change_point
        out.append(
            (
                verdict.is_regression,
                None if point is None else first + point.index,
                None if point is None else point.kind,
                verdict.method,
            )
        )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--noise", default="h200-testbed", choices=list(NOISES))
    ap.add_argument("--invocations", type=int, default=10)
    ap.add_argument("--series", type=int, default=20)
    ap.add_argument("--nights", type=int, default=200)
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--alpha", type=float, default=GATE_ALPHA, help="the gate's significance level (default: its own)")
    a = ap.parse_args()
    noise, rng = NOISES[a.noise], np.random.default_rng(a.seed)
    start = time.perf_counter()
    false_nights = flagged_series = judged = 0
    for _ in range(a.series):
        length = GATE_HISTORY + a.nights
        runs, _ = simulate(noise, np.ones(length), np.full(length, noise.slow_probability), a.invocations, rng)
        v = [failed for failed, *_ in verdicts(runs, range(GATE_HISTORY, length), a.alpha)]
        false_nights += sum(v)
        flagged_series += any(v)
        judged += len(v)
    steps = {}
    for size in STEP_SIZES:
        delays, offsets, share_calls, by_band = [], [], 0, 0
        for _ in range(a.series):
            length = GATE_HISTORY + AFTER
            profile = np.ones(length)
            profile[GATE_HISTORY:] *= 1 - size
            runs, _ = simulate(noise, profile, np.full(length, noise.slow_probability), a.invocations, rng)
            v = verdicts(runs, range(GATE_HISTORY, length), a.alpha)
            first = next((k for k, (failed, *_) in enumerate(v) if failed), None)
            by_band += first is not None and v[first][3] == BY_BAND
            delays.append(None if first is None else first + 1)
            if first is not None and first < FOUND_WITHIN and v[first][1] is not None:
                offsets.append(v[first][1] - GATE_HISTORY)
                share_calls += v[first][2] == MODE_SHARE
        found = [d for d in delays if d is not None and d <= FOUND_WITHIN]
        steps[f"{size:.0%}"] = {
            "recall_within_10_nights": round(len(found) / len(delays), 2),
            "caught_on_its_night": round(delays.count(1) / len(delays), 2),
            "by_band": round(by_band / len(delays), 2),
            "median_delay_nights": float(np.median(found)) if found else None,
            "named_the_step": round(offsets.count(0) / len(offsets), 2) if offsets else None,
            "runs_off": dict(sorted(Counter(o for o in offsets if o).items())),
            "called_a_mode_share_change": round(share_calls / len(offsets), 2) if offsets else None,
        }
    print(
        json.dumps(
            {
                "noise": a.noise,
                "invocations": a.invocations,
                "series": a.series,
                "alpha": a.alpha,
                "false_alarms_per_1000_series_nights": round(1000 * false_nights / judged, 2),
                "shift_free_series_with_a_false_alarm": f"{flagged_series}/{a.series}",
                "series_nights_judged": judged,
                "steps": steps,
                "seconds": round(time.perf_counter() - start, 1),
            }
        )
    )


if __name__ == "__main__":
    main()
