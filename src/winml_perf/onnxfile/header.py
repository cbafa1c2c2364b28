"""The input shapes of an .onnx file, read straight from its protobuf without the onnx package.

Only ModelProto.graph (7) -> GraphProto.input (11) -> ValueInfoProto {name 1, type 2} ->
TypeProto.tensor_type (1) -> shape (2) -> dim (1) {dim_value 1, dim_param 2} is decoded; every other
field, inlined weights included, is skipped by seeking, so a large model costs a few reads.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

from winml_perf.support.errors import BundleError

Dim = int | str | None  # a number, a symbolic name, or unknown
Span = tuple[int, int]  # (offset, length) of a length-delimited field
Value = int | Span  # a field's value: a varint or a span (a fixed-size field is skipped, never yielded)


class Stream(Protocol):
    """An open .onnx file or a message held in memory (io.BytesIO); ``read(None)`` reads to the end."""

    def read(self, size: int | None = -1, /) -> bytes: ...
    def seek(self, offset: int, whence: int = 0, /) -> int: ...
    def tell(self) -> int: ...


def _span(value: Value) -> Span:
    """``value`` of a field that onnx.proto3 makes length-delimited (a message, a string); ValueError
    when the file gave that field another wire type."""
    if not isinstance(value, tuple):
        raise ValueError("a field holds a number where onnx.proto3 has a message or a string")
    return value


def _bytes(value: bytes | int) -> bytes:
    """``value`` from ``_sub`` of a field that onnx.proto3 makes length-delimited (ValueError if not)."""
    if not isinstance(value, bytes):
        raise ValueError("a field holds a number where onnx.proto3 has a message or a string")
    return value


def _number(value: bytes | int) -> int:
    """``value`` from ``_sub`` of a field that onnx.proto3 makes a varint (ValueError if not)."""
    if not isinstance(value, int):
        raise ValueError("a field holds a message or a string where onnx.proto3 has a number")
    return value


def _varint(stream: Stream) -> int | None:
    shift = result = 0
    while True:
        byte = stream.read(1)
        if not byte:
            if shift:
                raise ValueError("truncated varint")
            return None
        result |= (byte[0] & 0x7F) << shift
        if not byte[0] & 0x80:
            return result
        shift += 7


def _fields(stream: Stream, end: int) -> Iterator[tuple[int, int, Value]]:
    """(field number, wire type, value) up to ``end``; a length-delimited value is (offset, length).
    ValueError when the data ends inside a field or a field runs past ``end`` (the file is cut short
    or damaged), or a wire type is none of protobuf's."""
    while (here := stream.tell()) < end:
        key = _varint(stream)
        if key is None:
            raise ValueError(f"truncated: the data ends at byte {here}, inside a message that ends at byte {end}")
        number, wire = key >> 3, key & 7
        if wire == 0:
            value = _varint(stream)
            if value is None:
                raise ValueError(f"truncated: field {number} at byte {here} has no value")
            yield number, wire, value
        elif wire == 2:
            length = _varint(stream)
            start = stream.tell()
            if length is None:
                raise ValueError(f"truncated: field {number} at byte {here} ends before its length")
            if start + length > end:
                raise ValueError(
                    f"truncated: field {number} at byte {here} runs past byte {end}, where its message ends"
                )
            yield number, wire, (start, length)
            stream.seek(start + length)
        elif wire in (1, 5):
            stream.seek(8 if wire == 1 else 4, io.SEEK_CUR)
        else:
            raise ValueError(f"unsupported protobuf wire type {wire} at byte {here}")


def _read(stream: Stream, span: Span) -> bytes:
    stream.seek(span[0])
    return stream.read(span[1])


def _sub(data: bytes, number: int) -> Iterator[bytes | int]:
    """Every value of field ``number`` in a small message held in memory: bytes, or a varint's int."""
    stream = io.BytesIO(data)
    for n, _, value in _fields(stream, len(data)):
        if n == number:
            yield _read(stream, value) if isinstance(value, tuple) else value  # wire 2: a span; wire 0: an int


def _value_info(data: bytes) -> tuple[str, tuple[Dim, ...]]:
    name = _bytes(next(_sub(data, 1), b"")).decode("utf-8")
    dims: list[Dim] = []
    for type_proto in _sub(data, 2):
        for tensor in _sub(_bytes(type_proto), 1):
            for shape in _sub(_bytes(tensor), 2):
                for dim in _sub(_bytes(shape), 1):
                    value = next(_sub(_bytes(dim), 1), None)
                    param = next(_sub(_bytes(dim), 2), None)
                    dims.append(
                        _number(value) if value is not None else _bytes(param).decode("utf-8") if param else None
                    )
    return name, tuple(dims)


def input_shapes(path: Path) -> dict[str, tuple[Dim, ...]]:
    """{input name: dims} of the model's graph inputs; BundleError naming the file when it cannot be
    read or is not a whole ONNX model."""
    try:
        return _input_shapes(path)
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        raise BundleError(
            f"cannot read the ONNX graph inputs of {path}: {exc}",
            remedy="check that the file is a complete .onnx model (re-export or re-copy it)",
        ) from exc


def _input_shapes(path: Path) -> dict[str, tuple[Dim, ...]]:
    with open(path, "rb") as stream:
        size = stream.seek(0, io.SEEK_END)
        stream.seek(0)
        for number, wire, value in _fields(stream, size):
            if number == 7 and wire == 2:
                start, length = _span(value)
                stream.seek(start)
                shapes: dict[str, tuple[Dim, ...]] = {}
                for n, w, v in _fields(stream, start + length):
                    if n == 11 and w == 2:
                        here = stream.tell()
                        name, dims = _value_info(_read(stream, _span(v)))
                        stream.seek(here)
                        shapes[name] = dims
                return shapes
    return {}
