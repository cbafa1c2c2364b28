"""The adaptive rule against a fixed 5 warmups + 10 iterations, at equal achieved interval (issue 12).

    python benchmarks/bench_adaptive.py BUNDLE [--json out.json] -- --prompt-tokens 128 --max-new-tokens 128

Two comparisons, each as `winml perf` subprocesses (flags after ``--`` go to every run):
1. one process: `--invocations 1 --warmup 5 --iterations 10` (onnxruntime-genai benchmark_e2e.py's
   default) reaches some within-process ±h; then `--invocations 1 --target-ci h` measures until its
   own within-process interval is as tight.
2. across processes: `--invocations 5 --warmup 5 --iterations 10` reaches ±H over 5 invocations;
   then `--target-ci H` lets the two-level rule choose iterations and invocations for the same ±H.
For each run: generated tokens (warmups included), wall time, the interval reached and why it stopped.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from perf_cli import flags_after_dashes, run_perf_json


def perf(bundle: str, flags: list[str]) -> dict:
    doc, wall = run_perf_json(bundle, flags)
    (cell,) = doc["cells"]
    s = cell["summary"]
    return {
        "flags": flags,
        "wall_s": wall,
        "generated_tokens": s["generated_tokens_total"],
        "invocations": s.get("invocations"),
        "iterations": s["iterations"],
        "warmups": s["warmup_iterations"],
        "decode_tokens_per_s": s["decode_tokens_per_s"],
        "ci95_half_width_pct": s["primary_ci95_half_width_pct"],
        "covers": s.get("primary_ci95_covers"),
        "stop_reason": cell["stop_reason"],
    }


def compare(bundle: str, extra: list[str], fixed: list[str], adaptive: list[str]) -> dict:
    f = perf(bundle, fixed + extra)
    target = f"{max(f['ci95_half_width_pct'], 0.01):.2f}%"
    a = perf(bundle, adaptive + ["--target-ci", target] + extra)
    return {
        "fixed": f,
        "adaptive": a,
        "target": target,
        "token_ratio_adaptive_over_fixed": a["generated_tokens"] / f["generated_tokens"],
    }


def main(argv=None) -> int:
    mine, extra = flags_after_dashes(list(sys.argv[1:] if argv is None else argv))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("bundle")
    ap.add_argument("--max-time", default="240", help="--max-time of the adaptive runs (s)")
    ap.add_argument("--json")
    args = ap.parse_args(mine)
    report = {
        "one_process": compare(
            args.bundle,
            extra,
            ["--invocations", "1", "--warmup", "5", "--iterations", "10"],
            ["--invocations", "1", "--warmup", "1", "--max-time", args.max_time],
        ),
        "across_processes": compare(
            args.bundle,
            extra,
            ["--invocations", "5", "--warmup", "5", "--iterations", "10"],
            ["--warmup", "1", "--max-time", args.max_time],
        ),
    }
    for name, r in report.items():
        for side in ("fixed", "adaptive"):
            x = r[side]
            print(
                f"{name:16s} {side:8s} {x['invocations']} inv. x {x['warmups']}+{x['iterations']} it.: "
                f"{x['generated_tokens']:6d} tokens, {x['wall_s']:.1f} s, ±{x['ci95_half_width_pct']:.2f} % "
                f"({x['covers']}, {x['stop_reason']})"
            )
        print(f"{name:16s} adaptive/fixed tokens at ±{r['target']}: {r['token_ratio_adaptive_over_fixed']:.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
