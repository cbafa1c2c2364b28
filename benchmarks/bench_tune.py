"""Racing vs measuring every candidate to the same precision: does `winml tune`'s race name the same
route, and at what fraction of the tokens and time?

Simulated (the default): the race's measurement seam replaced by routes of known speed. Each round a
drift shared by every route (lognormal σ 5 %), a per-process effect per invocation (σ 3 %) and
per-iteration noise (σ 5 %, 5 iterations); an invocation costs 2 s of load plus its iterations'
tokens at the route's speed (config: 100 tok/s decode, 64 + 64 tokens, 1 warmup). The race runs to
its own stop (no budget); "everything" measures every route for as many paired rounds as the race
ran (its finalists' precision), then judges with the same verdict code. Over --trials seeds.

Real (--real BUNDLE, flags after --): `run_tune` on the bundle twice, racing and then every route
for the race's number of rounds (min_rounds = max_rounds), nothing stored; reports both verdicts,
tokens and wall time.

    python benchmarks/bench_tune.py --trials 40
    python benchmarks/bench_tune.py --real bundles/tiny-qwen2-pipeline -- --eps cpu,webgpu --stages context,iterator
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np

from winml_perf.tune.candidates import CONFIG_LABEL
from winml_perf.tune.goal import Budget
from winml_perf.tune.race import Race, RaceSettings, RoundResult
from winml_perf.tune.standings import verdict

DECODE = "decode_tokens_per_s"
#: Route speeds relative to config (decode tok/s ratio), a spread like the tiny pipeline's routes.
RATIOS = {
    CONFIG_LABEL: 1.0,
    "r1.30": 1.30,
    "r1.20": 1.20,
    "r1.00": 1.00,
    "r0.90": 0.90,
    "r0.60": 0.60,
    "r0.45": 0.45,
    "r0.20": 0.20,
    "r0.10": 0.10,
    "r0.05": 0.05,
    "r0.02": 0.02,
    "r0.01": 0.01,
}
PROMPT, NEW, ITERATIONS, WARMUP, LOAD_S, CONFIG_TOK_S = 64, 64, 5, 1, 2.0, 100.0


class Simulated:
    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.now = 0.0

    def clock(self) -> float:
        return self.now

    def __call__(self, k: int, labels) -> RoundResult:
        drift = self.rng.lognormal(0.0, 0.05)
        values = {}
        for label in labels:
            speed = CONFIG_TOK_S * RATIOS[label] * drift * self.rng.lognormal(0.0, 0.03)
            decode = speed * self.rng.lognormal(0.0, 0.05, ITERATIONS)
            self.now += LOAD_S + (ITERATIONS + WARMUP) * (PROMPT + NEW) / speed
            values[label] = {DECODE: decode.tolist()}
        return RoundResult(values, (ITERATIONS + WARMUP) * (PROMPT + NEW) * len(labels))


def _run(seed: int, min_rounds: int, max_rounds: int) -> tuple[Race, Simulated]:
    sim = Simulated(seed)
    settings = RaceSettings(DECODE, Budget(seconds=1e9), seed, min_rounds=min_rounds, max_rounds=max_rounds)
    return Race(list(RATIOS), settings, sim, clock=sim.clock).run(), sim


def simulated(trials: int, cap: int = 30) -> None:
    """The race against every route measured for the race's own rounds (the precision its finalists
    reached) and for the race's cap of rounds (the fixed design a user would otherwise run)."""
    truth = max(RATIOS, key=RATIOS.__getitem__)
    rows = {"race": [], "everything at the race's rounds": [], f"everything at {cap} rounds": []}
    for seed in range(trials):
        race, sim = _run(seed, 2, cap)
        rows["race"].append((race, sim.now, race))
        for name, rounds in ((f"everything at {cap} rounds", cap), ("everything at the race's rounds", race.rounds)):
            full, sim_f = _run(seed + 10_000, rounds, rounds)
            rows[name].append((full, sim_f.now, race))
    print(
        f"simulated: {len(RATIOS)} routes, decode ratios to config {sorted(RATIOS.values(), reverse=True)}; {trials} seeds"
    )
    for name, runs in rows.items():
        verdicts = [verdict(r, {}, "decode") for r, _, _ in runs]
        named = sum(v.winner == truth for v in verdicts)
        same = sum(verdict(r, {}, "decode").winner == verdict(race, {}, "decode").winner for r, _, race in runs)
        kinds = ", ".join(f"{k} {sum(v.kind == k for v in verdicts)}" for k in sorted({v.kind for v in verdicts}))
        tokens = statistics.median(r.tokens for r, _, _ in runs)
        seconds = statistics.median(s for _, s, _ in runs)
        race_tokens = [race.tokens / r.tokens for r, _, race in runs]
        race_time = [s_race / s for (r, s, _), (_, s_race, _) in zip(runs, rows["race"])]
        print(
            f"  {name}: names the fastest ({truth}) in {named}/{trials}; same route as the race {same}/{trials}; {kinds}"
        )
        print(
            f"    median {tokens:.0f} tokens, {seconds:.0f} s simulated; race / this: tokens median"
            f" {statistics.median(race_tokens):.2f}, time median {statistics.median(race_time):.2f}"
        )


def real(bundle: Path, flags: list[str]) -> None:
    from winml_perf.tune.goal import parse_budget
    from winml_perf.tune.session import TuneRequest, run_tune

    opts = dict(zip(flags[::2], flags[1::2]))
    base = TuneRequest(
        bundle=bundle,
        budget=parse_budget(opts.get("--budget", "1800s")),
        eps=tuple(opts.get("--eps", "cpu").split(",")),
        stages=tuple(filter(None, opts.get("--stages", "").split(","))),
        equivalence=False,
        iterations=int(opts.get("--iterations", 3)),
        max_new_tokens=int(opts.get("--max-new-tokens", 16)),
        seed=int(opts.get("--seed", 0)),
        no_store=True,
    )
    quiet = lambda line: None  # noqa: E731
    t0 = time.monotonic()
    raced = run_tune(base, say=quiet)
    race_s = time.monotonic() - t0
    rounds = raced.race.rounds
    from dataclasses import replace

    t0 = time.monotonic()
    full = run_tune(replace(base, min_rounds=rounds, max_rounds=rounds), say=quiet)
    full_s = time.monotonic() - t0
    print(f"real: {bundle} {' '.join(flags)} (equivalence off, nothing stored)")
    for name, o, s in (("race", raced, race_s), ("everything", full, full_s)):
        print(f"  {name:<10} {o.race.rounds} rounds, {o.race.tokens} tokens, {s:.0f} s: {o.verdict.text}")
    print(f"  race / everything: tokens {raced.race.tokens / max(full.race.tokens, 1):.2f}, time {race_s / full_s:.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=40)
    ap.add_argument("--real", type=Path, default=None)
    ap.add_argument("flags", nargs="*")
    args = ap.parse_args()
    if args.real is None:
        simulated(args.trials)
    else:
        real(args.real, args.flags)


if __name__ == "__main__":
    main()
