"""Flag values of `--runtime winml` -> OnnxSession options: parsing and checks, no onnxruntime session.

`winml perf` calls ``options_from_flags`` (which uses ``onnx_inputs.parse_shapes`` / ``parse_inputs``
and the parsers here) and puts the result in ``SessionSpec(runtime="winml", options=...)``;
`winml bundle prepare` calls ``parse_graph_optimization_level``. Every mistake is a ``UsageError``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import Any

from winml_perf.session import onnx_inputs
from winml_perf.support.errors import UsageError

GRAPH_OPT_LEVELS: dict[str, str] = {
    "disable": "ORT_DISABLE_ALL",
    "basic": "ORT_ENABLE_BASIC",
    "extended": "ORT_ENABLE_EXTENDED",
    "layout": "ORT_ENABLE_LAYOUT",
    "all": "ORT_ENABLE_ALL",
}
DEFAULT_GRAPH_OPT = "all"


def parse_graph_optimization_level(text: str | None) -> str:
    """'disable'|'basic'|'extended'|'layout'|'all' (also ORT's enum names) -> the short name."""
    if text is None:
        return DEFAULT_GRAPH_OPT
    word = str(text).strip().lower()
    for short, enum_name in GRAPH_OPT_LEVELS.items():
        if word in (short, enum_name.lower()):
            return short
    raise UsageError(
        f"unknown graph optimization level {text!r} (--graph-optimization-level)",
        f"use one of: {'|'.join(GRAPH_OPT_LEVELS)}",
    )


def parse_session_config(values: Iterable[str] | None) -> dict[str, str]:
    """``["session.intra_op.allow_spinning=0"]`` -> ``{"session.intra_op.allow_spinning": "0"}``."""
    out: dict[str, str] = {}
    for text in values or ():
        key, sep, value = str(text).partition("=")
        if not sep or not key.strip():
            raise UsageError(
                f"--session-config {text!r} is not KEY=VALUE", "e.g. --session-config session.intra_op.allow_spinning=0"
            )
        if key.strip() in out:
            raise UsageError(f"--session-config gives {key.strip()!r} twice", "give each key once")
        out[key.strip()] = value.strip()
    return out


def parse_threads(value: int | None, flag: str) -> int | None:
    """None or 0 -> onnxruntime's default; negative is a usage error."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise UsageError(f"{flag} must be 0 (onnxruntime's default) or more, got {value!r}", f"e.g. {flag} 4")
    return value


def graph_optimization_enum(level: str) -> Any:  # an ort.GraphOptimizationLevel (onnxruntime is untyped)
    """onnxruntime's enum for ``level``, a short name as ``parse_graph_optimization_level`` gives it."""
    import onnxruntime as ort

    return getattr(ort.GraphOptimizationLevel, GRAPH_OPT_LEVELS[level])


def options_from_flags(
    *,
    ep: str | None = None,
    device: str | None = None,
    shape: Sequence[str] | None = None,
    input: Sequence[str] | None = None,
    io_binding: bool = False,
    intra_op_threads: int | None = None,
    inter_op_threads: int | None = None,
    graph_optimization_level: str | None = None,
    session_config: Sequence[str] | None = None,
    seed: int = 0,
) -> dict[str, Any]:
    """`winml perf` flag values -> the JSON-able ``SessionSpec.options`` for ``OnnxSession(path, **options)``."""
    return {
        "ep": ep,
        "device": device,
        "shapes": {k: list(v) for k, v in onnx_inputs.parse_shapes(shape).items()},
        "inputs": {k: os.path.abspath(v) for k, v in onnx_inputs.parse_inputs(input).items()},
        "io_binding": bool(io_binding),
        "intra_op_threads": parse_threads(intra_op_threads, "--intra-op-threads"),
        "inter_op_threads": parse_threads(inter_op_threads, "--inter-op-threads"),
        "graph_optimization_level": parse_graph_optimization_level(graph_optimization_level),
        "session_config": parse_session_config(session_config),
        "seed": int(seed),
    }
