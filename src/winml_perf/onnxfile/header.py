"""The input shapes of an .onnx file, read straight from its protobuf without the onnx package.

Only ModelProto.graph (7) -> GraphProto.input (11) -> ValueInfoProto {name 1, type 2} ->
TypeProto.tensor_type (1) -> shape (2) -> dim (1) {dim_value 1, dim_param 2} is decoded; every other
field, inlined weights included, is skipped by seeking, so a large model costs a few reads.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol, cast

Dim = int | str | None  # a number, a symbolic name, or unknown
Span = tuple[int, int | None]  # (offset, length) of a length-delimited field; None: the file ended there
Value = int | Span | None  # a field's value: a varint, a span, or None (a fixed-size field is skipped)


class Stream(Protocol):
    """An open .onnx file or a message held in memory (io.BytesIO); ``read(None)`` reads to the end."""

    def read(self, size: int | None = -1, /) -> bytes: ...
    def seek(self, offset: int, whence: int = 0, /) -> int: ...
    def tell(self) -> int: ...


def _span(value: Value) -> Span:
    """``value`` of a field that onnx.proto3 makes length-delimited (a message, a string)."""
    return cast(Span, value)


def _bytes(value: bytes | int | None) -> bytes:
    """``value`` from ``_sub`` of a field that onnx.proto3 makes length-delimited."""
    return cast(bytes, value)


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
    """(field number, wire type, value) up to ``end``; a length-delimited value is (offset, length)."""
    while stream.tell() < end:
        key = _varint(stream)
        if key is None:
            return
        number, wire = key >> 3, key & 7
        if wire == 0:
            yield number, wire, _varint(stream)
        elif wire == 2:
            length = _varint(stream)
            start = stream.tell()
            yield number, wire, (start, length)
            stream.seek(start + cast(int, length))  # None (cut short) fails here: a TypeError
        elif wire in (1, 5):
            stream.seek(8 if wire == 1 else 4, io.SEEK_CUR)
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")


def _read(stream: Stream, span: Span) -> bytes:
    stream.seek(span[0])
    return stream.read(span[1])


def _sub(data: bytes, number: int) -> Iterator[bytes | int | None]:
    """Every value of field ``number`` in a small message held in memory."""
    stream = io.BytesIO(data)
    for n, wire, value in _fields(stream, len(data)):
        if n == number:
            yield _read(stream, _span(value)) if wire == 2 else cast("int | None", value)  # wire 0: a varint


def _value_info(data: bytes) -> tuple[str, tuple[Dim, ...]]:
    name = _bytes(next(_sub(data, 1), b"")).decode("utf-8")
    dims: list[Dim] = []
    for type_proto in _sub(data, 2):
        for tensor in _sub(_bytes(type_proto), 1):
            for shape in _sub(_bytes(tensor), 2):
                for dim in _sub(_bytes(shape), 1):
                    value = next(_sub(_bytes(dim), 1), None)
                    param = next(_sub(_bytes(dim), 2), None)
                    dims.append(int(value) if value is not None else _bytes(param).decode("utf-8") if param else None)
    return name, tuple(dims)


def input_shapes(path: Path) -> dict[str, tuple[Dim, ...]]:
    """{input name: dims} of the model's graph inputs."""
    with open(path, "rb") as stream:
        size = stream.seek(0, io.SEEK_END)
        stream.seek(0)
        for number, wire, value in _fields(stream, size):
            if number == 7 and wire == 2:
                start, length = _span(value)
                stream.seek(start)
                shapes: dict[str, tuple[Dim, ...]] = {}
                for n, w, v in _fields(stream, start + cast(int, length)):  # None: a TypeError, as in _fields
                    if n == 11 and w == 2:
                        here = stream.tell()
                        name, dims = _value_info(_read(stream, _span(v)))
                        stream.seek(here)
                        shapes[name] = dims
                return shapes
    return {}
