"""`winml bundle synth`: make a random-weight bundle of a real architecture shape, offline."""

from __future__ import annotations

import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Annotated

import typer

from winml_perf.commands.option_groups import option_groups
from winml_perf.publish.formats import Offer, check_format, format_help, format_named, json_text
from winml_perf.synth.transformer import ARCHITECTURES, PRECISIONS, PRESETS, SynthSpec, synthesize


@dataclass(frozen=True)
class Architecture:
    """The model's shape and how the builder writes it."""

    preset: Annotated[str, typer.Option(metavar="NAME", help=f"Architecture shape: {', '.join(PRESETS)}.")] = "tiny"
    arch: Annotated[
        str | None,
        typer.Option(metavar="NAME", help=f"Model family ({', '.join(ARCHITECTURES)}); default: the preset's."),
    ] = None
    precision: Annotated[
        str, typer.Option("-p", "--precision", metavar="NAME", help=f"Builder precision: {', '.join(PRECISIONS)}.")
    ] = "int4"
    execution_provider: Annotated[
        str, typer.Option("-e", "--execution-provider", metavar="EP", help="Builder target EP.")
    ] = "cpu"


@dataclass(frozen=True)
class Pipeline:
    """A decoder-pipeline bundle (NPU style), static-shape on QNN with --static-npu."""

    pipeline: Annotated[bool, typer.Option("--pipeline", help="Split into an NPU-style decoder-pipeline bundle.")] = (
        False
    )
    quantize_lm_head: Annotated[
        bool, typer.Option("--quantize-lm-head", help="Pipeline: int4 MatMulNBits lm_head (default fp32/fp16 MatMul).")
    ] = False
    static_npu: Annotated[
        bool,
        typer.Option(
            "--static-npu", help="Static-shape pipeline with context and iterator on QNN (implies --pipeline)."
        ),
    ] = False
    prompt_length: Annotated[
        int, typer.Option(metavar="N", help="--static-npu: the context stage's fixed prompt length.")
    ] = 16
    kv_length: Annotated[
        int, typer.Option(metavar="N", help="--static-npu: KV buffer positions (prompt + generated tokens).")
    ] = 128
    soc_model: Annotated[
        str, typer.Option(metavar="MODEL", help="--static-npu: QNN soc_model for the context and iterator stages.")
    ] = "60"


@dataclass(frozen=True)
class Overrides:
    """The weights' seed and the preset's sizes overridden."""

    seed: Annotated[int, typer.Option(metavar="N", help="Seed for weights and tokenizer corpus.")] = 0
    context_length: Annotated[int | None, typer.Option(metavar="N", help="Override max_position_embeddings.")] = None
    layers: Annotated[
        int | None, typer.Option(metavar="N", help="Override the number of layers (smaller test bundles).")
    ] = None


@option_groups
def synth(
    output: Annotated[Path, typer.Option("-o", "--output", metavar="DIR", help="Folder to write the bundle to.")],
    model: Architecture = Architecture(),
    split: Pipeline = Pipeline(),
    overrides: Overrides = Overrides(),
    force: Annotated[bool, typer.Option("--force", help="Replace a non-empty output folder.")] = False,
    fmt: Annotated[str, typer.Option("--format", metavar="FORMAT", help=format_help(Offer.SUMMARY))] = "table",
) -> None:
    """Make a random-weight onnxruntime-genai bundle (needs the `synth` extra; no hub access)."""
    from winml_perf.support.output import refuse_stdout_folder

    refuse_stdout_folder(output, "-o")
    check_format(Offer.SUMMARY, fmt)
    spec = SynthSpec(
        **asdict(model),
        **asdict(split),
        seed=overrides.seed,
        context_length=overrides.context_length,
        overrides={"num_hidden_layers": overrides.layers} if overrides.layers else {},
    )
    summary = synthesize(spec, output, force=force, log=lambda m: print(m, file=sys.stderr))
    if format_named(fmt).holds_document:
        sys.stdout.write(json_text(summary, fmt))
    else:
        print(f"{summary['path']}: {summary['bytes'] / 1e6:.1f} MB in {summary['seconds']} s", file=sys.stderr)
        print(summary["path"])
