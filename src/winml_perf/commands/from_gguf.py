"""`winml bundle from-gguf`: a llama.cpp GGUF file (llama or qwen2) → an onnxruntime-genai bundle, offline."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from winml_perf.convert.decoder_graph import PRECISIONS, GraphOptions
from winml_perf.convert.from_gguf import convert
from winml_perf.publish.formats import Offer, check_format, format_help, format_named, json_text
from winml_perf.support.errors import UsageError


def from_gguf(
    gguf_file: Annotated[Path, typer.Argument(metavar="FILE.gguf", help="A llama.cpp GGUF model file.")],
    output: Annotated[Path, typer.Option("-o", "--output", metavar="DIR", help="Folder to write the bundle to.")],
    precision: Annotated[
        str,
        typer.Option(
            "-p",
            "--precision",
            metavar="NAME",
            help="auto: each weight as the file stores it (Q4_0/Q4_1/Q8_0 carried over exactly); "
            "int4: float and Q8_0 weights quantized to 4 bits; fp32: every weight dequantized; "
            "fp16: computes in float16 (quantized blocks carried over with float16 scales, the rest float16).",
        ),
    ] = "auto",
    accuracy_level: Annotated[
        int,
        typer.Option(
            metavar="N", help="MatMulNBits accuracy_level: 4 = int8 activations (the builder's CPU default), 0 = float."
        ),
    ] = 4,
    pipeline: Annotated[
        bool,
        typer.Option(
            "--pipeline", help="An NPU-style decoder-pipeline bundle: embeddings, transformer, lm_head files."
        ),
    ] = False,
    force: Annotated[bool, typer.Option("--force", help="Replace a non-empty output folder.")] = False,
    fmt: Annotated[str, typer.Option("--format", metavar="FORMAT", help=format_help(Offer.SUMMARY))] = "table",
) -> None:
    """Convert a GGUF file's weights and tokenizer into a bundle (needs the `gguf` extra; no torch, no hub)."""
    from winml_perf.support.output import refuse_stdout_folder

    refuse_stdout_folder(output, "-o")
    if precision not in PRECISIONS:
        raise UsageError(f"--precision {precision!r} is not one of {', '.join(PRECISIONS)}", "pick one of those")
    check_format(Offer.SUMMARY, fmt)
    options = GraphOptions(precision=precision, accuracy_level=accuracy_level, pipeline=pipeline)
    summary = convert(gguf_file, output, options, force=force, log=lambda m: print(m, file=sys.stderr))
    if format_named(fmt).holds_document:
        sys.stdout.write(json_text(summary, fmt))
        return
    for how, n in summary["weights"].items():
        print(f"  {n:4d} × {how}", file=sys.stderr)
    print(f"{summary['path']}: {summary['bytes'] / 1e6:.1f} MB in {summary['seconds']} s", file=sys.stderr)
    print(summary["path"])
