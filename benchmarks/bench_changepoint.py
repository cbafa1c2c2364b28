"""Detection quality of change points over synthetic nightly series (issue 15).

    python benchmarks/bench_changepoint.py [--seed 2] [--series 25] [--otava-python PY] [--tune]

Each series is LENGTH nightly runs of decode tokens/s. A run is 1 or 5 invocations (fresh
processes); an invocation is 10 iterations and reports their median; a run's estimate is the
median of its invocations. Noise, from the figures measured in issues 12 and 15:

- h200: invocation level ~ lognormal around 105 tok/s, sigma 7.2 % (the standard deviation of the
  ten 10-iteration invocation medians measured on two H200 machines, 93.6-119.0 tok/s); with
  probability 0.3 an invocation lands in a second mode 35 % slower; a slow drift of +-1.5 %
  (a sinusoid, period 90-180 nights); iterations within an invocation +-2 %.
- here (the 2-core machine): per-process modes 19.8k / 12.5k tok/s, the slow one in 3 of 8
  invocations; +-2.2 % between invocations of a mode (19.8, 19.8, 20.0, 19.6, 18.9k); no drift.

Shifted series carry SHIFTS steps of one size (2, 5, 10 or 20 %, random sign) at random places at
least GAP runs apart and from the ends. A detection within +-2 runs of a true shift is a hit (each
shift and each detection matched once); recall = hits / shifts, precision = hits / detections;
false change points per 1,000 runs are counted on shift-free series of the same noise.

Methods: the new E-Divisive detector (results/changepoint.py); the dashboard's rolling test
(results/significance.rolling_flags, the dashboard's former test: every run against the pooled raw iterations of the previous 5
runs, Mann-Whitney p < 0.05 and beyond 5 %; each flagged run is a detection); Apache Otava
(``compute_change_points`` with its defaults) in its own virtualenv through a subprocess on the
same series written to a CSV (benchmarks/otava_changepoints.py). ``--tune`` grids the new
method's alpha and min_size on the development seed (1).
"""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from winml_perf.results.changepoint import detect_change_points
from winml_perf.results.significance import rolling_flags

LENGTH, SHIFTS, GAP, ITERATIONS, TOLERANCE, LOOSE = 400, 4, 40, 10, 2, 10
SHIFT_SIZES = (0.02, 0.05, 0.10, 0.20)
METRIC = "decode_tokens_per_s"
DEV_SEED = 1


@dataclass(frozen=True)
class Noise:
    name: str
    level: float
    slow_probability: float
    slow_factor: float
    process_sigma: float
    iteration_sigma: float
    drift: float


H200 = Noise("h200", 105.0, 0.3, 0.65, 0.072, 0.02, 0.015)
HERE = Noise("here", 19_800.0, 3 / 8, 12_500 / 19_800, 0.022, 0.02, 0.0)


def simulate(noise: Noise, steps: np.ndarray, invocations: int, rng: np.random.Generator) -> tuple[np.ndarray, list]:
    """Per-run estimates and each run's raw iterations for a series whose true level is
    ``noise.level * steps * drift``."""
    n = len(steps)
    period, phase = rng.uniform(90, 180), rng.uniform(0, 2 * np.pi)
    level = noise.level * steps * (1 + noise.drift * np.sin(2 * np.pi * np.arange(n) / period + phase))
    mode = np.where(rng.random((n, invocations)) < noise.slow_probability, noise.slow_factor, 1.0)
    process = level[:, None] * mode * rng.lognormal(0.0, noise.process_sigma, (n, invocations))
    iterations = process[..., None] * rng.lognormal(0.0, noise.iteration_sigma, (n, invocations, ITERATIONS))
    estimates = np.median(np.median(iterations, axis=2), axis=1)
    return estimates, [it.ravel() for it in iterations]


def shift_steps(size: float, rng: np.random.Generator) -> tuple[np.ndarray, list[int]]:
    """A step profile with SHIFTS changes of ``size`` (random sign) at least GAP apart."""
    while True:
        where = np.sort(rng.integers(GAP, LENGTH - GAP, SHIFTS))
        if np.all(np.diff(where) >= GAP):
            break
    steps = np.ones(LENGTH)
    for i in where:
        steps[i:] *= 1 + size * rng.choice((-1, 1))
    return steps, [int(i) for i in where]


def make_cases(seed: int, series: int, invocations: int, noises=(H200, HERE)) -> list[dict]:
    rng = np.random.default_rng(seed)
    cases = []
    for noise in noises:
        for size in (0.0, *SHIFT_SIZES):
            for k in range(series):
                steps, truth = (np.ones(LENGTH), []) if size == 0 else shift_steps(size, rng)
                est, its = simulate(noise, steps, invocations, rng)
                cases.append({"id": f"{noise.name}-{invocations}-{size}-{k}", "noise": noise.name, "inv": invocations,
                              "size": size, "truth": truth, "est": est, "its": its})
    return cases


def detect_new(case: dict, **options) -> list[int]:
    return [c.index for c in detect_change_points(case["est"], higher_is_better=True, **options)]


def detect_rolling(case: dict) -> list[int]:
    points = [{"id": i, "status": "ok"} for i in range(LENGTH)]
    samples = {i: [{METRIC: float(v)} for v in its] for i, its in enumerate(case["its"])}
    return sorted(rolling_flags(points, samples, METRIC))


def detect_otava(cases: list[dict], python: str) -> dict[str, list[int]]:
    with tempfile.TemporaryDirectory() as tmp:
        src, out = Path(tmp) / "series.csv", Path(tmp) / "found.json"
        with open(src, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["series", "index", "value"])
            for c in cases:
                w.writerows((c["id"], i, repr(float(v))) for i, v in enumerate(c["est"]))
        subprocess.run([python, str(Path(__file__).with_name("otava_changepoints.py")), str(src), str(out)], check=True)
        return json.loads(out.read_text())


def match(truth: list[int], found: list[int], tolerance: int = TOLERANCE) -> int:
    """Hits: true shifts with a detection within ``tolerance``, each detection used once (nearest first)."""
    pairs = sorted((abs(t - f), t, f) for t in truth for f in found if abs(t - f) <= tolerance)
    used_t, used_f = set(), set()
    for _, t, f in pairs:
        if t not in used_t and f not in used_f:
            used_t.add(t)
            used_f.add(f)
    return len(used_t)


def score(cases: list[dict], found: dict[str, list[int]]) -> dict[tuple, dict]:
    """(noise, invocations, size) -> recall, precision, false per 1,000 runs (size 0)."""
    table: dict[tuple, dict] = {}
    for c in cases:
        key = (c["noise"], c["inv"], c["size"])
        row = table.setdefault(key, {"shifts": 0, "hits": 0, "loose_hits": 0, "detections": 0, "runs": 0})
        f = found[c["id"]]
        row["shifts"] += len(c["truth"])
        row["hits"] += match(c["truth"], f)
        row["loose_hits"] += match(c["truth"], f, LOOSE)
        row["detections"] += len(f)
        row["runs"] += LENGTH
    for row in table.values():
        row["recall"] = row["hits"] / row["shifts"] if row["shifts"] else float("nan")
        row["loose_recall"] = row["loose_hits"] / row["shifts"] if row["shifts"] else float("nan")
        row["precision"] = row["hits"] / row["detections"] if row["detections"] else float("nan")
        row["false_per_1000"] = row["detections"] / row["runs"] * 1000 if not row["shifts"] else float("nan")
    return table


def run_methods(cases: list[dict], otava_python: str | None, **options) -> dict[str, dict]:
    found: dict[str, dict] = {"new": {}, "rolling": {}}
    seconds = []
    for c in cases:
        t0 = time.perf_counter()
        found["new"][c["id"]] = detect_new(c, **options)
        seconds.append(time.perf_counter() - t0)
        found["rolling"][c["id"]] = detect_rolling(c)
    print(f"new method: median {np.median(seconds) * 1000:.0f} ms, max {max(seconds) * 1000:.0f} ms per {LENGTH}-run series",
          file=sys.stderr)
    if otava_python:
        found["otava"] = detect_otava(cases, otava_python)
    return {m: score(cases, f) for m, f in found.items()}


def print_table(results: dict[str, dict]) -> None:
    print("| method | noise | invocations/run | false CPs / 1,000 runs | " +
          " | ".join(f"recall {s:.0%} | precision {s:.0%}" for s in SHIFT_SIZES) + " |")
    print("|---|---|---|---|" + "---|---|" * len(SHIFT_SIZES))
    for method, table in results.items():
        for noise, inv in sorted({k[:2] for k in table}):
            cells = [f"{table[(noise, inv, 0.0)]['false_per_1000']:.2f}"]
            for s in SHIFT_SIZES:
                row = table[(noise, inv, s)]
                cells += [f"{row['recall']:.2f}", f"{row['precision']:.2f}"]
            print(f"| {method} | {noise} | {inv} | " + " | ".join(cells) + " |")
    print(f"\nrecall within +-{LOOSE} runs (is it found at all, or found but misplaced?)\n")
    print("| method | noise | invocations/run | " + " | ".join(f"{s:.0%}" for s in SHIFT_SIZES) + " |")
    print("|---|---|---|" + "---|" * len(SHIFT_SIZES))
    for method, table in results.items():
        for noise, inv in sorted({k[:2] for k in table}):
            cells = [f"{table[(noise, inv, s)]['loose_recall']:.2f}" for s in SHIFT_SIZES]
            print(f"| {method} | {noise} | {inv} | " + " | ".join(cells) + " |")


def tune(series: int) -> None:
    """Grid on the development seed, H200-like noise: false CPs / 1,000 runs and recall at >= 5 %."""
    cases = [c for inv in (1, 5) for c in make_cases(DEV_SEED, series, inv, noises=(H200,))]
    print("| alpha | min_size | invocations | false / 1,000 | recall 5% | recall 10% | recall 20% |")
    print("|---|---|---|---|---|---|---|")
    for alpha in (0.005, 0.01, 0.02):
        for min_size in (3, 5, 8):
            found = {c["id"]: detect_new(c, alpha=alpha, min_size=min_size) for c in cases}
            table = score(cases, found)
            for inv in (1, 5):
                r = [table[("h200", inv, s)]["recall"] for s in (0.05, 0.10, 0.20)]
                fp = table[("h200", inv, 0.0)]["false_per_1000"]
                print(f"| {alpha} | {min_size} | {inv} | {fp:.2f} | " + " | ".join(f"{v:.2f}" for v in r) + " |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=2)
    parser.add_argument("--series", type=int, default=25, help="series per noise x invocations x shift size")
    parser.add_argument("--otava-python", help="python of a virtualenv with apache-otava installed")
    parser.add_argument("--tune", action="store_true", help="grid the new method's parameters on the development seed")
    args = parser.parse_args()
    if args.tune:
        tune(args.series)
        return
    cases = [c for inv in (1, 5) for c in make_cases(args.seed, args.series, inv)]
    print_table(run_methods(cases, args.otava_python))


if __name__ == "__main__":
    main()
