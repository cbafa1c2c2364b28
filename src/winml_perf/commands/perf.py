"""`winml perf`: parse flags into a PerfRequest, run it, render the run record.

The flags are declared in groups (commands/perf_flags.py), turned into the request by
commands/perf_request.py, and the run is reported by commands/perf_report.py; this function wires
the three.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from winml_perf.commands.option_groups import option_groups
from winml_perf.commands.perf_flags import (
    JudgeFlags,
    MeasurementFlags,
    OnnxFlags,
    OutputFlags,
    RoutingFlags,
    WorkloadFlags,
)
from winml_perf.commands.perf_report import exports, report
from winml_perf.commands.perf_request import perf_request
from winml_perf.support.errors import UsageError

EPILOG = """\
[bold]Routes[/bold] (--route, repeatable; one run measures its routes interleaved):
  config              the bundle as its genai_config.json places it
  ep=NAME             every stage on EP NAME (cpu, webgpu, qnn, openvino, ...)
  device=CLASS        every stage on a device class: cpu, gpu, npu or auto
  ep=NAME;stages=A,B  only stages A and B forced (device=CLASS;stages=A too)
  ep=NAME;options=K=V,K=V   with EP provider options (over --ep-option), e.g. ep=qnn;options=soc_model=60
  stages=A:EP,B:EP    each named stage on its own EP, the rest as config (options=EP:K=V, e.g. options=qnn:soc_model=60)

[bold]Sweeps[/bold] (--prompt-tokens, --max-new-tokens; repeating a flag adds values):
  N                   one value, or a comma list: 16,64
  FIRST-LAST+STEP     16-64+16 = 16,32,48,64
  FIRST-LAST*FACTOR   128-1024*2 = 128,256,512,1024

[bold]Many requests at once[/bold] (the GenAI Engine under load): winml serve BUNDLE --concurrency 1,4 (docs/serving.md)

[bold]Examples[/bold]:
  winml perf bundles/tiny-qwen2
  winml perf bundles/tiny-qwen2 --route config --route ep=webgpu
  winml perf bundles/tiny-qwen2 --prompt-tokens 128-1024*2 --export-csv t.csv
  winml perf model.onnx --ep cpu --shape N=8 --iterations 50
"""


@option_groups
def perf(
    ctx: typer.Context,
    bundle: Annotated[
        Path,
        typer.Argument(
            metavar="BUNDLE", show_default=False, help="A bundle folder (genai_config.json) or an .onnx model."
        ),
    ],
    routing: RoutingFlags,
    workload: WorkloadFlags,
    judge: JudgeFlags,
    measurement: MeasurementFlags,
    out: OutputFlags,
    onnx: OnnxFlags,
    load: Annotated[
        str | None, typer.Option("--concurrency", "--request-rate", metavar="LOAD", hidden=True, show_default=False)
    ] = None,
) -> None:
    """Benchmark token throughput and latency of a bundle (or the latency of an ONNX model)."""
    from winml_perf.measure.orchestrate import run_benchmark

    if load is not None:  # perf measures one generator at a time; a load is winml serve's
        raise UsageError(
            "winml perf measures one request at a time; --concurrency and --request-rate are winml serve's",
            f"winml serve {bundle} --concurrency 1,4 (or --request-rate 2,8/s), with the same --route flags",
        )

    def typed(name: str) -> bool:  # written on the command line, not left at its default
        source = ctx.get_parameter_source(name)
        return source is not None and source.name == "COMMANDLINE"

    request = perf_request(bundle, routing, workload, judge, measurement, out, onnx, typed)
    files = exports(out)
    outcome = run_benchmark(request, argv=sys.argv[1:])
    report(outcome, files, out, texts=out.verbose or judge.check_outputs, explain=measurement.explain)
