"""Carry a prepared route from machine A to machine B: ``export`` a derived bundle's compiled stages,
``import`` them into the same bundle on B.

A derived bundle cannot be copied as it is: its key holds the identities of A's source files
(device, inode, mtime), so on B it is never a hit. ``export(DERIVED, DEST)`` writes DEST/export.json
(the route's options, its compile jobs, the sha256 of each job's source model and its external data,
and of each compiled file) beside copies of the compiled files and prepared.json.
``import_route(BUNDLE, DEST)`` plans the same route on B's copy of the bundle, checks that its compile
jobs and source models (external data included) are the ones
exported and that the plugin EP here is the package version and SDK that compiled them, then derives
B's bundle with those files in place of a compile: ``winml perf --ep X --compile`` (same options)
then finds it fresh. Anything that differs is exit 2 naming it.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

from winml_perf.bundle import cache
from winml_perf.bundle.epcontext import compat, device_free
from winml_perf.bundle.epcontext.compile import CompileJob, JobRunner
from winml_perf.bundle.epcontext.provenance import PREPARED_FILE, VERSION_KEYS
from winml_perf.model.route import CompileOutcome, CompileStatus
from winml_perf.onnxfile.external_data import model_files
from winml_perf.support import safe_write
from winml_perf.support.errors import BundleError, UsageError

EXPORT_FILE = "export.json"
#: How the export folder is named in a refusal.
FLAG = "export-prepared DEST"
FORMAT = 1


def export(derived: Path, dest: Path) -> dict[str, Any]:
    """Write ``dest`` from the derived bundle ``derived`` (its manifest names the compiled stages)."""
    derived, dest = Path(derived), Path(dest)
    manifest, problem = cache.read_manifest(derived)
    if manifest is None:
        raise BundleError(
            f"{derived} is not a derived bundle ({problem})", "pass the path `winml bundle prepare` printed"
        )
    compiled = [o for o in manifest.get("compile", []) if o.get("status") == "compiled"]
    if not compiled:
        raise BundleError(f"{derived} holds no compiled stage", "prepare it with --compile first")
    source = Path(manifest["source"]["folder"])
    names = [name for o in compiled for name in compat.compiled_files(derived, o["output"])]
    # the whole plan is checked before the first write: a link planted in DEST is refused, naming it
    safe_write.check_plan(dest, [dest / n for n in (*names, PREPARED_FILE, EXPORT_FILE)], FLAG)
    files: dict[str, str] = {}
    for name in names:
        safe_write.copy_file(derived / name, dest / name, root=dest, flag=FLAG)
        files[name] = cache.file_sha256(dest / name)
    if (derived / PREPARED_FILE).is_file():
        safe_write.copy_file(derived / PREPARED_FILE, dest / PREPARED_FILE, root=dest, flag=FLAG)
    jobs = manifest["components"].get("compile", [])
    doc = {
        "format": FORMAT,
        "options": manifest["components"].get("options"),
        "plugins": manifest["components"].get("plugins"),
        "jobs": jobs,
        "outcomes": compiled,
        "sources": {name: digest for j in jobs for name, digest in source_digests(source, j["source"]).items()},
        "files": files,
    }
    safe_write.write_text(dest / EXPORT_FILE, json.dumps(doc, indent=2), root=dest, flag=FLAG)
    verify_export(derived, dest, files)
    return doc


def source_digests(bundle: Path, source: str) -> dict[str, str]:
    """sha256 of a job's source model and of the external data it names (the weights), by path in the bundle."""
    model = Path(bundle) / source
    folder = Path(source).parent
    return {(folder / rel).as_posix(): cache.file_sha256(model.parent / rel) for rel in model_files(model)}


def verify_export(origin: Path, dest: Path, files: dict[str, str]) -> None:
    """Every exported file is in ``dest`` with the bytes of its origin: an export is never reported
    written when a copy came out short (exit 2, naming the file)."""
    for name in files:
        if not (dest / name).is_file() or (dest / name).stat().st_size != (Path(origin) / name).stat().st_size:
            raise BundleError(
                f"export-prepared {dest}: {name} did not come out whole", "free disk space and export again"
            )


def read_export(folder: Path) -> dict[str, Any]:
    try:
        doc = json.loads((Path(folder) / EXPORT_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UsageError(
            f"{folder}/{EXPORT_FILE} cannot be read ({exc})", "pass a folder written by winml bundle export-prepared"
        ) from exc
    body = doc.get("options") if isinstance(doc, dict) and "options" in doc else None
    if isinstance(doc, dict) and body is None:
        body = doc.get("settings")
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or not isinstance(body, dict):  # a route or a model
        raise UsageError(f"{folder}/{EXPORT_FILE} is not an export of format {FORMAT}", "export it again")
    _check_shape(Path(folder), doc)
    return doc


#: What each key of export.json holds: a refusal names the key, never an unexpected TypeError later.
_SHAPES: dict[str, tuple[type, type | None]] = {
    "files": (dict, str),
    "sources": (dict, str),
    "plugins": (dict, dict),
    "jobs": (list, dict),
    "outcomes": (list, dict),
}


def _check_shape(folder: Path, doc: dict[str, Any]) -> None:
    """Exit 2 naming the key unless export.json's keys hold what they should and every member it names
    is a plain name inside the export folder."""
    where = f"{folder}/{EXPORT_FILE}"
    doc.setdefault("files", {})
    _check_containers(where, doc)
    _check_fields(where, doc)
    for name in doc["files"]:
        _check_member(folder, where, name, must_exist=True)
    if "output" in doc:
        _check_member(folder, where, doc["output"], must_exist=False)


def _check_containers(where: str, doc: dict[str, Any]) -> None:
    """Each key of ``_SHAPES`` present is its kind of container, holding entries of its kind."""
    for key, (kind, item) in _SHAPES.items():
        value = doc.get(key)
        if value is None:
            continue
        if not isinstance(value, kind):
            raise UsageError(f"{where}: key {key!r} is not a JSON {kind.__name__}", "export it again")
        items: list[Any] = list(value.values()) if isinstance(value, dict) else list(cast(list[Any], value))
        if item is not None and any(not isinstance(v, item) for v in items):
            raise UsageError(f"{where}: key {key!r} holds an entry that is not a {item.__name__}", "export it again")


def _check_fields(where: str, doc: dict[str, Any]) -> None:
    """The strings and objects read later: output and model, each job's ep/source/output, the asked
    options (a bundle's route), the settings' EP and provider options (a plain model's)."""
    for key in ("output", "model"):
        if key in doc and not isinstance(doc[key], str):
            raise UsageError(f"{where}: key {key!r} is not a string", "export it again")
    for i, job in enumerate(doc.get("jobs") or []):
        for key in ("ep", "source", "output"):
            if not isinstance(job.get(key), str):
                raise UsageError(f"{where}: jobs[{i}] has no string {key!r}", "export it again")
    options = doc.get("options")
    if isinstance(options, dict) and not isinstance(options.get("asked") or {}, dict):
        raise UsageError(f"{where}: key 'options.asked' is not an object", "export it again")
    settings = doc.get("settings")
    if isinstance(settings, dict) and "options" not in doc:
        if not isinstance(settings.get("ep"), str):
            raise UsageError(f"{where}: key 'settings.ep' is missing or not a string", "export it again")
        if not isinstance(settings.get("provider_options") or {}, dict):
            raise UsageError(f"{where}: key 'settings.provider_options' is not an object", "export it again")


def _check_member(folder: Path, where: str, name: str, must_exist: bool) -> None:
    """A file an export names is a plain name inside the export folder: never absolute, never '..'."""
    parts = Path(name).parts
    if not name or Path(name).is_absolute() or ".." in parts or "\\" in name or "\x00" in name:
        raise UsageError(
            f"{where}: member {name!r} points outside the export folder",
            "export it again; never import a tampered export",
        )
    if must_exist and not (folder / name).is_file():
        raise UsageError(f"{where}: member {name!r} is not in {folder}", "copy the whole export folder")


def check_here(doc: dict[str, Any], bundle: Path, jobs: Sequence[CompileJob]) -> None:
    """Exit 2 unless ``jobs`` (planned here) and this bundle's source models are the exported ones,
    and the plugin EP here is the package version and SDK that compiled them."""
    exported = [json.dumps(j, sort_keys=True) for j in doc.get("jobs", [])]
    for job in jobs:
        if json.dumps(job.key_dict(), sort_keys=True) not in exported:
            raise UsageError(
                f"import-prepared: the route planned here compiles {job.source} as {job.key_dict()}, "
                "which the export does not hold",
                "export the route prepared with the same --ep-option and bundle config",
            )
        exported = doc.get("sources", {})
        for name, digest in source_digests(Path(bundle), job.source).items():
            if (name == job.source or name in exported) and exported.get(name) != digest:
                what = "model" if name == job.source else f"external data of {job.source}"
                raise UsageError(
                    f"import-prepared: {name} in {bundle} is not the {what} the export was compiled from",
                    "import into a copy of the same bundle",
                )
    for ep, made in (doc.get("plugins") or {}).items():
        here = device_free._identity(ep) or {}
        differs = [f"{k} {made.get(k)} -> {here.get(k)}" for k in VERSION_KEYS if made.get(k) != here.get(k)]
        if differs:
            raise UsageError(
                f"import-prepared: the export was compiled by another {ep} ({'; '.join(differs)})",
                "compile on this machine (winml perf --compile), or install the exported version",
            )


def runner(folder: Path, doc: dict[str, Any]) -> JobRunner:
    """A compile.run_jobs replacement: each job's exported files, checked against their sha256."""

    def run(jobs: Sequence[CompileJob], src_dir: Path, out_dir: Path, timeout_s: float) -> list[CompileOutcome]:
        outcomes: list[CompileOutcome] = []
        for job in jobs:
            names = [n for n in doc["files"] if compat.is_compiled_file(n, job.output)]
            for name in names:
                shutil.copy2(Path(folder) / name, Path(out_dir) / name)
                if cache.file_sha256(Path(out_dir) / name) != doc["files"][name]:
                    raise UsageError(f"import-prepared: {folder}/{name} changed since export", "export it again")
            outcomes.append(
                CompileOutcome(job.stages, job.source, job.ep, job.output, CompileStatus.COMPILED, "imported", 0.0)
            )
        made = device_free.read_prepared(folder)
        if made:
            stages = {k: {**v, "imported_from": str(Path(folder).resolve())} for k, v in made.items()}
            (Path(out_dir) / PREPARED_FILE).write_text(json.dumps({"stages": stages}, indent=2))
        return outcomes

    return run
