"""The runtimes a measurement can use, as values: chosen once (from the path and --runtime), then
asked rather than compared by name.

``winml-genai`` loads an onnxruntime-genai bundle (a folder with genai_config.json) and measures
tokens; ``winml`` loads a plain .onnx model and measures inferences.

A runtime names its session class as a dotted path (``session``, "module:Class"), which
session/factory.py imports when it opens one: model/ stays free of session/ and onnxruntime, and
adding a runtime is one value here plus its session module.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from winml_perf.support.errors import UsageError


@dataclass(frozen=True)
class Runtime:
    name: str  # as written in --runtime and in records
    token_based: bool  # measures prompt/decode tokens (else: inferences of one model)
    default_device: str  # --device when none is given
    what: str  # what it loads, for messages
    session: str  # "module:Class" built as Class(path, **SessionSpec.options), then loaded by the runner
    missing_remedy: str = ""  # the remedy when its session module cannot be imported ("": the ImportError stands)

    def __str__(self) -> str:
        return self.name


GENAI = Runtime(
    "winml-genai",
    token_based=True,
    default_device="config",
    what="onnxruntime-genai bundles",
    session="winml_perf.session.genai_session:GenaiSession",
)
ONNX = Runtime(
    "winml",
    token_based=False,
    default_device="auto",
    what="plain .onnx models",
    session="winml_perf.session.onnx_session:OnnxSession",
    missing_remedy="use a bundle folder with --runtime winml-genai",
)
RUNTIMES: dict[str, Runtime] = {r.name: r for r in (GENAI, ONNX)}


def runtime_named(name: str | Runtime) -> Runtime:
    if isinstance(name, Runtime):
        return name
    try:
        return RUNTIMES[name]
    except KeyError:
        choices = ", ".join(f"{r.name} ({r.what})" for r in RUNTIMES.values())
        raise UsageError(f"--runtime {name!r} is unknown", f"use one of: {choices}") from None


def runtime_for_path(path: Path) -> Runtime:
    """A .onnx file is a plain model; anything else is taken for a bundle folder."""
    return ONNX if path.suffix == ".onnx" and not path.is_dir() else GENAI


#: Flags that only a runtime of that kind reads: given to the other, they are refused (exit 2).
GENAI_ONLY = (
    "--stages",
    "--compile",
    "--prompt",
    "--prompt-tokens",
    "--max-new-tokens",
    "--apply-template",
    "--duration",
)
ONNX_ONLY = ("--shape", "--input", "--io-binding", "--prepare")


def check_runtime_flags(runtime: Runtime, given: dict[str, bool]) -> None:
    """Exit 2 when ``given`` (flag -> whether it was given) holds a flag that ``runtime`` does not read."""
    wrong = ONNX_ONLY if runtime.token_based else GENAI_ONLY
    bad = [flag for flag in wrong if given.get(flag)]
    if bad:
        other = next(r for r in RUNTIMES.values() if r is not runtime)
        raise UsageError(  # the runtime may come from the path, so --runtime is not named as given
            f"{', '.join(bad)} do not apply to {runtime.what} (runtime {runtime})",
            f"drop them; they belong to {other.what} (runtime {other.name})",
        )
