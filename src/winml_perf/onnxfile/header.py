"""The input shapes of an .onnx file, read straight from its protobuf without the onnx package.

Only ModelProto.graph (7) -> GraphProto.input (11) -> ValueInfoProto {name 1, type 2} ->
TypeProto.tensor_type (1) -> shape (2) -> dim (1) {dim_value 1, dim_param 2} is decoded; every other
field, inlined weights included, is skipped by seeking, so a large model costs a few reads.
"""

from __future__ import annotations

import io
from pathlib import Path

Dim = int | str | None  # a number, a symbolic name, or unknown


def _varint(stream) -> int | None:
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


def _fields(stream, end: int):
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
            stream.seek(start + length)
        elif wire in (1, 5):
            stream.seek(8 if wire == 1 else 4, io.SEEK_CUR)
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")


def _read(stream, span) -> bytes:
    stream.seek(span[0])
    return stream.read(span[1])


def _sub(data: bytes, number: int):
    """Every value of field ``number`` in a small message held in memory."""
    stream = io.BytesIO(data)
    for n, wire, value in _fields(stream, len(data)):
        if n == number:
            yield _read(stream, value) if wire == 2 else value


def _value_info(data: bytes) -> tuple[str, tuple[Dim, ...]]:
    name = next(_sub(data, 1), b"").decode("utf-8")
    dims: list[Dim] = []
    for type_proto in _sub(data, 2):
        for tensor in _sub(type_proto, 1):
            for shape in _sub(tensor, 2):
                for dim in _sub(shape, 1):
                    value = next(_sub(dim, 1), None)
                    param = next(_sub(dim, 2), None)
                    dims.append(int(value) if value is not None else param.decode("utf-8") if param else None)
    return name, tuple(dims)


def input_shapes(path: Path) -> dict[str, tuple[Dim, ...]]:
    """{input name: dims} of the model's graph inputs."""
    with open(path, "rb") as stream:
        size = stream.seek(0, io.SEEK_END)
        stream.seek(0)
        for number, wire, value in _fields(stream, size):
            if number == 7 and wire == 2:
                start, length = value
                stream.seek(start)
                shapes = {}
                for n, w, v in _fields(stream, start + length):
                    if n == 11 and w == 2:
                        here = stream.tell()
                        name, dims = _value_info(_read(stream, v))
                        stream.seek(here)
                        shapes[name] = dims
                return shapes
    return {}
