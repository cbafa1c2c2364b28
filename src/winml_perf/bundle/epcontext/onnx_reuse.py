"""A prepared plain .onnx model's check on reuse and its record (bundle/onnx_prepare.py calls these).

``fits_check`` is the cache's check of a hit: an EPContext model onnxruntime asks to recompile, or one
a session with the run's options does not load (level disable, as OnnxSession loads prepared models),
is a miss whose reason says so, and is recompiled.
``compatibility`` is what the record keeps: the verdict, and ``prepared`` (how it was made, what runs it
now, ``matched``), the same shape as a genai route's compiled stage.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from winml_perf.bundle import cache
from winml_perf.bundle.epcontext import compat, device_free, provenance
from winml_perf.ep import table as eps

LOAD_LEVEL = "disable"  # the level a prepared model is loaded at (session/onnx_session.py)


def fits_check(options: Mapping[str, str], seen: dict[str, Any]) -> cache.Check:
    """The cache's check of a prepared EPContext model here; the verdict it reached goes to ``seen``."""

    def check(folder: Path, manifest: dict[str, Any]) -> str | None:
        if manifest.get("kind") != "epcontext":
            return None
        output = manifest["output"]
        verdict = compat.check_stage(folder, output, manifest["ep"], options, LOAD_LEVEL)
        seen["verdict"] = verdict
        if verdict.fit:
            return None
        alias = eps.ep_alias(manifest["ep"])
        return f"{output} is not fit for the {alias} device here ({verdict.verdict}: {verdict.detail}); recompiling"

    return check


def compiled_verdict(folder: Path, output: str, ep: str, options: Mapping[str, str]) -> compat.Verdict:
    """A model compiled here passed the compile's load check (onnx_prepare.compile_model): kept in the memo."""
    info = provenance.compatibility_info(folder / output, ep)
    verdict = compat.Verdict(
        "verified", "session", "COMPILED_HERE", info, "compiled here; a session with the run's options loads it"
    )
    from winml_perf.ep.plugins import plugin_identity

    memo = compat.read_memo(folder)
    memo[output] = {
        "key": compat.memo_key(folder, compat.compiled_files(folder, output), ep, options, plugin_identity(ep)),
        "verdict": verdict.to_dict(),
    }
    compat.write_memo(folder, memo)
    return verdict


def compatibility(
    folder: Path, output: str, ep: str, options: Mapping[str, str], verdict: compat.Verdict | None
) -> dict[str, Any]:
    """The record's view: ``verdict`` (None: not checked, e.g. on a build server with no device) and how
    the model was made against what runs it now."""
    made = device_free.read_prepared(folder).get(output)
    if verdict is None:
        out = {
            "verdict": "unknown",
            "source": "none",
            "status": "NOT_CHECKED",
            "info": made.get("compatibility_info") if made else None,
            "detail": "prepared device-free: no device here to check it on",
        }
    else:
        out = verdict.to_dict()
    out["prepared"] = device_free.reuse_report(made, ep, options, out if verdict else None) if made else None
    return out
