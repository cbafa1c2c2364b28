"""onnx_inputs: --shape / --input parsing, shape planning rules, .npy checks, generated data."""

from __future__ import annotations

import numpy as np
import pytest

from winml_perf.session.onnx_inputs import (
    TensorInfo,
    materialize,
    parse_inputs,
    parse_shapes,
    plan_inputs,
)
from winml_perf.support.errors import EXIT_USAGE, UsageError

MLP = [TensorInfo("x", "tensor(float)", (1, 8))]
DYN = [TensorInfo("x", "tensor(float)", ("batch", 8))]
MULTI = [
    TensorInfo("features", "tensor(float)", ("batch", "seq", 4)),
    TensorInfo("scale", "tensor(float)", (1,)),
    TensorInfo("ids", "tensor(int64)", ("batch", "seq")),
]


def shapes_of(planned):
    return {p.name: p.shape for p in planned}


# -- parsing ----------------------------------------------------------------------------------------
def test_parse_shapes_accepts_x_and_comma_and_zero():
    assert parse_shapes(["x=1x3x224x224", "past=1,0,64", "seq=128"]) == {
        "x": (1, 3, 224, 224),
        "past": (1, 0, 64),
        "seq": (128,),
    }
    assert parse_shapes(None) == {}


def test_parse_shapes_keeps_names_with_colons_and_equals():
    assert parse_shapes(["input:0=2x8", "a=b=3"]) == {"input:0": (2, 8), "a=b": (3,)}


@pytest.mark.parametrize(
    "bad, words",
    [
        ("x", "NAME=VALUE"),
        ("=1x2", "NAME=VALUE"),
        ("x=", "NAME=VALUE"),
        ("x=1xAx3", "whole numbers"),
        ("x=1x-2", "negative"),
    ],
)
def test_parse_shapes_rejects_malformed(bad, words):
    with pytest.raises(UsageError, match=words) as info:
        parse_shapes([bad])
    assert info.value.exit_code == EXIT_USAGE
    assert "--shape" in str(info.value)


def test_parse_shapes_rejects_duplicates():
    with pytest.raises(UsageError, match="twice"):
        parse_shapes(["x=1x8", "x=2x8"])


def test_parse_inputs():
    assert parse_inputs(["x=data/x.npy", "ids=/abs/ids.npy"]) == {"x": "data/x.npy", "ids": "/abs/ids.npy"}
    with pytest.raises(UsageError, match="--input"):
        parse_inputs(["x.npy"])
    with pytest.raises(UsageError, match="twice"):
        parse_inputs(["x=a.npy", "x=b.npy"])


# -- planning: shapes ---------------------------------------------------------------------------------
def test_fixed_shape_needs_nothing():
    planned = plan_inputs(MLP)
    assert shapes_of(planned) == {"x": (1, 8)}
    assert planned[0].source == "generated" and planned[0].filled == {}


def test_dynamic_batch_defaults_to_one_and_says_so():
    (p,) = plan_inputs(DYN)
    assert p.shape == (1, 8)
    assert p.filled == {"axis 0 (batch)": "batch-like default 1"}


def test_batch_named_dim_off_axis_zero_defaults_to_one():
    infos = [TensorInfo("x", "tensor(float)", (8, "batch_size"))]
    assert plan_inputs(infos)[0].shape == (8, 1)


def test_whole_input_shape_flag():
    assert plan_inputs(DYN, {"x": (4, 8)})[0].shape == (4, 8)


def test_dimension_flag_sets_every_input_using_it():
    assert shapes_of(plan_inputs(MULTI, {"seq": (5,)})) == {"features": (1, 5, 4), "scale": (1,), "ids": (1, 5)}


def test_input_shape_propagates_its_symbolic_dims_to_other_inputs():
    planned = plan_inputs(MULTI, {"features": (2, 7, 4)})
    assert shapes_of(planned) == {"features": (2, 7, 4), "scale": (1,), "ids": (2, 7)}
    assert planned[2].filled["axis 1 (seq)"] == "--shape features"


def test_unset_non_batch_dimension_is_an_error_naming_input_axis_and_dim():
    with pytest.raises(UsageError) as info:
        plan_inputs(MULTI)
    text = str(info.value)
    assert "'features'" in text and "seq" in text and "axis 1" in text
    assert "--shape seq=N" in text and "--shape features=Nx" in text
    assert info.value.exit_code == EXIT_USAGE


def test_several_unset_dimensions_are_named_together_so_the_remedy_runs():
    # a decoder: input_ids [batch, sequence_length], attention_mask [batch, total_sequence_length], a past key
    infos = [
        TensorInfo("input_ids", "tensor(int64)", ("batch_size", "sequence_length")),
        TensorInfo("attention_mask", "tensor(int64)", ("batch_size", "total_sequence_length")),
        TensorInfo("past.0.key", "tensor(float)", ("batch_size", 3, "past_sequence_length", 64)),
    ]
    with pytest.raises(UsageError) as info:
        plan_inputs(infos, {"total_sequence_length": (40,)})
    assert str(info.value).endswith(
        "pass --shape sequence_length=N --shape past_sequence_length=N (every dimension that nothing sets)"
    )
    following = {"total_sequence_length": (40,), "sequence_length": (8,), "past_sequence_length": (32,)}
    assert shapes_of(plan_inputs(infos, following))["past.0.key"] == (1, 3, 32, 64)


def test_unnamed_dynamic_dim_needs_the_whole_shape():
    infos = [TensorInfo("x", "tensor(float)", (1, None))]
    with pytest.raises(UsageError, match=r"\(unnamed\) at axis 1.*--shape x=1xN"):
        plan_inputs(infos)
    assert plan_inputs(infos, {"x": (1, 9)})[0].shape == (1, 9)


def test_shape_rank_mismatch():
    with pytest.raises(UsageError, match=r"--shape x: .*rank 3.*'x' has rank 2"):
        plan_inputs(DYN, {"x": (1, 8, 1)})


def test_shape_fixed_dim_mismatch():
    with pytest.raises(UsageError, match=r"has 9 at axis 1.*fixes it to 8") as info:
        plan_inputs(DYN, {"x": (1, 9)})
    assert "use 8 at axis 1" in str(info.value)


def test_unknown_shape_name_lists_inputs_and_dimensions():
    with pytest.raises(UsageError, match="no input or dimension named 'nope'") as info:
        plan_inputs(MULTI, {"nope": (3,)})
    assert "features" in str(info.value) and "seq" in str(info.value)


def test_dimension_flag_takes_one_number():
    with pytest.raises(UsageError, match="takes one number"):
        plan_inputs(MULTI, {"seq": (2, 3)})


def test_conflicting_values_for_one_dimension():
    with pytest.raises(UsageError, match="dimension 'seq' gets 7 .* but 3"):
        plan_inputs(MULTI, {"features": (1, 7, 4), "seq": (3,)})
    with pytest.raises(UsageError, match="dimension 'seq'"):
        plan_inputs(MULTI, {"features": (1, 7, 4), "ids": (1, 6)})


def test_type_numpy_cannot_generate_needs_input():
    infos = [TensorInfo("x", "tensor(bfloat16)", (1, 2))]
    with pytest.raises(UsageError, match=r"tensor\(bfloat16\).*--input x=file.npy"):
        plan_inputs(infos)


# -- planning: .npy files -----------------------------------------------------------------------------
def test_npy_sets_shape_and_dims(tmp_path):
    f = tmp_path / "features.npy"
    np.save(f, np.zeros((3, 6, 4), np.float32))
    planned = plan_inputs(MULTI, files={"features": str(f)})
    assert shapes_of(planned) == {"features": (3, 6, 4), "scale": (1,), "ids": (3, 6)}
    assert planned[0].source == "file" and planned[0].file == str(f)


def test_npy_unknown_input_name(tmp_path):
    f = tmp_path / "a.npy"
    np.save(f, np.zeros((1, 8), np.float32))
    with pytest.raises(UsageError, match="model has no input 'y'") as info:
        plan_inputs(MLP, files={"y": str(f)})
    assert "x [1, 8]" in str(info.value)


def test_npy_wrong_dtype_names_file_and_types(tmp_path):
    f = tmp_path / "x64.npy"
    np.save(f, np.zeros((1, 8), np.float64))
    with pytest.raises(UsageError) as info:
        plan_inputs(MLP, files={"x": str(f)})
    text = str(info.value)
    assert "x64.npy" in text and "float64" in text and "float32" in text


def test_npy_wrong_shape(tmp_path):
    f = tmp_path / "x.npy"
    np.save(f, np.zeros((1, 9), np.float32))
    with pytest.raises(UsageError, match=r"x.npy.*has 9 at axis 1.*fixes it to 8"):
        plan_inputs(MLP, files={"x": str(f)})
    np.save(f, np.zeros((8,), np.float32))
    with pytest.raises(UsageError, match="rank 1"):
        plan_inputs(MLP, files={"x": str(f)})


def test_npy_missing_or_not_npy(tmp_path):
    with pytest.raises(UsageError, match="file not found"):
        plan_inputs(MLP, files={"x": str(tmp_path / "missing.npy")})
    text_file = tmp_path / "x.npy"
    text_file.write_text("not numpy")
    with pytest.raises(UsageError, match="not a readable .npy"):
        plan_inputs(MLP, files={"x": str(text_file)})
    npz = tmp_path / "x.npz"
    np.savez(npz, a=np.zeros((1, 8), np.float32))
    with pytest.raises(UsageError, match="several arrays"):
        plan_inputs(MLP, files={"x": str(npz)})


def test_shape_flag_disagreeing_with_npy(tmp_path):
    f = tmp_path / "x.npy"
    np.save(f, np.zeros((2, 8), np.float32))
    with pytest.raises(UsageError, match="disagrees with --input x"):
        plan_inputs(DYN, {"x": (3, 8)}, {"x": str(f)})
    assert plan_inputs(DYN, {"x": (2, 8)}, {"x": str(f)})[0].shape == (2, 8)


# -- data -----------------------------------------------------------------------------------------------
def test_materialize_is_deterministic_and_typed(tmp_path):
    planned = plan_inputs(MULTI, {"seq": (3,)})
    a, b, c = materialize(planned, seed=1), materialize(planned, seed=1), materialize(planned, seed=2)
    assert a["features"].dtype == np.float32 and a["features"].shape == (1, 3, 4)
    assert np.array_equal(a["features"], b["features"]) and not np.array_equal(a["features"], c["features"])
    assert np.all(np.abs(a["features"]) <= 1.0)
    assert a["ids"].dtype == np.int64 and np.all(a["ids"] == 1)


def test_materialize_loads_file_data_exactly(tmp_path):
    data = np.arange(8, dtype=np.float32).reshape(1, 8)
    f = tmp_path / "x.npy"
    np.save(f, data)
    feeds = materialize(plan_inputs(MLP, files={"x": str(f)}))
    assert np.array_equal(feeds["x"], data) and feeds["x"].flags["C_CONTIGUOUS"]
