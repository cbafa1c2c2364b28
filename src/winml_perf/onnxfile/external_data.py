"""The external-data files an .onnx model names, found without parsing the protobuf or reading weights."""

from __future__ import annotations

import mmap
from pathlib import Path

_LOCATION_TAG = b"\n\x08location\x12"  # StringStringEntryProto{key: "location", value: ...} in an ONNX file


def model_files(model: Path) -> list[str]:
    """The model file and the external-data files it names, relative to its folder."""
    return [model.name] + external_data_files(model)


def external_data_files(model: Path) -> list[str]:
    """Relative paths of the external-data files the model names (existing ones), sorted.

    Found by scanning the file for ONNX's ``location`` entries (no protobuf parse, no weights read
    into memory); a match that names no existing file is ignored.
    """
    found: set[str] = set()
    with open(model, "rb") as f:
        try:
            data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except ValueError:  # empty file
            return []
        with data:
            pos = data.find(_LOCATION_TAG)
            while pos >= 0:
                start = pos + len(_LOCATION_TAG)
                length, start = _varint(data, start)
                if 0 < length < 4096:
                    rel = bytes(data[start : start + length]).decode("utf-8", "replace")
                    if (model.parent / rel).is_file():
                        found.add(rel)
                pos = data.find(_LOCATION_TAG, start)
    return sorted(found)


def _varint(data: mmap.mmap, pos: int) -> tuple[int, int]:
    value, shift = 0, 0
    while pos < len(data) and shift < 35:
        byte = data[pos]
        value |= (byte & 0x7F) << shift
        pos += 1
        if not byte & 0x80:
            return value, pos
        shift += 7
    return -1, pos
