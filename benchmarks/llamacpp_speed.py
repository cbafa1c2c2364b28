"""The converted bundle's speed beside llama.cpp's on the same GGUF file, same machine, same threads.

Rounds alternate the tools (llama-bench, then `winml perf` on each bundle given), so that both see the
same machine state; each round is one process of each. Per tool: prompt processing tok/s of a
P-token prompt and decode tok/s of N new tokens. llama-bench times its decode (`-n N`) from an empty
context and its prompt (`-p P`) alone; winml perf times decode after the P-token prompt, so its decode
carries P more tokens of attention (small at P=128). Prints medians over rounds and each bundle's
ratio to llama.cpp with a 95 % interval over the rounds (paired by round: a bootstrap of the per-round
ratios); the interval covers this machine, these rounds.

    python benchmarks/llamacpp_speed.py --llama-bench PATH/llama-bench --gguf FILE.gguf \
        --bundle NAME=BUNDLE [--bundle NAME2=BUNDLE2] [--threads 2] [--rounds 7] [-o table.md]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np


def llama_bench(binary: str, gguf: str, prompt: int, new: int, threads: int, repetitions: int) -> dict[str, float]:
    """llama-bench's mean tok/s over its repetitions, for the prompt test and the generation test."""
    cmd = [
        binary,
        "-m",
        gguf,
        "-p",
        str(prompt),
        "-n",
        str(new),
        "-t",
        str(threads),
        "-r",
        str(repetitions),
        "-o",
        "json",
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, check=True)
    out: dict[str, float] = {}
    for test in json.loads(done.stdout):
        key = "prompt" if test["n_prompt"] and not test["n_gen"] else "decode"
        out[key] = float(test["avg_ts"])
    return out


def winml_perf(bundle: str, prompt: int, new: int, threads: int, iterations: int) -> dict[str, float]:
    """winml perf's medians (one invocation, ``iterations`` timed generations) for prompt and decode."""
    with tempfile.TemporaryDirectory() as tmp:
        record = Path(tmp) / "run.json"
        cmd = [
            sys.executable, "-m", "winml_perf", "perf", bundle, "--prompt-tokens", str(prompt),
            "--max-new-tokens", str(new), "--invocations", "1", "--iterations", str(iterations),
            "--warmup", "1", "--intra-op-threads", str(threads), "--no-store", "-o", str(record),
        ]  # fmt: skip
        subprocess.run(cmd, capture_output=True, text=True, check=True)
        (cell,) = json.loads(record.read_text())["cells"]
    metrics = cell["metrics"]
    return {"prompt": metrics["prompt_tokens_per_s"]["median"], "decode": metrics["decode_tokens_per_s"]["median"]}


def interval(ratios: list[float], seed: int = 0) -> tuple[float, float]:
    """95 % bootstrap interval of the median of the per-round ratios."""
    rng = np.random.default_rng(seed)
    values = np.asarray(ratios)
    medians = np.median(rng.choice(values, size=(10_000, len(values)), replace=True), axis=1)
    low, high = np.percentile(medians, [2.5, 97.5])
    return float(low), float(high)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--llama-bench", required=True)
    parser.add_argument("--gguf", required=True)
    parser.add_argument("--bundle", action="append", required=True, help="NAME=PATH (repeatable)")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--prompt-tokens", type=int, default=128)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--repetitions", type=int, default=3, help="timed repetitions per process, both tools")
    parser.add_argument("-o", "--output", type=Path)
    args = parser.parse_args()
    bundles = dict(b.split("=", 1) for b in args.bundle)
    seen: dict[str, dict[str, list[float]]] = {name: {"prompt": [], "decode": []} for name in ["llama.cpp", *bundles]}
    for r in range(args.rounds):
        got = {"llama.cpp": llama_bench(args.llama_bench, args.gguf, args.prompt_tokens, args.new_tokens,
                                        args.threads, args.repetitions)}  # fmt: skip
        for name, path in bundles.items():
            got[name] = winml_perf(path, args.prompt_tokens, args.new_tokens, args.threads, args.repetitions)
        for name, figures in got.items():
            for key, value in figures.items():
                seen[name][key].append(value)
        print(f"round {r + 1}/{args.rounds}: " + "; ".join(
            f"{n} prompt {f['prompt']:.0f} decode {f['decode']:.1f}" for n, f in got.items()), file=sys.stderr)  # fmt: skip
    base = seen["llama.cpp"]
    lines = [
        f"{args.rounds} rounds, {args.threads} threads, prompt {args.prompt_tokens} tokens, {args.new_tokens} new"
        f" tokens, {args.repetitions} timed repetitions per process; ratio = tool / llama.cpp, median of the"
        " per-round ratios [95 % bootstrap over rounds]",
        "",
        "| tool | prompt tok/s (median) | decode tok/s (median) | prompt vs llama.cpp | decode vs llama.cpp |",
        "|---|---|---|---|---|",
    ]
    for name, figures in seen.items():
        cells = [name, f"{np.median(figures['prompt']):.0f}", f"{np.median(figures['decode']):.1f}"]
        for key in ("prompt", "decode"):
            if name == "llama.cpp":
                cells.append("-")
                continue
            ratios = [a / b for a, b in zip(figures[key], base[key], strict=True)]
            low, high = interval(ratios)
            cells.append(f"×{np.median(ratios):.2f} [{low:.2f}, {high:.2f}]")
        lines.append("| " + " | ".join(cells) + " |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.output:
        args.output.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
