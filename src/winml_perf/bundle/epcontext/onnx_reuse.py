"""A prepared plain .onnx model's provenance and its check on reuse (bundle/onnx_prepare.py calls these).

``made_here`` is ``prepared.json``'s entry for a model compiled on this machine's device (a device-free
compile writes its own, device_free.compile_plain). ``fits_check`` is the cache's check of a hit: an
EPContext model onnxruntime asks to recompile, or one a session with the run's options does not load
(level disable, as OnnxSession loads prepared models), is a miss whose reason says so, and is recompiled.
``compatibility`` is what the record keeps: the verdict, and ``prepared`` (how it was made, what runs it
now, ``matched``), the same shape as a genai route's compiled stage.
"""

from __future__ import annotations

import platform
import time
from collections.abc import Mapping
from pathlib import Path

from winml_perf.bundle.epcontext import compat, device_free
from winml_perf.ep import table as eps

LOAD_LEVEL = "disable"  # the level a prepared model is loaded at (session/onnx_session.py)


def made_here(output: Path, stages: list[str], ep: str, options: Mapping, strict: bool) -> dict:
    """How ``output`` was made: on this machine's ``ep`` device, with these options and versions."""
    import onnxruntime as ort

    ident = device_free._identity(ep) or {}
    return {
        "made": "on-device",
        "stages": list(stages),
        "ep": ep,
        "registered_as": ep,
        "device": _device(ep),
        **{k: ident.get(k) for k in device_free._VERSION_KEYS},
        "onnxruntime": ort.__version__,
        "target_options": {k: str(v) for k, v in options.items() if k in device_free.TARGET_KEYS},
        "compatibility_info": _info(output, ep),
        "strict": strict,
        "host": platform.node(),
        "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "placement": None,  # the run's own placement (bundle/onnx_placement.py) says where nodes went
    }


def _device(ep: str) -> dict | None:
    from winml_perf.session.onnx_session import ort_ep_devices

    found = ort_ep_devices(ep)
    if not found:
        return None
    kind = found[0].device.type
    return {"type": str(getattr(kind, "name", kind)).rsplit(".", 1)[-1].lower(), "vendor": found[0].device.vendor}


def _info(output: Path, ep: str) -> str | None:
    from onnxruntime.capi import onnxruntime_pybind11_state as C

    try:
        return C.get_compatibility_info_from_model(str(output), ep)
    except Exception:  # an optimised (non-EPContext) model may carry none
        return None


def fits_check(options: Mapping[str, str], seen: dict):
    """The cache's check of a prepared EPContext model here; the verdict it reached goes to ``seen``."""

    def check(folder: Path, manifest: dict) -> str | None:
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
    info = _info(folder / output, ep)
    verdict = compat.Verdict(
        "verified", "session", "COMPILED_HERE", info, "compiled here; a session with the run's options loads it"
    )
    memo = compat.read_memo(folder)
    memo[output] = {
        "key": compat.memo_key(folder, compat.compiled_files(folder, output), ep, options),
        "verdict": verdict.to_dict(),
    }
    compat.write_memo(folder, memo)
    return verdict


def compatibility(folder: Path, output: str, ep: str, options: Mapping[str, str], verdict) -> dict:
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
