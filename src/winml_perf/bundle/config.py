"""genai_config.json: load and validate (a first version; the stage model grows in the routing work)."""

from __future__ import annotations

import json
from pathlib import Path

from winml_perf.errors import BundleError

CONFIG_NAME = "genai_config.json"


def load_config_dict(bundle: Path) -> dict:
    """Read a bundle's genai_config.json, with errors that name the path and the fix."""
    bundle = Path(bundle)
    if not bundle.exists():
        raise BundleError(f"bundle folder {bundle} does not exist", "pass the path of a folder holding genai_config.json")
    if not bundle.is_dir():
        raise BundleError(f"{bundle} is not a folder", "pass the bundle folder, not a file inside it")
    path = bundle / CONFIG_NAME
    if not path.is_file():
        raise BundleError(f"{bundle} holds no {CONFIG_NAME}", "pass an onnxruntime-genai bundle folder (built by the model builder or `winml bundle synth`)")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise BundleError(f"{path}: malformed JSON at line {exc.lineno} column {exc.colno}: {exc.msg}", "fix or regenerate the file") from exc
    except OSError as exc:
        raise BundleError(f"{path}: cannot be read: {exc.strerror}") from exc
    if not isinstance(data, dict) or not isinstance(data.get("model"), dict) or not isinstance(data["model"].get("decoder"), dict):
        raise BundleError(f"{path}: key model.decoder is missing or not an object", "a genai_config.json needs model.decoder")
    return data
