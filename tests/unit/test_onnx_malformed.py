"""A model whose top-level framing is whole but whose graph is malformed inside (a field cut after its
key or after its length, a field of another wire type than onnx.proto3 gives it): both protobuf
readers (onnxfile/header.py, onnxfile/wire.py) raise BundleError naming the file, never a TypeError,
an AttributeError or a silently wrong answer; `winml perf` says so with exit 2 before measuring."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from tests.conftest import TINY_FLAT
from winml_perf.onnxfile import integrity
from winml_perf.onnxfile.header import _fields, input_shapes
from winml_perf.onnxfile.wire import read_graph
from winml_perf.support.errors import BundleError


def _key(number: int, wire: int) -> bytes:
    return bytes([number << 3 | wire])


def _varint(x: int) -> bytes:
    out = b""
    while True:
        low, x = x & 0x7F, x >> 7
        if not x:
            return out + bytes([low])
        out += bytes([low | 0x80])


def _ld(number: int, payload: bytes) -> bytes:
    return _key(number, 2) + _varint(len(payload)) + payload


def _model(graph: bytes) -> bytes:
    """A ModelProto holding only ``graph`` (field 7): whole as far as integrity.problem can tell."""
    return _ld(7, graph)


def _input(name: bytes = b"x", dims: bytes = b"") -> bytes:
    """A graph input (field 11): ValueInfoProto {name, type: TypeProto {tensor_type {elem_type, shape}}}."""
    shape = _ld(2, dims) if dims else b""
    return _ld(11, _ld(1, name) + _ld(2, _ld(1, _key(1, 0) + _varint(1) + shape)))


MALFORMED = {
    # the graph ends right after an input's key: its length prefix is missing
    "no length": _key(11, 2),
    # an input's length runs past the end of the graph (and of the file)
    "cut after its length": _key(11, 2) + _varint(40) + b"ab",
    # an input's name (a string in onnx.proto3) given as a varint
    "name as a number": _ld(11, _key(1, 0) + _varint(3)),
    # a dim_value (a varint in onnx.proto3) given as a string
    "dim as a string": _input(dims=_ld(1, _ld(1, b"12"))),
}


def _write(tmp_path: Path, data: bytes) -> Path:
    path = tmp_path / "model.onnx"
    path.write_bytes(data)
    assert integrity.problem(path) is None  # the top-level framing is whole: only the graph's insides are wrong
    return path


@pytest.mark.parametrize("case", MALFORMED)
def test_input_shapes_names_the_file_of_a_malformed_graph(tmp_path, case):
    path = _write(tmp_path, _model(MALFORMED[case]))
    with pytest.raises(BundleError, match="cannot read the ONNX graph inputs of .*model.onnx") as raised:
        input_shapes(path)
    assert raised.value.remedy and "complete .onnx model" in raised.value.remedy


@pytest.mark.parametrize("case", ["no length", "cut after its length"])
def test_input_shapes_says_a_cut_field_is_truncated(tmp_path, case):
    path = _write(tmp_path, _model(MALFORMED[case]))
    with pytest.raises(BundleError, match="truncated: field 11 at byte 2"):
        input_shapes(path)


def test_input_shapes_of_good_crafted_inputs(tmp_path):
    dims = _ld(1, _key(1, 0) + _varint(7)) + _ld(1, _ld(2, b"seq"))
    path = _write(tmp_path, _model(_input(b"x", dims)))
    assert input_shapes(path) == {"x": (7, "seq")}


#: Graph contents of which each field has another wire type than onnx.proto3 gives it.
WRONG_WIRE = {
    "node input as a varint": _ld(1, _key(1, 0) + _varint(3)),
    "node input as a fixed64": _ld(1, _key(1, 1) + bytes(8)),
    "input type as a fixed32": _ld(11, _key(2, 5) + bytes(4)),
    "initializer name as a varint": _ld(5, _key(8, 0) + _varint(3)),
    "initializer data type as a string": _ld(5, _ld(2, b"ab")),
    "dim value as a string": _input(dims=_ld(1, _ld(1, b"12"))),
}


@pytest.mark.parametrize("case", WRONG_WIRE)
def test_read_graph_names_the_file_of_a_field_of_another_wire_type(tmp_path, case):
    path = _write(tmp_path, _model(WRONG_WIRE[case]))
    with pytest.raises(BundleError, match=r"cannot read the ONNX graph .*model.onnx: a field holds") as raised:
        read_graph(path)
    assert raised.value.remedy and "complete .onnx model" in raised.value.remedy


def test_read_graph_says_a_field_cut_after_its_length_is_truncated(tmp_path):
    path = _write(tmp_path, _model(MALFORMED["cut after its length"]))
    with pytest.raises(BundleError, match="truncated: field 11 at byte 2 runs past byte 6"):
        read_graph(path)


def test_read_graph_of_good_crafted_fields(tmp_path):
    node = _ld(1, _ld(1, b"a") + _ld(2, b"b") + _ld(4, b"Relu"))
    init = _ld(5, _key(1, 0) + _varint(3) + _key(2, 0) + _varint(1) + _ld(8, b"w"))
    graph = read_graph(_write(tmp_path, _model(node + init + _input(dims=_ld(1, _key(1, 0) + _varint(7))))))
    assert [(n.op_type, n.inputs, n.outputs) for n in graph.nodes] == [("Relu", ("a",), ("b",))]
    assert [(i.name, i.dims, i.data_type) for i in graph.initializers] == [("w", (3,), 1)]
    assert [(v.name, v.dims) for v in graph.inputs] == [("x", (7,))]


def _with_graph_cut_after_an_input_key(model: bytes) -> bytes:
    """``model`` with its graph moved last and ending in an input field's key, its length missing:
    the top-level framing stays whole (integrity passes) and the file ends where the length would be."""
    pos, fields, graph = 0, [], None
    stream = io.BytesIO(model)
    for number, _, value in _fields(stream, len(model)):
        end = stream.tell() if not isinstance(value, tuple) else value[0] + value[1]
        if number == integrity.GRAPH_FIELD:
            graph = model[value[0] : end]
        else:
            fields.append(model[pos:end])
        pos = end
    assert graph is not None
    return b"".join(fields) + _ld(integrity.GRAPH_FIELD, graph + _key(11, 2))


def test_perf_on_a_model_malformed_inside_its_graph_is_exit_2_naming_it(winml, tiny_flat, bundle_copy, tmp_path):
    bundle = bundle_copy(tiny_flat)
    model = next(bundle.glob("*.onnx"))
    model.write_bytes(_with_graph_cut_after_an_input_key(model.read_bytes()))
    assert integrity.problem(model) is None
    store = tmp_path / "store.db"
    done = winml("perf", bundle, "--store", store, "--iterations", "1", "--max-new-tokens", "2")
    assert done.returncode == 2, done.stderr
    assert str(model) in done.stderr
    assert "complete .onnx model" in done.stderr and "unexpected" not in done.stderr
    assert not store.exists() and done.stdout == ""  # nothing measured, nothing stored


def test_the_committed_model_still_reads():
    model = next(TINY_FLAT.glob("*.onnx"))
    assert input_shapes(model) and read_graph(model).nodes
