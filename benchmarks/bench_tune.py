"""Racing vs measuring every candidate to the same precision: does `winml tune`'s race name the same
route, and at what fraction of the tokens and time?

Simulated (the default): the race's measurement seam replaced by routes of known speed. Each round a
drift shared by every route (lognormal σ 5 %), a per-process effect per invocation (σ 3 %) and
per-iteration noise (σ 5 %, 5 iterations); an invocation costs 2 s of load plus its iterations'
tokens at the route's speed (config: 100 tok/s decode, 64 + 64 tokens, 1 warmup). The race runs to
its own stop (no budget), opening with --screen-rounds short rounds (one iteration; 0: none) as
`winml tune` does; "everything" measures every route in full for as many paired rounds as the race
ran (its short rounds counted as rounds), and for its full rounds only (the stricter comparison),
then judges with the same verdict code. Over --trials seeds; for each design, how many trials have the
race at or below 0.30 of its tokens (issue 37's target), and the worst and best trial. --equal adds how often a route as fast
as the fastest is dropped (equal and near-equal sets), and the screen's sensitivity to one route
noisier than the rest.

Real (--real BUNDLE, flags after --): `run_tune` on the bundle, racing and then every route for the
race's number of rounds (min_rounds = max_rounds, no screen), and for its full rounds when it
screened; nothing stored; reports the verdicts, tokens and wall time.

    python benchmarks/bench_tune.py --trials 40 [--screen-rounds 2] [--equal]
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
SCREEN_ITERATIONS = 1
#: Issue 37's target: the race at no more than this fraction of the tokens of measuring every route.
TOKENS_TARGET = 0.30
SCREEN_ROUNDS = 2  # what `winml tune` runs (tune/session.py TuneRequest.screen_rounds)


class Simulated:
    def __init__(self, seed: int, ratios: dict[str, float] = RATIOS) -> None:
        self.rng = np.random.default_rng(seed)
        self.ratios = ratios
        self.now = 0.0

    def clock(self) -> float:
        return self.now

    def __call__(self, k: int, labels, iterations: int = ITERATIONS) -> RoundResult:
        drift = self.rng.lognormal(0.0, 0.05)
        values = {}
        for label in labels:
            speed = CONFIG_TOK_S * self.ratios[label] * drift * self.rng.lognormal(0.0, 0.03)
            decode = speed * self.rng.lognormal(0.0, 0.05, iterations)
            self.now += LOAD_S + (iterations + WARMUP) * (PROMPT + NEW) / speed
            values[label] = {DECODE: decode.tolist()}
        return RoundResult(values, (iterations + WARMUP) * (PROMPT + NEW) * len(labels))

    def short(self, k: int, labels) -> RoundResult:
        """A screening round: the same process and drift model, one measured iteration."""
        return self(k, labels, SCREEN_ITERATIONS)


def _run(
    seed: int, min_rounds: int, max_rounds: int, screen_rounds: int = 0, ratios: dict[str, float] = RATIOS
) -> tuple[Race, Simulated]:
    sim = Simulated(seed, ratios)
    settings = RaceSettings(
        DECODE,
        Budget(seconds=1e9),
        seed,
        min_rounds=min_rounds,
        max_rounds=max_rounds,
        tokens_per_invocation=(ITERATIONS + WARMUP) * (PROMPT + NEW),
        screen_rounds=screen_rounds,
        screen_tokens_per_invocation=(SCREEN_ITERATIONS + WARMUP) * (PROMPT + NEW),
    )
    screen = sim.short if screen_rounds else None
    return Race(list(ratios), settings, sim, clock=sim.clock, screen=screen).run(), sim


def simulated(trials: int, screen_rounds: int, cap: int = 30) -> None:
    """The race against every route measured for the race's own rounds (the precision its finalists
    reached; screening rounds counted as rounds, measured in full), for the race's full rounds only
    (the stricter comparison when the race screened), and for the race's cap of rounds (the fixed
    design a user would otherwise run)."""
    truth = max(RATIOS, key=RATIOS.__getitem__)
    own, full_only, capped = (
        "everything at the race's rounds",
        "everything at the race's full rounds",
        f"everything at {cap} rounds",
    )
    rows: dict[str, list] = {"race": [], own: [], full_only: [], capped: []}
    for seed in range(trials):
        race, sim = _run(seed, 2, cap, screen_rounds)
        rows["race"].append((race, sim.now, race))
        for name, rounds in ((capped, cap), (own, race.rounds), (full_only, max(race.full_rounds, 2))):
            full, sim_f = _run(seed + 10_000, rounds, rounds)
            rows[name].append((full, sim_f.now, race))
    print(
        f"simulated: {len(RATIOS)} routes, decode ratios to config {sorted(RATIOS.values(), reverse=True)}; {trials} seeds;"
        f" the race screens with {screen_rounds} short rounds (0: no screen)"
    )
    rounds = [r.rounds for r, _, _ in rows["race"]]
    screened = [len([w for w in r.dropped.values() if w.startswith("screened out")]) for r, _, _ in rows["race"]]
    print(
        f"  race rounds median {statistics.median(rounds):g} ({min(rounds)}-{max(rounds)}), of them screening"
        f" {screen_rounds if screen_rounds else 0}; routes screened out per race median {statistics.median(screened):g}"
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
        if name != "race":  # per trial: the race's tokens over this design's, on the same seed
            within = sum(round(x, 6) <= TOKENS_TARGET for x in race_tokens)
            print(
                f"    per trial: race / this tokens <= {TOKENS_TARGET:.2f} in {within}/{trials};"
                f" worst {max(race_tokens):.3f}, best {min(race_tokens):.3f}"
            )


#: Equal routes: config slower, eleven routes of one speed; each of them is "the fastest".
EQUAL = {CONFIG_LABEL: 0.8, **{f"e{i:02d}": 1.0 for i in range(11)}}
#: Near-equal: one fastest route, ten within 2 % of it.
NEAR = {CONFIG_LABEL: 0.8, "best": 1.0, **{f"n{i:02d}": 0.98 for i in range(10)}}


def wrongful_drops(trials: int, screen_rounds: int, cap: int = 30) -> None:
    """How often the race drops a route as fast as the fastest: per route and per race (any)."""
    for name, ratios, fastest in (
        ("equal", EQUAL, [x for x in EQUAL if x != CONFIG_LABEL]),
        ("near-equal", NEAR, ["best"]),
    ):
        per_route, any_race, by_screen = 0, 0, 0
        for seed in range(trials):
            race, _ = _run(seed, 2, cap, screen_rounds, ratios)
            lost = [x for x in fastest if x in race.dropped]
            per_route += len(lost)
            any_race += bool(lost)
            by_screen += sum(race.dropped[x].startswith("screened out") for x in lost)
        print(
            f"  {name} ({len(fastest)} fastest of {len(ratios)} routes, cap {cap}): a fastest route dropped in"
            f" {per_route}/{trials * len(fastest)} (race, route) pairs = {per_route / (trials * len(fastest)):.3f}"
            f" (level 0.05 per route), {by_screen} of them by the screen; races dropping any: {any_race}/{trials}"
        )


def screen_spread(screens: int = 20_000) -> None:
    """The screen alone over 12 equal routes (2 short rounds, noise as Simulated's short rounds), one
    of them noisier than the rest by a factor: how often it is screened out, against its bound (one
    tail of the interval: half the look's share). The pooled variance assumes one spread; this is
    what a route that breaks the assumption costs."""
    from winml_perf.tune.screen import screen_out

    labels = [CONFIG_LABEL] + [f"e{i:02d}" for i in range(11)]
    sigma = float(np.hypot(0.03, 0.05))  # process effect and one iteration's noise, on the log scale
    for alpha in (0.05, 0.05 / 30):  # a loose look, and the share of one look of the race's 30
        rates = []
        for factor in (1, 2, 3, 5):
            rng, dropped = np.random.default_rng(1), 0
            for _ in range(screens):
                spread = np.full((12, 1), sigma)
                spread[1] *= factor
                table = np.exp(rng.normal(0.0, 1.0, (12, 2)) * spread + rng.normal(0.0, 0.05, (1, 2)))
                out = screen_out(dict(zip(labels, table.tolist())), True, alpha, CONFIG_LABEL)
                dropped += out is not None and "e00" in out.dropped
            rates.append(f"x{factor}: {dropped / screens:.4f}")
        print(
            f"  screen alone, look share {alpha:.4f} (bound {alpha / 2:.4f}), {screens} screens; one route's noise {', '.join(rates)}"
        )


def real(bundle: Path, flags: list[str], screen_rounds: int) -> None:
    from dataclasses import replace

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
        screen_rounds=screen_rounds,
    )
    quiet = lambda line: None  # noqa: E731
    t0 = time.monotonic()
    raced = run_tune(base, say=quiet)
    runs = [("race", raced, time.monotonic() - t0)]
    # every route in full for the race's rounds (its screening rounds counted as rounds), and, when
    # it screened, for its full rounds only
    for name, rounds in (("everything", raced.race.rounds), ("everything (full rounds)", raced.race.full_rounds)):
        if raced.race.screened or name == "everything":
            t0 = time.monotonic()
            full = run_tune(replace(base, min_rounds=rounds, max_rounds=rounds, screen_rounds=0), say=quiet)
            runs.append((name, full, time.monotonic() - t0))
    print(f"real: {bundle} {' '.join(flags)} (equivalence off, nothing stored; --screen-rounds {screen_rounds})")
    for name, o, s in runs:
        screened = f" ({o.race.screened} of them short screening rounds)" if o.race.screened else ""
        print(f"  {name:<10} {o.race.rounds} rounds{screened}, {o.race.tokens} tokens, {s:.0f} s: {o.verdict.text}")
    for name, o, s in runs[1:]:
        print(f"  race / {name}: tokens {raced.race.tokens / max(o.race.tokens, 1):.2f}, time {runs[0][2] / s:.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=40)
    ap.add_argument("--screen-rounds", type=int, default=SCREEN_ROUNDS, help="0: race without the screen (as before)")
    ap.add_argument("--equal", action="store_true", help="also count wrongful drops among equal and near-equal routes")
    ap.add_argument("--real", type=Path, default=None)
    ap.add_argument("flags", nargs="*")
    args = ap.parse_args()
    if args.real is None:
        simulated(args.trials, args.screen_rounds)
        if args.equal:
            wrongful_drops(args.trials, args.screen_rounds)
            screen_spread()
    else:
        real(args.real, args.flags, args.screen_rounds)


if __name__ == "__main__":
    main()
