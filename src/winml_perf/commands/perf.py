"""`winml perf`: parse flags, run the benchmark, render the result."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from winml_perf.cli import app
from winml_perf.errors import UsageError


def _positive(value: int, flag: str) -> int:
    if value <= 0:
        raise UsageError(f"{flag} must be a positive integer, got {value}", f"pass {flag} 1 or more")
    return value


def _non_negative(value: int, flag: str) -> int:
    if value < 0:
        raise UsageError(f"{flag} must be 0 or more, got {value}", f"pass {flag} 0 or more")
    return value


def _int_list(text: str, flag: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise UsageError(f"{flag} {text!r} is not a comma-separated list of integers", f"e.g. {flag} 16,128") from None
    if not values:
        raise UsageError(f"{flag} is empty", f"e.g. {flag} 16,128")
    for v in values:
        _positive(v, flag)
    return values


def _detect_runtime(path: Path) -> str:
    if path.is_file() and path.suffix == ".onnx":
        return "winml"
    return "winml-genai"


@app.command("perf")
def perf(
    bundle: Annotated[Path, typer.Argument(help="A bundle folder (genai_config.json) or an .onnx model.")],
    runtime: Annotated[Optional[str], typer.Option(help="winml-genai (bundles) or winml (plain ONNX); default from the path.")] = None,
    prompt: Annotated[Optional[str], typer.Option(help="Prompt text (default: a fixed sentence).")] = None,
    apply_template: Annotated[bool, typer.Option("--apply-template/--no-apply-template", help="Wrap --prompt in the bundle's chat template.")] = False,
    prompt_tokens: Annotated[Optional[str], typer.Option(help="Synthetic prompt of N tokens instead of --prompt (comma list sweeps).")] = None,
    max_new_tokens: Annotated[str, typer.Option(help="Tokens to generate per iteration (comma list sweeps).")] = "32",
    warmup: Annotated[int, typer.Option(help="Warmup generations before measuring.")] = 1,
    iterations: Annotated[int, typer.Option(help="Measured generations.")] = 5,
    seed: Annotated[int, typer.Option(help="Seed for synthetic prompts and route order.")] = 0,
    fmt: Annotated[str, typer.Option("--format", help="table or json (JSON on stdout, human text on stderr).")] = "table",
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress output.")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Tracebacks on errors.")] = False,
) -> None:
    """Benchmark token throughput and latency of a bundle (or an ONNX model)."""
    from winml_perf.bench.orchestrate import PerfRequest, run_benchmark
    from winml_perf.render import render_table

    if fmt not in ("table", "json"):
        raise UsageError(f"--format {fmt!r} is not one of table, json", "pass --format table or --format json")
    runtime = runtime or _detect_runtime(bundle)
    if runtime not in ("winml-genai", "winml"):
        raise UsageError(f"--runtime {runtime!r} is unknown", "use --runtime winml-genai or --runtime winml")
    if prompt is not None and prompt_tokens is not None:
        raise UsageError("--prompt and --prompt-tokens both given", "pass one of them")
    request = PerfRequest(
        path=bundle,
        runtime=runtime,
        prompt=prompt,
        apply_template=apply_template,
        prompt_tokens=_int_list(prompt_tokens, "--prompt-tokens") if prompt_tokens else None,
        max_new_tokens=_int_list(max_new_tokens, "--max-new-tokens"),
        warmup=_non_negative(warmup, "--warmup"),
        iterations=_positive(iterations, "--iterations"),
        seed=seed,
        quiet=quiet or fmt == "json" and not sys.stderr.isatty(),
    )
    result = run_benchmark(request)
    if fmt == "json":
        print(json.dumps(result, indent=2))
    else:
        print(render_table(result))
