"""Harness overhead and stopping-rule cost, on a Qwen2.5-0.5B-shaped bundle (issue 5 targets).

    python benchmarks/bench_overhead.py                     # builds the bundle on first use
    python benchmarks/bench_overhead.py --layers 4 --prompt-tokens 64 --max-new-tokens 32 --pairs 10   # smaller
    python benchmarks/bench_overhead.py --bundle DIR --json out.json

1. Overhead. In ONE process and on ONE loaded model, it alternates (order shuffled per round, seeded)
   three arms: the harness's measurement (``run_cell`` over GenaiSession.generate_timed, with the
   memory sampler on, exactly as ``winml perf`` measures), the same with the sampler off, and a bare
   loop (append_tokens, generate_next_token, perf_counter, nothing else), ``--iterations`` generations
   each per round. All report per-iteration prompt tokens/s and decode tokens/s with the same
   definitions. The figure is the median of the per-round ratios harness/bare (drift cancels within
   a round) with its distribution-free 95 % CI; the target is >= 0.99. With ``--ep`` the route is
   prepared once by `winml perf` and its folder loaded here, with the plugin EPs registered.
1b. Overhead at invocation level (``--invocation-level``): pairs of fresh processes, in a seeded
   shuffled order per pair: `winml perf BUNDLE --invocations 1` (the harness, as a user runs it)
   and this script's bare loop in a process of its own (``--bare-child``), ``--iterations``
   generations each after ``--pair-warmup`` warmups. The figure is harness/bare over paired
   invocations (uncertainty.paired_ratio: the median of per-pair ratios of invocation medians, Student t
   on their logs below 6 pairs) with its 95 % interval; what differs between processes is in it.
2. Stopping rule. Tokens generated (warmups included) by ``--target-ci 1%`` until the 95 % CI of the
   median decode tokens/s is within ±1 %, against onnxruntime-genai benchmark_e2e.py's fixed
   5 warmups + 10 iterations; and the CI half-width the fixed run actually reached.

The bundle is built with ``winml bundle synth --preset qwen2.5-0.5b -p int4`` into
benchmarks/.cache/ (not committed; needs the `synth` extra) unless --bundle is given.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import time
from pathlib import Path

from perf_cli import run_perf_json
from winml_perf.ep.plugins import register_plugin_eps
from winml_perf.measure.runner import run_cell
from winml_perf.model.metrics import metric_values
from winml_perf.model.spec import CellSpec, IterationPolicy, SessionSpec, WarmupPolicy
from winml_perf.session.genai_session import GenaiSession
from winml_perf.stats import sample_stats as stats

CACHE = Path(__file__).resolve().parent / ".cache"
TARGET_RATIO = 0.99


def ensure_bundle(args) -> Path:
    if args.bundle:
        return Path(args.bundle)
    name = f"{args.preset}-{args.precision}" + (f"-L{args.layers}" if args.layers else "")
    out = CACHE / name
    if (out / "genai_config.json").is_file():
        return out
    cmd = [
        sys.executable,
        "-m",
        "winml_perf",
        "bundle",
        "synth",
        "--preset",
        args.preset,
        "-p",
        args.precision,
        "-o",
        str(out),
    ]
    if args.layers:
        cmd += ["--layers", str(args.layers)]
    print("building:", " ".join(cmd), file=sys.stderr)
    subprocess.run(cmd, check=True)
    return out


def bare_loop(model, prompt_ids, new_tokens: int) -> tuple[float, float]:
    """One generation timed with nothing but the genai calls and perf_counter: (prompt tok/s, decode tok/s)."""
    import numpy as np
    import onnxruntime_genai as og

    total = len(prompt_ids) + new_tokens
    params = og.GeneratorParams(model)
    params.set_search_options(max_length=total, min_length=total, do_sample=False)
    gen = og.Generator(model, params)
    ids = np.asarray(prompt_ids, dtype=np.int32)
    clock = time.perf_counter
    t0 = clock()
    gen.append_tokens(ids)
    t1 = clock()
    gen.generate_next_token()
    t2 = clock()
    for _ in range(new_tokens - 1):
        gen.generate_next_token()
    t3 = clock()
    del gen
    return len(prompt_ids) / (t1 - t0), (new_tokens - 1) / (t3 - t2)


class SharedSession:
    """The one loaded GenaiSession, handed to run_cell; the runner's unload() at the end of a cell
    must not drop the model the bare loop keeps using."""

    def __init__(self, session: GenaiSession) -> None:
        self._session = session

    def __getattr__(self, name):
        return getattr(self._session, name)

    def load(self):
        return self

    def unload(self) -> None:
        pass


ARMS = ("harness", "harness_no_sampler", "bare")


def overhead(session: GenaiSession, spec: SessionSpec, args) -> dict:
    """Rounds of three arms in a seeded shuffled order: the harness as `winml perf` measures (memory
    sampler on), the harness with the sampler off (names the sampler's share of any gap) and the bare
    loop. Per arm and metric the overall median; per harness arm the median of the per-round ratios
    to the bare loop with its distribution-free 95 % CI."""
    prompt = session.synthetic_prompt(args.prompt_tokens, seed=args.seed)
    cell = CellSpec(
        "config",
        spec,
        prompt_tokens=args.prompt_tokens,
        max_new_tokens=args.max_new_tokens,
        warmup=WarmupPolicy(count=args.pair_warmup),
        iterations=IterationPolicy(iterations=args.iterations),
    )
    factory = lambda _spec: SharedSession(session)  # noqa: E731  the already-loaded model
    for _ in range(args.warmup):  # before the rounds, for every arm: they share the model
        bare_loop(session._model, prompt, args.max_new_tokens)
    metrics = ("prompt_tokens_per_s", "decode_tokens_per_s")
    pooled = {arm: {m: [] for m in metrics} for arm in ARMS}
    round_ratios = {arm: {m: [] for m in metrics} for arm in ARMS[:-1]}
    rng = random.Random(args.seed)
    order_log = []
    for pair in range(args.pairs):
        order = rng.sample(ARMS, len(ARMS))
        order_log.append(order)
        got = {}
        for arm in order:
            if arm == "bare":
                for _ in range(args.pair_warmup):  # as the harness's cell does
                    bare_loop(session._model, prompt, args.max_new_tokens)
                runs = [bare_loop(session._model, prompt, args.max_new_tokens) for _ in range(args.iterations)]
                got[arm] = {"prompt_tokens_per_s": [p for p, _ in runs], "decode_tokens_per_s": [d for _, d in runs]}
            else:
                result = run_cell(cell, factory, sample_memory=arm == "harness")
                assert result.ok, result.failure
                got[arm] = {m: metric_values(result.samples, m) for m in metrics}
        for m in metrics:
            for arm in ARMS:
                pooled[arm][m] += got[arm][m]
            for arm in ARMS[:-1]:
                round_ratios[arm][m].append(stats.median(got[arm][m]) / stats.median(got["bare"][m]))
        if (pair + 1) % max(1, args.pairs // 10) == 0:
            print(f"round {pair + 1}/{args.pairs}", file=sys.stderr)
    out = {}
    for m in metrics:
        b = stats.median(pooled["bare"][m])
        out[m] = {"bare_median": b, "bare_cv_pct": stats.cv_pct(pooled["bare"][m]), "rounds": args.pairs}
        for arm in ARMS[:-1]:
            h = stats.median(pooled[arm][m])
            lo, hi = stats.median_ci(round_ratios[arm][m])
            out[m][arm] = {
                "median": h,
                "ratio_of_medians": h / b,
                "round_ratio_median": stats.median(round_ratios[arm][m]),
                "round_ratio_ci95": [lo, hi],
                "cv_pct": stats.cv_pct(pooled[arm][m]),
                "n": len(pooled[arm][m]),
                "meets_target": stats.median(round_ratios[arm][m]) >= TARGET_RATIO,
            }
    out["orders"] = order_log
    return out


def bare_child(args) -> int:
    """One bare-loop invocation: load, warm up, time ``--iterations`` generations; JSON on stdout."""
    bundle = ensure_bundle(args)
    register_plugin_eps()  # a forced plugin route (WebGPU) loads only once its library is registered, as in the harness
    session = GenaiSession(bundle).load()
    model = session._model
    prompt = session.synthetic_prompt(args.prompt_tokens, seed=args.seed)
    for _ in range(args.pair_warmup):
        bare_loop(model, prompt, args.max_new_tokens)
    runs = [bare_loop(model, prompt, args.max_new_tokens) for _ in range(args.iterations)]
    print(json.dumps({"prompt_tokens_per_s": [p for p, _ in runs], "decode_tokens_per_s": [d for _, d in runs]}))
    return 0


def _harness_invocation(bundle: Path, args) -> dict:
    doc, _ = run_perf_json(
        str(bundle),
        [
            *(["--ep", args.ep] if args.ep else []),
            "--invocations",
            "1",
            "--iterations",
            str(args.iterations),
            "--warmup",
            str(args.pair_warmup),
            "--prompt-tokens",
            str(args.prompt_tokens),
            "--max-new-tokens",
            str(args.max_new_tokens),
            "--seed",
            str(args.seed),
        ],
    )
    (cell,) = doc["cells"]
    from winml_perf.model.sample import IterationSample

    samples = [IterationSample.from_dict(s) for s in cell["samples"]["iterations"]]
    out = {m: metric_values(samples, m) for m in ("prompt_tokens_per_s", "decode_tokens_per_s")}
    out["path"] = cell["route"].get("path") or str(bundle)  # the folder the route loads (a derived bundle when forced)
    return out


def _bare_invocation(bundle: Path, args) -> dict:
    cmd = [
        sys.executable,
        __file__,
        "--bare-child",
        "--bundle",
        str(bundle),
        "--iterations",
        str(args.iterations),
        "--pair-warmup",
        str(args.pair_warmup),
        "--prompt-tokens",
        str(args.prompt_tokens),
        "--max-new-tokens",
        str(args.max_new_tokens),
        "--seed",
        str(args.seed),
    ]
    return json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)


def invocation_overhead(bundle: Path, args) -> dict:
    """Harness vs bare loop over paired fresh processes (see the module doc, 1b)."""
    from winml_perf.stats import paired_ratio

    metrics = ("prompt_tokens_per_s", "decode_tokens_per_s")
    harness: list[dict] = []
    bare: list[dict] = []
    rng = random.Random(args.seed)
    orders = []
    start = time.perf_counter()
    loaded = Path(
        _harness_invocation(bundle, args)["path"]
    )  # prepares a forced route once; the bare loop loads the same folder
    for pair in range(args.pairs):
        order = rng.sample(["harness", "bare"], 2)
        orders.append(order)
        for who in order:
            (harness if who == "harness" else bare).append(
                _harness_invocation(bundle, args) if who == "harness" else _bare_invocation(loaded, args)
            )
        print(f"pair {pair + 1}/{args.pairs} ({time.perf_counter() - start:.0f} s)", file=sys.stderr)
        if time.perf_counter() - start > args.max_time and pair >= 1:
            print(f"stopping after {pair + 1} pairs: --max-time {args.max_time:g} s", file=sys.stderr)
            break
    out: dict = {"orders": orders}
    for m in metrics:
        r = paired_ratio([h[m] for h in harness], [b[m] for b in bare])
        out[m] = {
            "ratio": r.estimate,
            "ci95": [r.low, r.high],
            "method": r.method,
            "pairs": r.pairs,
            "harness_invocation_medians": [stats.median(h[m]) for h in harness],
            "bare_invocation_medians": [stats.median(b[m]) for b in bare],
            "within_1pct": r.low >= 0.99 and r.high <= 1.01,
            "describe": r.describe(),
        }
    return out


def stopping_cost(session: GenaiSession, spec: SessionSpec, args) -> dict:
    factory = lambda _spec: SharedSession(session)  # noqa: E731
    base = dict(prompt_tokens=args.prompt_tokens, max_new_tokens=args.max_new_tokens)
    adaptive = run_cell(
        CellSpec(
            "config",
            spec,
            **base,
            warmup=WarmupPolicy(count=1),
            iterations=IterationPolicy.until_ci(
                args.target_ci, min_iterations=6, max_iterations=500, max_time_s=args.max_time
            ),
        ),
        factory,
    )
    fixed = run_cell(
        CellSpec("config", spec, **base, warmup=WarmupPolicy(count=5), iterations=IterationPolicy(iterations=10)),
        factory,
    )

    def describe(r):
        values = metric_values(r.samples, "decode_tokens_per_s")
        every = list(r.warmup_samples) + list(r.samples)
        return {
            "warmups": len(r.warmup_samples),
            "iterations": len(r.samples),
            "stop_reason": r.stop_reason,
            "generated_tokens": sum(s.new_tokens for s in every),
            "prompt_tokens": sum(s.prompt_tokens for s in every),
            "decode_tokens_per_s_median": stats.median(values),
            "ci95_half_width_pct": stats.ci_half_width_pct(values),
            "measure_s": r.measure_s,
        }

    a, f = describe(adaptive), describe(fixed)
    return {
        "target_ci_pct": args.target_ci,
        "adaptive": a,
        "fixed_5_plus_10": f,
        "adaptive_uses_fewer_tokens": a["generated_tokens"] < f["generated_tokens"],
    }


def main(argv=None) -> int:  # noqa: PLR0915
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bundle", help="use this bundle instead of building one")
    ap.add_argument("--preset", default="qwen2.5-0.5b")
    ap.add_argument("--precision", default="int4")
    ap.add_argument("--layers", type=int, help="fewer layers for a quicker, smaller bundle")
    ap.add_argument("--prompt-tokens", type=int, default=128)
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--pairs", type=int, default=30, help="harness/bare alternations")
    ap.add_argument("--iterations", type=int, default=1, help="measured iterations per side per pair")
    ap.add_argument("--warmup", type=int, default=2, help="warmup generations before the pairs")
    ap.add_argument("--pair-warmup", type=int, default=1, help="warmup generations of each side in each pair")
    ap.add_argument("--target-ci", type=float, default=1.0, help="percent, for the stopping-rule study")
    ap.add_argument("--max-time", type=float, default=120.0, help="seconds cap of the adaptive run")
    ap.add_argument("--skip-stopping", action="store_true", help="only measure the overhead")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", help="also write the figures to this file")
    ap.add_argument("--invocation-level", action="store_true", help="pairs of fresh processes (1b), not one process")
    ap.add_argument("--ep", help="force this EP (the bare loop loads the same derived bundle)")
    ap.add_argument("--bare-child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.bare_child:
        return bare_child(args)

    bundle = ensure_bundle(args)
    if args.invocation_level:
        report = {
            "bundle": str(bundle),
            "prompt_tokens": args.prompt_tokens,
            "max_new_tokens": args.max_new_tokens,
            "iterations_per_invocation": args.iterations,
            "invocation_overhead": invocation_overhead(bundle, args),
        }
        for m in ("prompt_tokens_per_s", "decode_tokens_per_s"):
            o = report["invocation_overhead"][m]
            print(f"{m:22s} harness/bare {o['describe']}; within 1.00 ± 0.01: {o['within_1pct']}")
        if args.json:
            Path(args.json).write_text(json.dumps(report, indent=2))
        return 0
    loaded = bundle
    if args.ep:  # the forced route's folder, prepared by the harness; its plugin EP registered here
        loaded = Path(_harness_invocation(bundle, args)["path"])
        register_plugin_eps()
    spec = SessionSpec("winml-genai", str(loaded))
    session = GenaiSession(loaded).load()
    report = {
        "bundle": str(bundle),
        "prompt_tokens": args.prompt_tokens,
        "max_new_tokens": args.max_new_tokens,
        "overhead": overhead(session, spec, args),
    }
    if not args.skip_stopping:
        report["stopping"] = stopping_cost(session, spec, args)

    ov = report["overhead"]
    print(f"\nbundle {bundle}  prompt {args.prompt_tokens}  new {args.max_new_tokens}  {args.pairs} rounds")
    for m in ("prompt_tokens_per_s", "decode_tokens_per_s"):
        o = ov[m]
        print(f"{m:22s} bare {o['bare_median']:10.2f} (CV {o['bare_cv_pct']:.1f} %)")
        for arm in ARMS[:-1]:
            a = o[arm]
            lo, hi = a["round_ratio_ci95"]
            print(
                f"  {arm:20s} {a['median']:10.2f}  ratio {a['round_ratio_median']:.4f} (95% CI {lo:.4f}..{hi:.4f}; "
                f"of medians {a['ratio_of_medians']:.4f}) {'meets' if a['meets_target'] else 'MISSES'} >= {TARGET_RATIO}"
            )
    if "stopping" in report:
        s = report["stopping"]
        for name in ("adaptive", "fixed_5_plus_10"):
            x = s[name]
            print(
                f"{name:16s} {x['warmups']:3d} warmups + {x['iterations']:3d} it. = {x['generated_tokens']:6d} generated tokens, "
                f"CI ±{x['ci95_half_width_pct']:.2f} %  ({x['stop_reason']})"
            )
        print(f"--target-ci {args.target_ci}% uses fewer tokens than 5+10: {s['adaptive_uses_fewer_tokens']}")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
