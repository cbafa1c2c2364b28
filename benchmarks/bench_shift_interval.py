"""Does a change point's shift interval hold? Coverage on synthetic series (issue 15). On demand.

    python benchmarks/bench_shift_interval.py [--noise h200-testbed] [--invocations 10] [--series 40] [--seed 5]

A change point reports its shift, the step over the 10 runs either side, with a 95 % interval
(stats/series/step_size.py; before: the whole segments' medians, bootstrapped). That interval is
computed as if the split had been fixed in advance, but the split is the one that maximised the
divergence, and the gate reads it on the night the change point first passes its test. This
counts, for level change points found within +-2 runs of a true step (series and noise of
benchmarks/changepoint_sim.py, the product's mode-aware input), how often the interval covers:

- ``step``: the injected step itself, (1 + size)^(+-1) - 1, what a reader takes the shift to be;
- ``segments``: the same ratio of the true (noise-free, fast-mode) levels' medians over the
  whole segments either side, what the shift estimated before it was the local step (it differs
  from the step by the slow drift and by a misplaced split);

in two settings:

- ``dashboard``: the whole 400-run series of benchmarks/bench_changepoint.py with 4 steps;
- ``gate``: a step 40 runs into a series, judged night after night on the newest GATE_HISTORY
  runs as compare/gate.py does (threshold 5 %); the interval of the change point of the first
  night whose verdict is a regression, and the ratio of its shift to the step (the winner's curse).
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from changepoint_sim import LENGTH, NOISES, SHIFT_SIZES, measure, shift_steps, true_levels
from winml_perf.compare.gate import GATE_HISTORY
from winml_perf.stats.series.changepoint import LEVEL, detect_change_points, judge_newest

TOLERANCE = 2
GATE_STEPS = (0.05, 0.10, 0.20)
GATE_NIGHTS = 20


def _covers(point, truth: float) -> bool:
    return point.shift_low <= truth <= point.shift_high


def _segment_truth(level: np.ndarray, cuts: list[int], cut: int) -> float:
    bounds = [0, *cuts, len(level)]
    k = bounds.index(cut)
    return float(np.median(level[cut : bounds[k + 1]]) / np.median(level[bounds[k - 1] : cut]) - 1.0)


def dashboard(noise, invocations: int, series: int, rng: np.random.Generator) -> dict:
    out = {}
    for size in SHIFT_SIZES:
        step_hits = segment_hits = matched = 0
        widths = []
        for _ in range(series):
            steps, where = shift_steps(size, rng)
            level = true_levels(noise, steps, rng)
            runs, _ = measure(noise, level, np.full(LENGTH, noise.slow_probability), invocations, rng)
            points = [
                p for p in detect_change_points([list(r) for r in runs], higher_is_better=True) if p.kind == LEVEL
            ]
            cuts = [p.index for p in points]
            for true_index in where:
                near = [p for p in points if abs(p.index - true_index) <= TOLERANCE]
                if not near:
                    continue
                p = min(near, key=lambda q: abs(q.index - true_index))
                matched += 1
                step_hits += _covers(p, steps[true_index] / steps[true_index - 1] - 1.0)
                segment_hits += _covers(p, _segment_truth(level, cuts, p.index))
                widths.append(p.shift_high - p.shift_low)
        out[f"{size:.0%}"] = {
            "matched": matched,
            "covers_step": _share(step_hits, matched),
            "covers_segments": _share(segment_hits, matched),
            "median_width_pct": round(100 * float(np.median(widths)), 2) if widths else None,
        }
    return out


def gate(noise, invocations: int, series: int, rng: np.random.Generator) -> dict:
    out = {}
    for size in GATE_STEPS:
        hits = segment_hits = flagged = 0
        ratios, widths = [], []
        for _ in range(series):
            length = GATE_HISTORY + GATE_NIGHTS
            steps = np.ones(length)
            steps[GATE_HISTORY:] *= 1 - size
            level = true_levels(noise, steps, rng)
            runs, _ = measure(noise, level, np.full(length, noise.slow_probability), invocations, rng)
            for t in range(GATE_HISTORY, length):
                first = t + 1 - GATE_HISTORY
                window = [list(r) for r in runs[first : t + 1]]
                verdict = judge_newest(window, higher_is_better=True, threshold=0.05)
                if verdict.is_regression and verdict.change_point.kind == LEVEL:
                    p = verdict.change_point
                    flagged += 1
                    hits += _covers(p, -size)
                    seg = level[first : t + 1]
                    segment_hits += _covers(p, float(np.median(seg[p.index :]) / np.median(seg[: p.index]) - 1.0))
                    ratios.append(p.shift / -size)
                    widths.append(p.shift_high - p.shift_low)
                    break
        out[f"{size:.0%}"] = {
            "flagged_by_a_level_point": f"{flagged}/{series}",
            "covers_step": _share(hits, flagged),
            "covers_segments": _share(segment_hits, flagged),
            "median_shift_over_step": round(float(np.median(ratios)), 2) if ratios else None,
            "median_width_pct": round(100 * float(np.median(widths)), 2) if widths else None,
        }
    return out


def _share(hits: int, of: int) -> float | None:
    return round(hits / of, 2) if of else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--noise", default="h200-testbed", choices=list(NOISES))
    ap.add_argument("--invocations", type=int, default=10)
    ap.add_argument("--series", type=int, default=40)
    ap.add_argument("--seed", type=int, default=5)
    a = ap.parse_args()
    noise, rng = NOISES[a.noise], np.random.default_rng(a.seed)
    start = time.perf_counter()
    result = {
        "noise": a.noise,
        "invocations": a.invocations,
        "series": a.series,
        "seed": a.seed,
        "dashboard": dashboard(noise, a.invocations, a.series, rng),
        "gate": gate(noise, a.invocations, a.series, rng),
    }
    result["seconds"] = round(time.perf_counter() - start, 1)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
