"""Carry a prepared route from machine A to machine B: ``export`` a derived bundle's compiled stages,
``import`` them into the same bundle on B.

A derived bundle cannot be copied as it is: its key holds the identities of A's source files
(device, inode, mtime), so on B it is never a hit. ``export(DERIVED, DEST)`` writes DEST/export.json
(the route's options, its compile jobs, the sha256 of each job's source model and of each compiled
file) beside copies of the compiled files and prepared.json. ``import_route(BUNDLE, DEST)`` plans the
same route on B's copy of the bundle, checks that its compile jobs and source models are the ones
exported and that the plugin EP here is the package version and SDK that compiled them, then derives
B's bundle with those files in place of a compile: ``winml perf --ep X --compile`` (same options)
then finds it fresh. Anything that differs is exit 2 naming it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from winml_perf.bundle import cache
from winml_perf.bundle.epcontext import compat, device_free
from winml_perf.bundle.epcontext.provenance import PREPARED_FILE, VERSION_KEYS
from winml_perf.model.route import CompileOutcome
from winml_perf.support.errors import BundleError, UsageError

EXPORT_FILE = "export.json"
FORMAT = 1


def export(derived: Path, dest: Path) -> dict:
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
    dest.mkdir(parents=True, exist_ok=True)
    source = Path(manifest["source"]["folder"])
    files: dict[str, str] = {}
    for o in compiled:
        for name in compat.compiled_files(derived, o["output"]):
            shutil.copy2(derived / name, dest / name)
            files[name] = cache.file_sha256(dest / name)
    if (derived / PREPARED_FILE).is_file():
        shutil.copy2(derived / PREPARED_FILE, dest / PREPARED_FILE)
    jobs = manifest["components"].get("compile", [])
    doc = {
        "format": FORMAT,
        "options": manifest["components"].get("options"),
        "plugins": manifest["components"].get("plugins"),
        "jobs": jobs,
        "outcomes": compiled,
        "sources": {j["source"]: cache.file_sha256(source / j["source"]) for j in jobs},
        "files": files,
    }
    (dest / EXPORT_FILE).write_text(json.dumps(doc, indent=2), encoding="utf-8")
    return doc


def read_export(folder: Path) -> dict:
    try:
        doc = json.loads((Path(folder) / EXPORT_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UsageError(
            f"{folder}/{EXPORT_FILE} cannot be read ({exc})", "pass a folder written by winml bundle export-prepared"
        ) from exc
    body = doc.get("options") if isinstance(doc, dict) and "options" in doc else (doc or {}).get("settings")
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or not isinstance(body, dict):  # a route or a model
        raise UsageError(f"{folder}/{EXPORT_FILE} is not an export of format {FORMAT}", "export it again")
    return doc


def check_here(doc: dict, bundle: Path, jobs) -> None:
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
        want = doc.get("sources", {}).get(job.source)
        if want != cache.file_sha256(Path(bundle) / job.source):
            raise UsageError(
                f"import-prepared: {job.source} in {bundle} is not the model the export was compiled from",
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


def runner(folder: Path, doc: dict):
    """A compile.run_jobs replacement: each job's exported files, checked against their sha256."""

    def run(jobs, src_dir: Path, out_dir: Path, timeout_s: float) -> list[CompileOutcome]:
        outcomes = []
        for job in jobs:
            names = [n for n in doc["files"] if compat.is_compiled_file(n, job.output)]
            for name in names:
                shutil.copy2(Path(folder) / name, Path(out_dir) / name)
                if cache.file_sha256(Path(out_dir) / name) != doc["files"][name]:
                    raise UsageError(f"import-prepared: {folder}/{name} changed since export", "export it again")
            outcomes.append(CompileOutcome(job.stages, job.source, job.ep, job.output, "compiled", "imported", 0.0))
        made = device_free.read_prepared(folder)
        if made:
            stages = {k: {**v, "imported_from": str(Path(folder).resolve())} for k, v in made.items()}
            (Path(out_dir) / PREPARED_FILE).write_text(json.dumps({"stages": stages}, indent=2))
        return outcomes

    return run
