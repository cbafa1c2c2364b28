"""`winml bundle export-prepared | import-prepared`: carry a prepared route from a build server to a client."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from winml_perf.ep import table as eps
from winml_perf.support.errors import UsageError


def export_prepared(
    derived: Annotated[
        Path,
        typer.Argument(
            metavar="DERIVED",
            help="what `winml bundle prepare --compile` printed (a derived bundle, or a prepared .onnx model)",
        ),
    ],
    dest: Annotated[Path, typer.Argument(metavar="DEST", help="folder to write (export.json and compiled files)")],
) -> None:
    """Write a prepared route's compiled stages (or a prepared .onnx model's compiled model) and what they were
    made from to DEST, to carry to another machine."""
    from winml_perf.bundle import cache
    from winml_perf.bundle.epcontext import export_onnx
    from winml_perf.bundle.epcontext.export import export

    folder = derived.parent if derived.is_file() else derived  # a prepared model's path, as prepare printed it
    manifest, _ = cache.read_manifest(folder)
    if manifest is not None and export_onnx.is_prepared_model(manifest):
        doc = export_onnx.export_model(folder, manifest, dest)
        print(f"exported {len(doc['files'])} file(s) of prepared model {doc['output']} to {dest}", file=sys.stderr)
        print(dest)
        return
    doc = export(derived, dest)
    print(f"exported {len(doc['files'])} file(s) of {len(doc['jobs'])} compiled job(s) to {dest}", file=sys.stderr)
    print(dest)


def import_prepared(
    bundle: Annotated[
        Path, typer.Argument(metavar="BUNDLE", help="this machine's copy of the bundle, or of the .onnx model")
    ],
    source: Annotated[Path, typer.Argument(metavar="EXPORT", help="a folder written by export-prepared")],
) -> None:
    """Derive BUNDLE's route from an export instead of compiling; `winml perf --ep X --compile` then finds it fresh."""
    from winml_perf.bundle import cache
    from winml_perf.bundle.config import ConfigBook
    from winml_perf.bundle.epcontext import compile as compiler
    from winml_perf.bundle.epcontext import export as ex
    from winml_perf.bundle.prepare import Compiling, RunHoldings, plan_for, prepare_route
    from winml_perf.ep.devices import planned_target
    from winml_perf.ep.effective import device_from_options
    from winml_perf.ep.plugins import plugins_here
    from winml_perf.model.runtime import GENAI

    if bundle.suffix == ".onnx" and bundle.is_file():
        from winml_perf.bundle.epcontext.export_onnx import import_plan
        from winml_perf.bundle.onnx_prepare import EpSettings, OnnxBuild, prepare_onnx

        plan = import_plan(bundle, source)
        prepared = prepare_onnx(
            bundle,
            plan.target,
            plan.graph_optimization_level,
            ep_settings=EpSettings(plan.provider_options, plan.session_config),
            build=OnnxBuild(importer=plan.write),
        )
        compat = prepared.compatibility or {}
        print(
            f"prepared model cache={prepared.cache} ({prepared.cache_reason}) from {source}; compatibility: "
            f"{compat.get('verdict')} ({compat.get('detail')}), matched {(compat.get('prepared') or {}).get('matched')}",
            file=sys.stderr,
        )
        print(prepared.path)
        return
    if not (bundle / "genai_config.json").is_file():
        raise UsageError(
            f"{bundle} holds no genai_config.json",
            "pass the bundle folder (or the .onnx model) the export was made from",
        )
    doc = ex.read_export(source)
    if "options" not in doc:
        raise UsageError(
            f"{source}/{ex.EXPORT_FILE} is the export of a prepared .onnx model, not of a bundle's route",
            "pass that model: winml bundle import-prepared MODEL.onnx EXPORT",
        )
    jobs_doc = doc.get("jobs") or []
    if not jobs_doc:
        raise UsageError(f"{source}/{ex.EXPORT_FILE} names no compile job", "export a route prepared with --compile")
    ep = jobs_doc[0]["ep"]
    asked = {str(k): str(v) for k, v in (doc["options"].get("asked") or {}).items()}
    canonical = eps.canonical_ep(ep)
    target = planned_target(eps.ep_alias(ep), device_from_options(canonical, None, asked), GENAI, canonical=canonical)
    configs = ConfigBook()  # the bundle's config, read once for the plan and the route
    jobs, _notes = compiler.compile_jobs(plan_for(bundle, target, None, asked, config=configs.of(bundle)))
    ex.check_here(doc, bundle, jobs)
    with cache.holding(bundle):  # the command's one hold: no `bundle clean` while the route is prepared
        route = prepare_route(
            bundle,
            target,
            None,
            Compiling(runner=ex.runner(source, doc)),
            require_available=False,
            ep_options=asked,
            holdings=RunHoldings(configs, plugins_here().identities),  # the route's key holds what each plugin is
        )
    print(f"route={route.effective} cache={route.cache} ({route.cache_reason}) from {source}", file=sys.stderr)
    print(route.path)
