"""Whether a path is an .onnx file, and whether it is whole, from its protobuf framing alone (no onnx package, no parsing of
the graph): an empty file, a file cut short inside a field, or a model without a graph is named
before onnxruntime is asked to load it (which would fail a cell, far from the file's name).

The top-level fields of a ModelProto are walked by seeking: a few reads whatever the model's size.
A file cut short inside the graph (field 7) shows as the graph's length running past the end.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import BinaryIO

from winml_perf.support.errors import BundleError

GRAPH_FIELD = 7
_FIXED = {1: 8, 5: 4}  # wire type -> bytes (fixed64, fixed32)


def _varint(f: BinaryIO) -> int | None:
    shift = result = 0
    while True:
        byte = f.read(1)
        if not byte:
            return None
        result |= (byte[0] & 0x7F) << shift
        if not byte[0] & 0x80:
            return result
        shift += 7
        if shift > 63:
            return None


def not_a_model_file(path: Path) -> BundleError | None:
    """Why ``path`` cannot be opened as an .onnx file (missing, or a folder), or None."""
    if Path(path).is_dir():
        return BundleError(
            f"{path} is a folder, not an .onnx file",
            "pass the path of an .onnx file; a bundle folder is measured with --runtime winml-genai "
            "(the default for a folder)",
        )
    if not Path(path).is_file():
        return BundleError(f"{path}: model file not found", "pass the path of an .onnx file")
    return None


def problem(path: Path) -> str | None:
    """What is wrong with the .onnx file ``path`` (empty, truncated, not a model), or None."""
    size = os.path.getsize(path)
    if size == 0:
        return "is empty (0 bytes)"
    seen_graph = False
    with open(path, "rb") as f:
        while f.tell() < size:
            key = _varint(f)
            if key is None:
                return f"is truncated (a field header runs past the end, {size} bytes)"
            number, wire = key >> 3, key & 7
            if wire == 0:
                if _varint(f) is None:
                    return f"is truncated (a number runs past the end, {size} bytes)"
                continue
            if wire == 2:
                length = _varint(f)
                if length is None:
                    return f"is truncated (a length runs past the end, {size} bytes)"
            elif wire in _FIXED:
                length = _FIXED[wire]
            else:
                return "is not an ONNX model (not a protobuf ModelProto)"
            if f.tell() + length > size:
                return f"is truncated (field {number} needs {f.tell() + length} bytes, the file has {size})"
            seen_graph = seen_graph or number == GRAPH_FIELD
            f.seek(length, os.SEEK_CUR)
    return None if seen_graph else "is not an ONNX model (it holds no graph)"
