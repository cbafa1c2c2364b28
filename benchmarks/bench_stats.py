"""Cost of the statistics after measuring, at 10^3 ... 10^6 samples.

Run as a script (prints a markdown table):   python benchmarks/bench_stats.py [--sizes 1000 10000]
or under pytest-benchmark:                   pytest benchmarks/bench_stats.py --benchmark-enable

Samples are synthetic (the cost depends on their number and grouping, not their source): decode
step latencies with two modes, grouped as 10 invocations (or 10 pairs of invocations) of n/10
iterations, or as generations of 128 steps. The script also times today's exact-sum median CI
(winml_perf.stats.sample_stats.median_ci) in a child process under a time limit.
"""

from __future__ import annotations

import argparse
import multiprocessing
import time

import numpy as np
import pytest

from winml_perf.stats import (
    detect_drift,
    detect_modes,
    generation_percentiles,
    hierarchical_bootstrap_median,
    median_ci,
    median_interval,
    paired_bootstrap_ratio,
    paired_ratio,
    variance_components,
)

SIZES = (1_000, 10_000, 100_000, 1_000_000)
INVOCATIONS = 10
GENERATION_STEPS = 128
OLD_TIMEOUT_S = 120.0


def steps(n: int, seed: int = 0) -> np.ndarray:
    """n decode-step latencies in ms: 61 % near 6.2, 39 % near 9.8."""
    rng = np.random.default_rng(seed)
    fast = rng.random(n) < 0.61
    return np.where(fast, 6.2, 9.8) * np.exp(rng.normal(0.0, 0.03, n))


def grouped(n: int, size: int, seed: int = 0) -> list[np.ndarray]:
    return np.array_split(steps(n, seed), max(1, n // size))


def cases(n: int) -> dict:
    """name -> zero-argument callable doing the work on n samples."""
    flat = steps(n)
    runs = np.array_split(flat, INVOCATIONS)
    other = np.array_split(steps(n, seed=1), INVOCATIONS)
    generations = grouped(n, GENERATION_STEPS)
    unimodal = np.random.default_rng(2).lognormal(2.0, 0.1, n)
    return {
        "median_ci (binomial quantile)": lambda: median_ci(flat),
        "median_interval (10 invocations)": lambda: median_interval(runs),
        "hierarchical_bootstrap_median": lambda: hierarchical_bootstrap_median(runs),
        "paired_ratio (10 pairs)": lambda: paired_ratio(runs, other),
        "paired_bootstrap_ratio": lambda: paired_bootstrap_ratio(runs, other),
        "variance_components": lambda: variance_components(runs),
        "generation_percentiles (128-step generations)": lambda: generation_percentiles(generations),
        "detect_modes (two modes)": lambda: detect_modes(flat),
        "detect_modes (one lognormal mode: EM runs longest)": lambda: detect_modes(unimodal),
        "detect_drift": lambda: detect_drift(runs),
    }


#: What one record of a two-level run would compute after measuring.
RECORD = (
    "median_interval (10 invocations)",
    "generation_percentiles (128-step generations)",
    "detect_modes (one lognormal mode: EM runs longest)",
    "detect_drift",
    "variance_components",
)


def best_of(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def _old_median_ci(n: int) -> None:
    from winml_perf.stats import sample_stats as stats

    stats.median_ci_ranks.cache_clear()
    stats.median_ci(list(steps(n)))


def time_old_median_ci(n: int, timeout_s: float = OLD_TIMEOUT_S) -> float | None:
    """Seconds today's exact-sum median_ci takes on n samples; None past timeout_s."""
    child = multiprocessing.get_context("spawn").Process(target=_old_median_ci, args=(n,))
    start = time.perf_counter()
    child.start()
    child.join(timeout_s)
    elapsed = time.perf_counter() - start
    if child.is_alive():
        child.terminate()
        child.join()
        return None
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--old-sizes", type=int, nargs="*", default=[1_000, 10_000])
    parser.add_argument("--old-timeout", type=float, default=OLD_TIMEOUT_S)
    args = parser.parse_args()
    table: dict[str, list[float]] = {}
    for n in args.sizes:
        for name, fn in cases(n).items():
            table.setdefault(name, []).append(best_of(fn, args.repeats))
    table["one record's statistics (sum of the above marked *)"] = [
        sum(table[name][i] for name in RECORD) for i in range(len(args.sizes))
    ]
    print("| function | " + " | ".join(f"n = {n:,}" for n in args.sizes) + " |")
    print("|---|" + "---|" * len(args.sizes))
    for name, secs in table.items():
        mark = " *" if name in RECORD else ""
        print(f"| {name}{mark} | " + " | ".join(f"{s * 1e3:.1f} ms" for s in secs) + " |")
    if args.old_sizes:
        start = time_old_median_ci(6)  # the child's start and imports alone
        print(f"today's bench.stats.median_ci, child process start + n = 6: {start:.2f} s")
    for n in args.old_sizes:
        old = time_old_median_ci(n, args.old_timeout)
        shown = f"{old:.2f} s in its child process" if old is not None else f"> {args.old_timeout:.0f} s (stopped)"
        print(f"today's bench.stats.median_ci, n = {n:,}: {shown}")


@pytest.mark.parametrize("n", SIZES, ids=[f"n{n}" for n in SIZES])
@pytest.mark.parametrize("name", list(cases(1_000)))
def test_statistics_cost(benchmark, name, n):
    fn = cases(n)[name]
    result = benchmark(fn)
    assert result is not None


if __name__ == "__main__":
    main()
