"""Synthetic nightly series for benchmarks/bench_changepoint.py: the noise models, and series with
injected shifts of the level or of the slow mode's share.

A series is LENGTH nightly runs of decode tokens/s. A run is K invocations (fresh processes); an
invocation is ITERATIONS iterations and reports their median. Per invocation: the testbed's level
(times the injected steps and a slow drift), times its mode (the slow mode with probability
``slow_probability``), times lognormal process noise; per iteration: lognormal iteration noise.

Why each parameter is what it is (figures of issues 12 and 15, measured 2026-12-01):

- ``h200`` (pessimistic): process sigma 0.072, the spread of ten 10-iteration invocation medians of
  one command on TWO H200 machines (101.0, 103.9, 108.5, 93.6, 107.6 and 119.0, 118.5, 112.8,
  107.7, 114.9 tok/s: log SD 0.075, relative SD 0.073), so it carries the difference between the
  machines, which a series of one testbed does not have. Slow mode in 30 % of invocations, 35 %
  slower: the per-process modes measured here (12.5k vs 19.8k tok/s, ratio 0.635, 3 of 8
  processes) and WebGPU's decode-step modes on the H200 (9.8 vs 6.2 ms, ratio 0.633); on the H200
  CPU route no invocation median fell in such a mode (all ten within 93.6-119.0), so modes in every
  H200 series are the pessimistic case.
- ``h200-testbed`` (as measured on one testbed): process sigma 0.050 so that 10-iteration
  invocation medians spread by 0.051, the pooled within-machine log SD of the same ten
  invocations (0.060 on one machine, 0.041 on the other); the same modes as ``h200``.
- ``here`` (the 2-core machine): modes 19.8k / 12.5k tok/s, the slow one in 3 of 8 processes;
  within a mode 0.022 (19.8, 19.8, 20.0, 19.6, 18.9k: relative SD 0.022; slow 12.8, 12.5, 12.1k:
  0.028); no drift.
- Drift +-1.5 % (a sinusoid of period 90-180 nights, random phase) on the H200 rows: an assumption,
  not a measurement (no series of nights on one H200 testbed exists); kept from the first model.
- Iterations +-2 % within an invocation: an assumption of the first model; at 10 iterations it adds
  ~0.008 to an invocation median's spread.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

LENGTH, SHIFTS, GAP, ITERATIONS = 400, 4, 40, 10
SHIFT_SIZES = (0.02, 0.05, 0.10, 0.20)
#: A "share" series: the slow mode's probability steps by this much (up, down, up, down).
SHARE_STEP = 0.25
SHARE = "share"


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
H200_TESTBED = Noise("h200-testbed", 105.0, 0.3, 0.65, 0.050, 0.02, 0.015)
HERE = Noise("here", 19_800.0, 3 / 8, 12_500 / 19_800, 0.022, 0.02, 0.0)
NOISES = {n.name: n for n in (H200, H200_TESTBED, HERE)}


def true_levels(noise: Noise, steps: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Each run's true level in the fast mode: ``noise.level * steps * drift``."""
    period, phase = rng.uniform(90, 180), rng.uniform(0, 2 * np.pi)
    return noise.level * steps * (1 + noise.drift * np.sin(2 * np.pi * np.arange(len(steps)) / period + phase))


def simulate(
    noise: Noise, steps: np.ndarray, slow: np.ndarray, invocations: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """(invocation medians (n, K), raw iterations (n, K, ITERATIONS)) of a series whose true
    level is ``true_levels`` and whose slow-mode probability per run is ``slow``."""
    return measure(noise, true_levels(noise, steps, rng), slow, invocations, rng)


def measure(
    noise: Noise, level: np.ndarray, slow: np.ndarray, invocations: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """``simulate`` for given true levels."""
    n = len(level)
    mode = np.where(rng.random((n, invocations)) < slow[:, None], noise.slow_factor, 1.0)
    process = level[:, None] * mode * rng.lognormal(0.0, noise.process_sigma, (n, invocations))
    iterations = process[..., None] * rng.lognormal(0.0, noise.iteration_sigma, (n, invocations, ITERATIONS))
    return np.median(iterations, axis=2), iterations


def _places(rng: np.random.Generator) -> np.ndarray:
    while True:
        where = np.sort(rng.integers(GAP, LENGTH - GAP, SHIFTS))
        if np.all(np.diff(where) >= GAP):
            return where


def shift_steps(size: float, rng: np.random.Generator) -> tuple[np.ndarray, list[int]]:
    """A step profile with SHIFTS changes of ``size`` (random sign) at least GAP apart."""
    where = _places(rng)
    steps = np.ones(LENGTH)
    for i in where:
        steps[i:] *= 1 + size * rng.choice((-1, 1))
    return steps, [int(i) for i in where]


def share_steps(base: float, rng: np.random.Generator) -> tuple[np.ndarray, list[int]]:
    """Slow-mode probability per run: ``base``, then +SHARE_STEP, back, up, back at SHIFTS places."""
    where = _places(rng)
    slow = np.full(LENGTH, base)
    for k, i in enumerate(where):
        slow[i:] = base + SHARE_STEP * (k % 2 == 0)
    return slow, [int(i) for i in where]


def make_cases(seed: int, series: int, invocations: int, noises, sizes=(0.0, *SHIFT_SIZES, SHARE)) -> list[dict]:
    """Cases of every noise x size (0: shift-free; SHARE: slow-mode share steps, modes only)."""
    rng = np.random.default_rng(seed)
    cases = []
    for noise in noises:
        for size in sizes:
            if size == SHARE and noise.slow_probability == 0:
                continue
            for k in range(series):
                steps, slow, truth = np.ones(LENGTH), np.full(LENGTH, noise.slow_probability), []
                if size == SHARE:
                    slow, truth = share_steps(noise.slow_probability, rng)
                elif size:
                    steps, truth = shift_steps(size, rng)
                inv, its = simulate(noise, steps, slow, invocations, rng)
                cases.append(
                    {
                        "id": f"{noise.name}-{invocations}-{size}-{k}",
                        "noise": noise.name,
                        "inv": invocations,
                        "size": size,
                        "truth": truth,
                        "invocations": inv,
                        "est": np.median(inv, axis=1),
                        "its": its.reshape(LENGTH, -1),
                    }
                )
    return cases
