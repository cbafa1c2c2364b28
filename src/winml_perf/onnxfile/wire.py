"""Read the structure of an .onnx file (nodes, initializers' shapes and types, graph inputs and
outputs) straight from its protobuf wire format, without the ``onnx`` package and without reading
any tensor's data.

Why not ``onnx``: it is not a dependency of the base install (only of the test and synth extras), and
the roofline runs on every ``winml perf``. The wire format is stable and the fields used here are few
(field numbers from onnx.proto3). The file is memory-mapped and tensor payloads (``raw_data``) are
skipped by their length, so their pages are never read. Subgraphs (If/Loop bodies) are not walked.
"""

from __future__ import annotations

import mmap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from winml_perf.support.errors import BundleError

# onnx.proto3 field numbers
_MODEL_GRAPH = 7
_GRAPH_NODE, _GRAPH_INITIALIZER, _GRAPH_INPUT, _GRAPH_OUTPUT = 1, 5, 11, 12
_NODE_INPUT, _NODE_OUTPUT, _NODE_OP_TYPE, _NODE_ATTRIBUTE, _NODE_DOMAIN = 1, 2, 4, 5, 7
_ATTR_NAME, _ATTR_INT = 1, 3
_TENSOR_DIMS, _TENSOR_DATA_TYPE, _TENSOR_NAME, _TENSOR_DATA_LOCATION = 1, 2, 8, 14
_VALUE_NAME, _VALUE_TYPE, _TYPE_TENSOR, _TENSOR_ELEM_TYPE, _TENSOR_SHAPE, _SHAPE_DIM = 1, 2, 1, 1, 2, 1
_DIM_VALUE, _DIM_PARAM = 1, 2

Span = tuple[int, int]  # (start, end) of a length-delimited field
Value = int | Span | None  # a field's value: a varint, a span, or None (a fixed-size field, skipped)


def _span(value: Value) -> Span:
    """``value`` of a field that onnx.proto3 makes length-delimited (a message, a string); ValueError
    when the file gave that field another wire type."""
    if not isinstance(value, tuple):
        raise ValueError(f"a field holds {_kind(value)} where onnx.proto3 has a message or a string")
    return value


def _int(value: Value) -> int:
    """``value`` of a field that onnx.proto3 makes a varint (ValueError when it is not one)."""
    if not isinstance(value, int):
        raise ValueError(f"a field holds {_kind(value)} where onnx.proto3 has a number")
    return value


def _kind(value: Value) -> str:
    return "a number" if isinstance(value, int) else "a message or a string" if value else "a fixed-size value"


#: Bits per element of each TensorProto.DataType (STRING, 8, has no fixed size and is left out).
DTYPE_BITS = {
    1: 32,
    2: 8,
    3: 8,
    4: 16,
    5: 16,
    6: 32,
    7: 64,
    9: 8,
    10: 16,
    11: 64,
    12: 32,
    13: 64,
    14: 64,
    15: 128,
    16: 16,
    17: 8,
    18: 8,
    19: 8,
    20: 8,
    21: 4,
    22: 4,
    23: 4,
    24: 8,
    25: 2,
    26: 2,
}


@dataclass(frozen=True)
class Initializer:
    name: str
    dims: tuple[int, ...]
    data_type: int
    external: bool  # data in a side file (.onnx.data); its size still comes from dims x dtype

    @property
    def nbytes(self) -> int:
        """Bytes of the tensor's data: elements x bits per element, rounded up to a whole byte."""
        count = 1
        for d in self.dims:
            count *= d
        bits = DTYPE_BITS.get(self.data_type)
        if bits is None:
            raise BundleError(
                f"initializer {self.name!r} has data type {self.data_type} of no fixed size",
                remedy="the roofline cannot size string tensors; report this model",
            )
        return (count * bits + 7) // 8


@dataclass(frozen=True)
class Node:
    op_type: str
    domain: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    int_attributes: tuple[tuple[str, int], ...] = ()

    def attribute(self, name: str, default: int) -> int:
        return dict(self.int_attributes).get(name, default)


@dataclass(frozen=True)
class ValueInfo:
    name: str
    elem_type: int | None
    dims: tuple[int | str | None, ...]  # int: fixed, str: symbolic, None: unknown


@dataclass(frozen=True)
class GraphInfo:
    nodes: tuple[Node, ...]
    initializers: tuple[Initializer, ...]
    inputs: tuple[ValueInfo, ...]
    outputs: tuple[ValueInfo, ...]


def _varint(buf: mmap.mmap, pos: int) -> tuple[int, int]:
    result = shift = 0
    try:
        while True:
            b = buf[pos]
            pos += 1
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result, pos
            shift += 7
    except IndexError:
        raise ValueError(f"truncated: a number runs past the end of the file ({len(buf)} bytes)") from None


def _fields(buf: mmap.mmap, start: int, end: int) -> Iterator[tuple[int, int, Value]]:
    """(field number, wire type, value) of one message: value is an int, or (start, end) of a length-delimited field.
    ValueError when a field runs past ``end`` (the file is cut short or damaged) or a wire type is none of protobuf's."""
    pos = start
    value: int | tuple[int, int] | None
    while pos < end:
        here = pos
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire == 2:
            length, pos = _varint(buf, pos)
            value, pos = (pos, pos + length), pos + length
        elif wire == 1:
            value, pos = None, pos + 8
        elif wire == 5:
            value, pos = None, pos + 4
        else:
            raise ValueError(f"unsupported protobuf wire type {wire} at byte {pos}")
        if pos > end:
            raise ValueError(f"truncated: field {number} at byte {here} runs past byte {end}, where its message ends")
        yield number, wire, value


def _text(buf: mmap.mmap, span: tuple[int, int]) -> str:
    return bytes(buf[span[0] : span[1]]).decode("utf-8")


def _tensor(buf: mmap.mmap, start: int, end: int) -> Initializer:
    name, dims, dtype, external = "", [], 0, False
    for number, wire, value in _fields(buf, start, end):
        if number == _TENSOR_DIMS and wire == 0:
            dims.append(_int(value))
        elif number == _TENSOR_DIMS and wire == 2:  # packed repeated int64
            span = _span(value)
            pos = span[0]
            while pos < span[1]:
                d, pos = _varint(buf, pos)
                dims.append(d)
        elif number == _TENSOR_DATA_TYPE:
            dtype = _int(value)
        elif number == _TENSOR_NAME:
            name = _text(buf, _span(value))
        elif number == _TENSOR_DATA_LOCATION:
            external = value == 1
    return Initializer(name, tuple(dims), dtype, external)


def _node(buf: mmap.mmap, start: int, end: int) -> Node:
    op, domain, inputs, outputs, attrs = "", "", [], [], []
    for number, _, value in _fields(buf, start, end):
        if number == _NODE_ATTRIBUTE:
            attrs += _int_attribute(buf, _span(value))
        elif number == _NODE_INPUT:
            inputs.append(_text(buf, _span(value)))
        elif number == _NODE_OUTPUT:
            outputs.append(_text(buf, _span(value)))
        elif number == _NODE_OP_TYPE:
            op = _text(buf, _span(value))
        elif number == _NODE_DOMAIN:
            domain = _text(buf, _span(value))
    return Node(op, domain, tuple(inputs), tuple(outputs), tuple(attrs))


def _int_attribute(buf: mmap.mmap, span: tuple[int, int]) -> list[tuple[str, int]]:
    """[(name, value)] for an INT attribute (two's complement int64), [] for any other kind."""
    name, value = "", None
    for n, wire, v in _fields(buf, *span):
        if n == _ATTR_NAME:
            name = _text(buf, _span(v))
        elif n == _ATTR_INT and wire == 0:
            number = _int(v)
            value = number - (1 << 64) if number >= 1 << 63 else number
    return [] if value is None else [(name, value)]


def _submessage(buf: mmap.mmap, span: tuple[int, int], number: int) -> tuple[int, int] | None:
    for n, wire, value in _fields(buf, *span):
        if n == number and wire == 2:
            return _span(value)
    return None


def _value_info(buf: mmap.mmap, start: int, end: int) -> ValueInfo:
    name, elem, dims = "", None, []
    for number, _, value in _fields(buf, start, end):
        if number == _VALUE_NAME:
            name = _text(buf, _span(value))
        elif number == _VALUE_TYPE:
            tensor = _submessage(buf, _span(value), _TYPE_TENSOR)
            if tensor is None:
                continue
            for n, _, v in _fields(buf, *tensor):
                if n == _TENSOR_ELEM_TYPE:
                    elem = _int(v)
                elif n == _TENSOR_SHAPE:
                    for dn, _, dv in _fields(buf, *_span(v)):
                        if dn == _SHAPE_DIM:
                            dims.append(_dim(buf, _span(dv)))
    return ValueInfo(name, elem, tuple(dims))


def _dim(buf: mmap.mmap, span: tuple[int, int]) -> int | str | None:
    for n, _, v in _fields(buf, *span):
        if n == _DIM_VALUE:
            return _int(v)
        if n == _DIM_PARAM:
            return _text(buf, _span(v))
    return None


def read_graph(path: str | Path) -> GraphInfo:
    """The main graph of an .onnx file: its nodes, initializers (no data), inputs and outputs."""
    path = Path(path)
    try:
        with path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
            graph = _submessage(buf, (0, len(buf)), _MODEL_GRAPH)
            if graph is None:
                raise ValueError("no graph in the model")
            nodes, inits, inputs, outputs = [], [], [], []
            for number, wire, value in _fields(buf, *graph):
                if wire != 2:
                    continue
                if number == _GRAPH_NODE:
                    nodes.append(_node(buf, *_span(value)))
                elif number == _GRAPH_INITIALIZER:
                    inits.append(_tensor(buf, *_span(value)))
                elif number == _GRAPH_INPUT:
                    inputs.append(_value_info(buf, *_span(value)))
                elif number == _GRAPH_OUTPUT:
                    outputs.append(_value_info(buf, *_span(value)))
    except (OSError, ValueError, IndexError, UnicodeDecodeError) as exc:
        raise BundleError(
            f"cannot read the ONNX graph {path}: {exc}",
            remedy="check that the file is a complete .onnx model (re-export or re-copy it)",
        ) from exc
    return GraphInfo(tuple(nodes), tuple(inits), tuple(inputs), tuple(outputs))
