"""How a model compiled on this machine's device was made: its entry in the folder's prepared.json.

A device-free compile writes its own entry (device_free.py); ``made_here`` is the on-device one (the
compile children of a genai route, compile.run_jobs, and of a plain .onnx model, onnx_prepare.py), so
every compiled stage's record says where and how it was made (device_free.reuse_report).
"""

from __future__ import annotations

import json
import platform
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

PREPARED_FILE = "prepared.json"  # how each compiled model of a folder was made
TARGET_KEYS = ("soc_model", "htp_arch", "device_type", "backend_type")  # the options that describe the target
VERSION_KEYS = ("package", "version", "sdk_version")


def made_here(
    output: Path, stages: Sequence[str], ep: str, options: Mapping[str, Any], strict: bool = False
) -> dict[str, Any]:
    """How ``output`` was made: on this machine's ``ep`` device, with these options and versions."""
    import onnxruntime as ort

    from winml_perf.ep.plugins import plugin_identity

    ident = plugin_identity(ep) or {}
    return {
        "made": "on-device",
        "stages": list(stages),
        "ep": ep,
        "registered_as": ep,
        "device": _device(ep),
        **{k: ident.get(k) for k in VERSION_KEYS},
        "onnxruntime": ort.__version__,
        "target_options": {k: str(v) for k, v in options.items() if k in TARGET_KEYS},
        "compatibility_info": compatibility_info(output, ep),
        "strict": strict,
        "host": platform.node(),
        "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "placement": None,  # where the nodes went is the route's own placement (placement.json)
    }


def write(folder: Path, made: Mapping[str, dict[str, Any]]) -> None:
    """``folder``/prepared.json: compiled file -> how it was made."""
    text = json.dumps({"stages": dict(made)}, indent=2)
    (Path(folder) / PREPARED_FILE).write_text(text, encoding="utf-8")


def _device(ep: str) -> dict[str, Any] | None:
    from winml_perf.session.onnx_session import ort_ep_devices

    found = ort_ep_devices(ep)
    if not found:
        return None
    kind = found[0].device.type
    return {"type": str(getattr(kind, "name", kind)).rsplit(".", 1)[-1].lower(), "vendor": found[0].device.vendor}


def compatibility_info(output: Path, ep: str) -> str | None:
    from onnxruntime.capi import onnxruntime_pybind11_state as C

    try:
        info: str | None = C.get_compatibility_info_from_model(str(output), ep)
        return info
    except Exception:  # a model onnxruntime cannot read carries none we could report
        return None
