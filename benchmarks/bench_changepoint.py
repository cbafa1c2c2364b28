"""Detection quality of change points over synthetic nightly series (issue 15).

    python benchmarks/bench_changepoint.py [--seed 2] [--series 15] [--invocations 1 5 10]
        [--noise h200 h200-testbed here] [--methods ...] [--otava-python PY] [--tune]

The series and the noise models (why each parameter is what it is) are in
benchmarks/changepoint_sim.py: 400 nightly runs of K invocations each; shifted series carry 4
steps of one size (2, 5, 10 or 20 %, random sign) at least 40 runs apart and from the ends;
"share" series carry 4 steps of the slow mode's probability (+0.25, back, +0.25, back). A
detection within +-2 runs of a true shift is a hit (each shift and each detection matched once;
also printed within +-5); recall = hits / shifts, precision = hits / detections; false change
points per 1,000 runs are counted on the shift-free series of the same noise.

Methods, all on the same series:
- ``median``: E-Divisive (stats/series/changepoint.py) on each run's median of its invocations (the
  first input of issue 15).
- ``pooled``: candidate (a), E-Divisive over every invocation, runs permuted
  (benchmarks/changepoint_pooled.py).
- ``mode-aware``: candidate (b) and the product's method: ``detect_change_points`` given each run's
  invocations (stats/series/run_levels.py); level and mode-share change points both count.
- ``rolling``: the dashboard's former test (results/significance.rolling_flags: every run against
  the pooled raw iterations of the previous 5 runs, Mann-Whitney p < 0.05 and beyond 5 %).
- ``otava`` / ``otava-mode-aware``: Apache Otava (``compute_change_points``, its defaults) in its
  own virtualenv through a subprocess (benchmarks/otava_changepoints.py), on the ``median`` series
  and on the mode-aware level series.
``--tune`` grids the mode-aware method's alpha and local-shift floor on the development seed (1);
nothing is tuned on the test seed (2).
"""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from changepoint_pooled import detect_pooled  # noqa: E402
from changepoint_sim import LENGTH, NOISES, SHARE, SHIFT_SIZES, make_cases  # noqa: E402
from winml_perf.stats.series.changepoint import detect_change_points  # noqa: E402
from winml_perf.stats.series.run_levels import mode_aware_levels  # noqa: E402
from winml_perf.stats.significance import rolling_flags  # noqa: E402

TOLERANCE, LOOSE = 2, 5
METRIC = "decode_tokens_per_s"
DEV_SEED = 1
SIZES = (*SHIFT_SIZES, SHARE)
LOCAL_METHODS = ("median", "pooled", "mode-aware", "rolling")


def detect_median(case: dict, **options) -> list[int]:
    return [c.index for c in detect_change_points(case["est"], higher_is_better=True, **options)]


def detect_mode_aware(case: dict, **options) -> list[int]:
    return sorted({c.index for c in detect_change_points(list(case["invocations"]), higher_is_better=True, **options)})


def detect_rolling(case: dict) -> list[int]:
    points = [{"id": i, "status": "ok"} for i in range(LENGTH)]
    samples = {i: [{METRIC: float(v)} for v in its] for i, its in enumerate(case["its"])}
    return sorted(rolling_flags(points, samples, METRIC))


DETECTORS = {
    "median": detect_median,
    "pooled": lambda c, **o: detect_pooled(c["invocations"], **o),
    "mode-aware": detect_mode_aware,
    "rolling": lambda c, **o: detect_rolling(c),
}


def detect_otava(series: dict[str, np.ndarray], python: str) -> dict[str, list[int]]:
    with tempfile.TemporaryDirectory() as tmp:
        src, out = Path(tmp) / "series.csv", Path(tmp) / "found.json"
        with open(src, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["series", "index", "value"])
            for name, values in series.items():
                w.writerows((name, i, repr(float(v))) for i, v in enumerate(values))
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
        row = table.setdefault(
            (c["noise"], c["inv"], c["size"]), {"shifts": 0, "hits": 0, "loose": 0, "found": 0, "runs": 0}
        )
        f = found[c["id"]]
        row["shifts"] += len(c["truth"])
        row["hits"] += match(c["truth"], f)
        row["loose"] += match(c["truth"], f, LOOSE)
        row["found"] += len(f)
        row["runs"] += LENGTH
    nan = float("nan")
    for row in table.values():
        row["recall"] = row["hits"] / row["shifts"] if row["shifts"] else nan
        row["loose_recall"] = row["loose"] / row["shifts"] if row["shifts"] else nan
        row["precision"] = row["hits"] / row["found"] if row["found"] else nan
        row["false_per_1000"] = row["found"] / row["runs"] * 1000 if not row["shifts"] else nan
    return table


def run_methods(cases: list[dict], methods, otava_python: str | None, **options) -> dict[str, dict]:
    found: dict[str, dict] = {}
    for method in methods:
        if method.startswith("otava"):
            continue
        found[method], seconds = {}, []
        for c in cases:
            t0 = time.perf_counter()
            found[method][c["id"]] = DETECTORS[method](c, **({} if method == "rolling" else options))
            seconds.append(time.perf_counter() - t0)
        print(
            f"{method}: median {np.median(seconds) * 1000:.0f} ms, max {max(seconds) * 1000:.0f} ms per {LENGTH}-run series",
            file=sys.stderr,
            flush=True,
        )
    if otava_python and "otava" in methods:
        found["otava"] = detect_otava({c["id"]: c["est"] for c in cases}, otava_python)
    if otava_python and "otava-mode-aware" in methods:
        found["otava-mode-aware"] = detect_otava(
            {c["id"]: mode_aware_levels(list(c["invocations"])).level for c in cases}, otava_python
        )
    return {m: score(cases, f) for m, f in found.items()}


def _cell(table: dict, key: tuple, field: str) -> str:
    return f"{table[key][field]:.2f}" if key in table else "-"


def print_table(results: dict[str, dict]) -> None:
    print(
        "| method | noise | inv/run | false CPs / 1,000 runs | "
        + " | ".join(f"recall {s if s == SHARE else f'{s:.0%}'} | prec." for s in SIZES)
        + " |"
    )
    print("|---|---|---|---|" + "---|---|" * len(SIZES))
    for method, table in results.items():
        for noise, inv in sorted({k[:2] for k in table}):
            cells = [_cell(table, (noise, inv, 0.0), "false_per_1000")]
            for s in SIZES:
                cells += [_cell(table, (noise, inv, s), "recall"), _cell(table, (noise, inv, s), "precision")]
            print(f"| {method} | {noise} | {inv} | " + " | ".join(cells) + " |")
    print(f"\nrecall within +-{LOOSE} runs\n")
    print("| method | noise | inv/run | " + " | ".join(s if s == SHARE else f"{s:.0%}" for s in SIZES) + " |")
    print("|---|---|---|" + "---|" * len(SIZES))
    for method, table in results.items():
        for noise, inv in sorted({k[:2] for k in table}):
            print(
                f"| {method} | {noise} | {inv} | "
                + " | ".join(_cell(table, (noise, inv, s), "loose_recall") for s in SIZES)
                + " |"
            )


def tune(series: int, noises, invocations) -> None:
    """Grid on the development seed (1): alpha x the local-shift floor of the mode-aware method;
    false CPs / 1,000 runs and recall at 5 % / 10 % / share steps."""
    cases = [
        c for inv in invocations for c in make_cases(DEV_SEED, series, inv, noises, sizes=(0.0, 0.05, 0.10, SHARE))
    ]
    print("| alpha | min_shift | noise | inv | false / 1,000 | recall 5% | recall 10% | recall share |")
    print("|---|---|---|---|---|---|---|---|")
    for alpha in (0.01, 0.02):
        for floor in (0.0, 0.02, 0.03, 0.04):
            table = score(cases, {c["id"]: detect_mode_aware(c, alpha=alpha, min_shift=floor) for c in cases})
            for noise, inv in sorted({k[:2] for k in table}):
                cells = [_cell(table, (noise, inv, 0.0), "false_per_1000")] + [
                    _cell(table, (noise, inv, s), "recall") for s in (0.05, 0.10, SHARE)
                ]
                print(f"| {alpha} | {floor} | {noise} | {inv} | " + " | ".join(cells) + " |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=2)
    parser.add_argument("--series", type=int, default=15, help="series per noise x invocations x shift size")
    parser.add_argument("--invocations", type=int, nargs="+", default=[1, 5, 10])
    parser.add_argument("--noise", nargs="+", default=list(NOISES), choices=list(NOISES))
    parser.add_argument(
        "--methods",
        nargs="+",
        default=[*LOCAL_METHODS, "otava", "otava-mode-aware"],
        choices=[*LOCAL_METHODS, "otava", "otava-mode-aware"],
    )
    parser.add_argument("--otava-python", help="python of a virtualenv with apache-otava installed")
    parser.add_argument("--tune", action="store_true", help="grid alpha and the floor on the development seed (1)")
    args = parser.parse_args()
    noises = [NOISES[n] for n in args.noise]
    if args.tune:
        tune(args.series, noises, args.invocations)
        return
    cases = [c for inv in args.invocations for c in make_cases(args.seed, args.series, inv, noises)]
    print_table(run_methods(cases, args.methods, args.otava_python))


if __name__ == "__main__":
    main()
