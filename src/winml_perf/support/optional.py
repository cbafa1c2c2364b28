"""Python modules some features need and a plain ``pip install winml-perf`` may lack: one table, one
check, one message (exit 2, naming the pip command).

``require(feature, *modules)`` is the check a command runs before its work starts (``perf`` with the
equivalence check on, ``tune``, ``bundle synth``, a PostgreSQL store). ``missing_module_error(exc)``
turns a ``ModuleNotFoundError`` of a module in the table, raised anywhere later, into the same message,
so that no path of the base install ends in "unexpected ModuleNotFoundError".
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass

from winml_perf.support.errors import UsageError


@dataclass(frozen=True)
class Dependency:
    module: str  # the import name
    package: str  # the pip requirement
    extra: str  # the winml-perf extra that installs it ("": a base dependency)

    @property
    def install(self) -> str:
        if not self.extra:  # in the base dependencies: an install that lacks it is a broken one
            return f"pip install '{self.package}' (a base dependency of winml-perf: pip install -e . installs it)"
        return f"pip install -e '.[{self.extra}]' (from the winml-perf checkout; or pip install '{self.package}')"


#: Every module a feature imports lazily, by import name. Keep in step with pyproject.toml.
DEPENDENCIES: dict[str, Dependency] = {
    d.module: d
    for d in (
        Dependency("onnx", "onnx>=1.16", ""),
        Dependency("onnx_ir", "onnx-ir>=0.1", "synth"),
        Dependency("torch", "torch>=2.4", "synth"),
        Dependency("transformers", "transformers>=4.45", "synth"),
        Dependency("tokenizers", "tokenizers>=0.19", "synth"),
        Dependency("safetensors", "safetensors>=0.4", "synth"),
        Dependency("psycopg", "psycopg[binary]>=3.1", "postgres"),
        Dependency("pynvml", "nvidia-ml-py>=12", "energy"),
        Dependency("onnxruntime_qnn", "onnxruntime-qnn>=2.7", "qnn"),
        Dependency("onnxruntime_ep_webgpu", "onnxruntime-ep-webgpu>=0.4", "webgpu"),
        Dependency("onnxruntime_ep_openvino", "onnxruntime-ep-openvino>=1.8", "openvino"),
    )
}


def importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def _error(feature: str, missing: list[str], why: str = "") -> UsageError:
    deps = [DEPENDENCIES[m] for m in missing if m in DEPENDENCIES]
    extras = sorted({d.extra for d in deps if d.extra})
    base = [d for d in deps if not d.extra]
    remedies = [d.install for d in base]
    if extras:
        remedies.append(f"pip install -e '.[{','.join(extras)}]' (from the winml-perf checkout)")
    if not remedies:
        remedies = [f"pip install {' '.join(missing)}"]
    names = ", ".join(missing)
    return UsageError(
        f"{feature} needs the Python module{'s' if len(missing) > 1 else ''} {names}, which "
        f"{'are' if len(missing) > 1 else 'is'} not importable here{f' ({why})' if why else ''}",
        "; ".join(remedies),
    )


def require(feature: str, *modules: str) -> None:
    """Exit 2 before any work when a module ``feature`` needs cannot be imported."""
    missing = [m for m in modules if not importable(m)]
    if missing:
        raise _error(feature, missing)


def missing_module_error(exc: BaseException) -> UsageError | None:
    """The one-line usage error for a ModuleNotFoundError of a module in the table, else None."""
    if not isinstance(exc, ModuleNotFoundError) or not exc.name:
        return None
    top = exc.name.split(".")[0]
    if top not in DEPENDENCIES:
        return None
    return _error("this command", [top])
