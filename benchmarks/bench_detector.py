"""Cost of the change-point search per dashboard series (issue 15). Run on demand, not in CI.

    python benchmarks/bench_detector.py [--series 40] [--runs 120] [--invocations 10] [--repeat 3]

Series like the fleet benchmark's (benchmarks/bench_fleet.py --invocations K): CHANGE_WINDOW runs,
a slow drift of +-1.5 %, one series in ten with a 10 % step in the middle; each run K invocations,
5 % apart, each in a 35 %-slower mode with probability 0.3. Times ``detect_change_points`` per
series given the invocations (the mode-aware path: levels, level test, share test) and given each
run's median (the median path), and prints the median and the worst of each over --repeat passes.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

from winml_perf.publish.dashboard_page import CHANGE_WINDOW
from winml_perf.stats.series.changepoint import detect_change_points


def fleet_like(count: int, runs: int, invocations: int, seed: int) -> list[list[np.ndarray]]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(count):
        t = np.arange(runs)
        level = 100 * (1 + 0.015 * np.sin(t / rng.uniform(14, 28) + rng.uniform(0, 6.28)))
        if i % 10 == 0:
            level[runs // 2 :] *= 1.10
        slow = rng.random((runs, invocations)) < 0.3
        out.append(list(level[:, None] * rng.lognormal(0, 0.05, (runs, invocations)) / np.where(slow, 1 / 0.65, 1.0)))
    return out


def per_series_ms(series: list, repeat: int) -> list[float]:
    times = []
    for _ in range(repeat):
        for s in series:
            start = time.perf_counter()
            detect_change_points(s, higher_is_better=True)
            times.append((time.perf_counter() - start) * 1e3)
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--series", type=int, default=40)
    ap.add_argument("--runs", type=int, default=CHANGE_WINDOW)
    ap.add_argument("--invocations", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    series = fleet_like(a.series, a.runs, a.invocations, a.seed)
    medians = [[float(np.median(r)) for r in s] for s in series]
    out = {}
    for name, data in (("invocations", series), ("medians", medians)):
        ms = per_series_ms(data, a.repeat)
        out[name] = {
            "median_ms": round(statistics.median(ms), 2),
            "max_ms": round(max(ms), 2),
            "total_s_per_1000_series": round(statistics.fmean(ms), 2),
        }
    print(json.dumps({"series": a.series, "runs": a.runs, "invocations": a.invocations, **out}))


if __name__ == "__main__":
    main()
