"""Carry a prepared plain .onnx model (an EPContext model) from machine A to machine B.

``export_model(FOLDER, DEST)``: FOLDER is the prepared model's cache folder (or the model file in it,
which `winml bundle prepare MODEL.onnx` prints). DEST gets copies of the compiled files and
prepared.json, and export.json: what decides the model (EP, level, provider options, session config),
the sha256 of the source model and its external data, of each compiled file, and the EP package
that compiled it. ``import_plan(MODEL, DEST)`` checks on B that the model is the one exported, that
the plugin EP here is the same package version and SDK, and that B decides the same options; its
``write``, handed to ``prepare_onnx`` (bundle/onnx_prepare.py) as the importer, then puts the
exported files through the prepared-model cache in place of a compile, after onnxruntime (or,
where it cannot tell, a session with the options at level disable) accepts them for the running EP
(the ``.virtual`` compatibility key of a device-free compile read under its name). `winml perf
MODEL.onnx --ep X --prepare` with the same options then finds it: a hit. Anything that differs is
exit 2 naming it, and nothing is written.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from winml_perf.bundle import cache
from winml_perf.bundle.epcontext import compat, device_free
from winml_perf.bundle.epcontext.export import EXPORT_FILE, FLAG, read_export, verify_export
from winml_perf.bundle.epcontext.provenance import PREPARED_FILE, VERSION_KEYS
from winml_perf.ep import table as eps
from winml_perf.onnxfile.external_data import model_files
from winml_perf.support import safe_write
from winml_perf.support.errors import BundleError, UsageError

KIND = "onnx-model"
SETTINGS = ("kind", "ep", "graph_optimization_level", "provider_options", "session_config")


@dataclass(frozen=True)
class OnnxImport:
    """What ``prepare_onnx`` is asked for to import an export: the same target, level and options the
    export was compiled with, and ``write(tmp, output)`` in place of the compile."""

    target: Any  # a devices.Target, resolved here as `winml perf MODEL --ep X` resolves it
    graph_optimization_level: str
    provider_options: dict[str, str]
    session_config: dict[str, str]
    write: Callable[[Path, str], Any]


def is_prepared_model(manifest: dict[str, Any]) -> bool:
    return "output" in manifest and "kind" in manifest and "model" in manifest.get("source", {})


def export_model(folder: Path, manifest: dict[str, Any], dest: Path) -> dict[str, Any]:
    """Write ``dest`` from a prepared model's cache ``folder`` (its ``manifest``)."""
    if manifest["kind"] != "epcontext":
        raise BundleError(
            f"{folder} holds an optimised model ({manifest['kind']}), made for this host's CPU; only compiled "
            "(EPContext) models travel",
            "prepare it with --compile for an EP that compiles (QNN, OpenVINO, VitisAI, TensorRT-RTX), or prepare "
            "the optimised model on the client",
        )
    made = device_free.read_prepared(folder).get(manifest["output"])
    if not made:
        raise BundleError(
            f"{folder} has no {PREPARED_FILE} saying how {manifest['output']} was made",
            "prepare it again (winml bundle prepare MODEL.onnx --ep X --compile [--device-free])",
        )
    model = Path(manifest["source"]["model"])
    names = compat.compiled_files(folder, manifest["output"])
    safe_write.check_plan(dest, [dest / n for n in (*names, PREPARED_FILE, EXPORT_FILE)], FLAG)
    files: dict[str, str] = {}
    for name in names:
        safe_write.copy_file(folder / name, dest / name, root=dest, flag=FLAG)
        files[name] = cache.file_sha256(dest / name)
    safe_write.copy_file(folder / PREPARED_FILE, dest / PREPARED_FILE, root=dest, flag=FLAG)
    doc = {
        "format": 1,
        "kind": KIND,
        "model": model.name,
        "sources": {rel: cache.file_sha256(model.parent / rel) for rel in model_files(model)},
        "settings": {k: manifest["components"].get(k) for k in SETTINGS},
        "plugins": {manifest["ep"]: {k: made.get(k) for k in VERSION_KEYS}},
        "output": manifest["output"],
        "files": files,
    }
    safe_write.write_text(dest / EXPORT_FILE, json.dumps(doc, indent=2), root=dest, flag=FLAG)
    verify_export(folder, dest, files)
    return doc


def import_plan(model: Path, source: Path) -> OnnxImport:
    """How ``model`` is prepared from the export in ``source``; exit 2 where the export does not fit here."""
    from winml_perf.ep.devices import resolve_target
    from winml_perf.ep.effective import plain_provider_options
    from winml_perf.ep.plugins import register_plugin_eps
    from winml_perf.model.runtime import ONNX
    from winml_perf.session.onnx_options import parse_graph_optimization_level

    doc = read_export(source)
    if doc.get("kind") != KIND or not isinstance(doc.get("settings"), dict):
        raise UsageError(
            f"{source}/{EXPORT_FILE} is the export of a genai bundle's route, not of a prepared .onnx model",
            "import it into the bundle folder: winml bundle import-prepared BUNDLE EXPORT",
        )
    want = doc["settings"]
    model = Path(model).resolve()
    if model.name != doc.get("model") or {rel: _sha(model.parent / rel) for rel in model_files(model)} != doc.get(
        "sources"
    ):
        raise UsageError(
            f"import-prepared: {model} (and its external data) is not the model {doc.get('model')} the export was "
            "compiled from",
            "import into a copy of the same model file",
        )
    register_plugin_eps([])
    ep = want["ep"]
    _same_plugin(doc, ep)
    target = resolve_target(eps.ep_alias(ep), None, ONNX)  # as `winml perf MODEL --ep X` resolves it here
    _, options = plain_provider_options(target, want.get("provider_options") or {})
    if dict(options) != want.get("provider_options"):
        raise UsageError(
            f"import-prepared: the {eps.ep_alias(ep)} options decided here {dict(options)} are not the exported "
            f"{want.get('provider_options')}",
            "compile on this machine (winml bundle prepare MODEL.onnx --ep X --compile)",
        )

    def write(tmp: Path, output: str) -> compat.Verdict:
        if output != doc.get("output"):
            raise UsageError(f"import-prepared: the export holds {doc.get('output')}, not {output}", "export it again")
        for name, digest in doc["files"].items():
            shutil.copy2(Path(source) / name, tmp / name)
            if cache.file_sha256(tmp / name) != digest:
                raise UsageError(f"import-prepared: {source}/{name} changed since export", "export it again")
        made = device_free.read_prepared(source)
        stages = {k: {**v, "imported_from": str(Path(source).resolve())} for k, v in made.items()}
        (tmp / PREPARED_FILE).write_text(json.dumps({"stages": stages}, indent=2), encoding="utf-8")
        verdict = compat.check(tmp / output, ep, options, level="disable")  # the running EP's name, here
        if not verdict.fit:
            raise UsageError(
                f"import-prepared: {output} does not fit the {eps.ep_alias(ep)} device here "
                f"({verdict.verdict}: {verdict.detail}); nothing was imported",
                "compile on this machine (winml bundle prepare MODEL.onnx --ep X --compile)",
            )
        return verdict

    level = parse_graph_optimization_level(want["graph_optimization_level"])  # the export's, parsed once, here
    return OnnxImport(target, level, options, dict(want.get("session_config") or {}), write)


def _sha(path: Path) -> str | None:
    return cache.file_sha256(path) if path.is_file() else None


def _same_plugin(doc: dict[str, Any], ep: str) -> None:
    made = (doc.get("plugins") or {}).get(ep) or {}
    here = device_free._identity(ep) or {}
    differs = [f"{k} {made.get(k)} -> {here.get(k)}" for k in VERSION_KEYS if made.get(k) != here.get(k)]
    if differs:
        raise UsageError(
            f"import-prepared: the export was compiled by another {eps.ep_alias(ep)} ({'; '.join(differs)})",
            "compile on this machine (winml bundle prepare MODEL.onnx --ep X --compile), or install the exported "
            "version",
        )
