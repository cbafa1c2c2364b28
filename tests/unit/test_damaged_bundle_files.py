"""A damaged bundle file is bad input like a missing one: exit 2 naming the file, before measuring.
A 0-byte or truncated stage .onnx (onnxfile/integrity.py), an empty or garbage tokenizer.json with --prompt."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import TINY_FLAT, TINY_PIPELINE
from winml_perf.onnxfile import integrity
from winml_perf.onnxfile.header import _fields


def _graph_end(data: bytes) -> int:
    """Offset where the ModelProto's graph field ends."""
    for number, _, value in _fields(io.BytesIO(data), len(data)):
        if number == integrity.GRAPH_FIELD:
            offset, length = value
            return offset + length
    raise AssertionError("no graph")


MODELS = sorted(TINY_FLAT.glob("*.onnx")) + sorted(TINY_PIPELINE.glob("*.onnx"))


def test_the_committed_models_are_whole():
    assert MODELS and all(integrity.problem(m) is None for m in MODELS)


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(MODELS), st.floats(min_value=0.0, max_value=1.0, exclude_max=True))
def test_a_model_cut_anywhere_before_its_graph_ends_is_named(tmp_path_factory, model, fraction):
    data = model.read_bytes()
    cut = int(fraction * _graph_end(data))
    path = tmp_path_factory.mktemp("cut") / model.name
    path.write_bytes(data[:cut])
    found = integrity.problem(path)
    assert found is not None and ("empty" in found or "truncated" in found or "no graph" in found)


def test_random_bytes_are_not_a_model(tmp_path):
    path = tmp_path / "x.onnx"
    path.write_bytes(bytes([0xFF]) * 64)
    assert integrity.problem(path) is not None


def _model_of(bundle: Path) -> Path:
    return next(bundle.glob("*.onnx"))


@pytest.mark.parametrize("damage", ["empty", "truncated"])
def test_perf_on_a_damaged_stage_model_is_exit_2_naming_it(winml, tiny_flat, bundle_copy, damage):
    bundle = bundle_copy(tiny_flat)
    model = _model_of(bundle)
    data = model.read_bytes()
    model.write_bytes(b"" if damage == "empty" else data[: len(data) // 2])
    done = winml("perf", bundle, "--no-store", "--iterations", "1", "--max-new-tokens", "2")
    assert done.returncode == 2, done.stderr
    assert model.name in done.stderr and ("empty" in done.stderr or "truncated" in done.stderr)
    assert "unexpected" not in done.stderr


@pytest.mark.parametrize("content", [b"", b"\x00garbage{", b"[1, 2]"])
def test_a_prompt_with_a_damaged_tokenizer_is_exit_2_naming_it(winml, tiny_flat, bundle_copy, content):
    bundle = bundle_copy(tiny_flat)
    (bundle / "tokenizer.json").write_bytes(content)
    done = winml("perf", bundle, "--no-store", "--iterations", "1", "--max-new-tokens", "2", "--prompt", "hello")
    assert done.returncode == 2, done.stderr
    assert "tokenizer.json" in done.stderr and "unexpected" not in done.stderr
