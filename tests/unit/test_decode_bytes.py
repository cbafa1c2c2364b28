"""Bytes a decode step reads, from hand-made ONNX graphs whose byte counts are known by construction,
and the wire-format reader checked against the onnx package on the committed bundles."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.conftest import BUNDLES
from winml_perf.bundle import decode_bytes as D
from winml_perf.onnxfile.wire import Initializer, read_graph
from winml_perf.support.errors import BundleError

HIDDEN, VOCAB, N_OUT, BLOCKS, BLOB = 8, 100, 64, 2, 16


def _init(name, array):
    return numpy_helper.from_array(np.asarray(array), name)


def _decoder_graph(kv_heads=2, head_size=4) -> onnx.ModelProto:
    """input_ids -> Gather(embed) -> SimplifiedLayerNorm -> MatMulNBits -> MatMul(lm_head) -> Cast -> logits,
    with two fp16 KV inputs and one initializer nothing reads."""
    inits = [
        _init("embed", np.zeros((VOCAB, HIDDEN), np.float16)),  # 1600 B, 16 B a row
        _init("norm.weight", np.ones(HIDDEN, np.float32)),  # 32 B
        _init("q.weight_Q4", np.zeros((N_OUT, BLOCKS, BLOB), np.uint8)),  # 2048 B
        _init("q.scales", np.ones((N_OUT, BLOCKS), np.float32)),  # 512 B
        _init("q.zero_points", np.zeros((N_OUT, 1), np.uint8)),  # 64 B
        _init("lm_head.weight", np.zeros((N_OUT, VOCAB), np.float32)),  # 25600 B
        _init("unused", np.zeros(1000, np.float32)),  # not read
    ]
    nodes = [
        helper.make_node("Gather", ["embed", "input_ids"], ["h0"]),
        helper.make_node("SimplifiedLayerNormalization", ["h0", "norm.weight"], ["h1"], epsilon=1e-6),
        helper.make_node(
            "MatMulNBits",
            ["h1", "q.weight_Q4", "q.scales", "q.zero_points"],
            ["h2"],
            domain="com.microsoft",
            K=HIDDEN,
            N=N_OUT,
            bits=4,
            block_size=32,
        ),
        helper.make_node("Shape", ["unused"], ["unused_shape"]),  # reads no data
        helper.make_node("MatMul", ["h2", "lm_head.weight"], ["logits16"]),
        helper.make_node("Cast", ["logits16"], ["logits"], to=TensorProto.FLOAT),
    ]
    kv = [
        helper.make_tensor_value_info(
            f"past_key_values.0.{kind}", TensorProto.FLOAT16, ["batch", kv_heads, "past", head_size]
        )
        for kind in ("key", "value")
    ]
    inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"]), *kv]
    outputs = [
        helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", "seq", VOCAB]),
        helper.make_tensor_value_info("unused_shape", TensorProto.INT64, [1]),
    ]
    graph = helper.make_graph(nodes, "decoder", inputs, outputs, initializer=inits)
    return helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    )


def _flat_bundle(tmp_path, model: onnx.ModelProto, external: bool = False, decoder_extra: dict | None = None):
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "model.onnx"
    if external:
        onnx.save(
            model,
            str(path),
            save_as_external_data=True,
            all_tensors_to_one_file=True,
            location="model.onnx.data",
            size_threshold=0,
        )
    else:
        onnx.save(model, str(path))
    decoder = {"filename": "model.onnx", "head_size": 4, "num_key_value_heads": 2, **(decoder_extra or {})}
    (tmp_path / "genai_config.json").write_text(json.dumps({"model": {"type": "qwen2", "decoder": decoder}}))
    return tmp_path


@pytest.mark.parametrize("external", [False, True])
def test_byte_counts_of_a_hand_made_decoder(tmp_path, external):
    bundle = _flat_bundle(tmp_path, _decoder_graph(), external=external)
    db = D.decode_bytes(bundle, prompt_tokens=10, max_new_tokens=5)
    (stage,) = db.stages
    assert stage.weights_bytes == 32 + 2048 + 512 + 64  # norm + packed int4 weights + scales + zero points
    assert stage.lm_head_bytes == N_OUT * VOCAB * 4  # the matmul behind the Cast that makes the logits
    assert stage.gathered_row_bytes == HIDDEN * 2  # one fp16 row of the embedding table, not the table
    assert db.mean_past_tokens == 10 + 1.5  # decode steps attend to 10, 11, 12, 13 cached positions
    assert stage.kv_cache_bytes == 2 * 2 * 4 * 2 * 11.5  # key + value x heads x head size x fp16 x mean length
    assert db.total_bytes == 32 + 2048 + 512 + 64 + 25600 + 16 + 368
    if external:  # the .data file holds the unread tensor too: sizes come from the tensors, not the file
        assert (tmp_path / "model.onnx.data").stat().st_size > db.total_bytes


def test_a_table_read_whole_elsewhere_is_not_a_row_and_int4_rounds_up(tmp_path):
    model = _decoder_graph()
    tied = helper.make_node("MatMul", ["h2", "embed_t"], ["tied_out"])
    model.graph.node.append(helper.make_node("Transpose", ["embed"], ["embed_t"]))  # the same table read whole
    model.graph.node.append(tied)
    model.graph.output.append(helper.make_tensor_value_info("tied_out", TensorProto.FLOAT16, None))
    db = D.decode_bytes(_flat_bundle(tmp_path, model), 4, 2)
    assert (
        db.stages[0].gathered_row_bytes == 0 and db.stages[0].weights_bytes == 32 + 2048 + 512 + 64 + VOCAB * HIDDEN * 2
    )
    assert Initializer("w", (3, 5), TensorProto.INT4, False).nbytes == 8  # 15 nibbles -> 8 bytes
    assert Initializer("w", (), TensorProto.FLOAT, False).nbytes == 4  # a scalar


def test_kv_dims_from_the_graph_win_over_config_and_unknown_dims_fail(tmp_path):
    model = _decoder_graph(kv_heads=3, head_size=8)  # fixed in the graph
    db = D.decode_bytes(_flat_bundle(tmp_path / "a", model, decoder_extra={"num_key_value_heads": 99}), 2, 2)
    assert db.stages[0].kv_cache_bytes == 2 * 3 * 8 * 2 * 2
    symbolic = _decoder_graph(kv_heads="heads", head_size="dim")
    with pytest.raises(BundleError, match="past_key_values.0.key"):
        D.decode_bytes(
            _flat_bundle(tmp_path / "b", symbolic, decoder_extra={"num_key_value_heads": None, "head_size": None}), 2, 2
        )
    assert D.decode_bytes(_flat_bundle(tmp_path / "c", symbolic), 2, 2).stages[0].kv_cache_bytes == 2 * 2 * 4 * 2 * 2


def test_no_decode_step_and_compiled_stages_are_refused(tmp_path):
    with pytest.raises(BundleError, match="no decode step"):
        D.decode_bytes(_flat_bundle(tmp_path / "a", _decoder_graph()), 8, 1)
    node = helper.make_node("EPContext", ["input_ids"], ["logits"], domain="com.microsoft")
    graph = helper.make_graph(
        [node],
        "ctx",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [1, 1])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 1, VOCAB])],
    )
    with pytest.raises(BundleError, match="EPContext"):
        D.decode_bytes(_flat_bundle(tmp_path / "b", helper.make_model(graph)), 8, 4)


def test_pipeline_counts_token_generation_stages_only(tmp_path):
    big = np.zeros((HIDDEN, 1000), np.float32)
    for name, array in (("ctx.onnx", big), ("iter.onnx", big[:, :10]), ("head.onnx", big[:, :VOCAB])):
        out = "logits" if name == "head.onnx" else "y"
        g = helper.make_graph(
            [helper.make_node("MatMul", ["x", "w"], [out])],
            name,
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, HIDDEN])],
            [helper.make_tensor_value_info(out, TensorProto.FLOAT, None)],
            initializer=[_init("w", array)],
        )
        onnx.save(helper.make_model(g), str(tmp_path / name))
    cfg = {
        "model": {
            "type": "decoder-pipeline",
            "decoder": {
                "head_size": 4,
                "num_key_value_heads": 2,
                "pipeline": [
                    {
                        "context": {"filename": "ctx.onnx", "run_on_token_gen": False},
                        "iterator": {"filename": "iter.onnx", "run_on_prompt": False},
                        "lm_head": {"filename": "head.onnx", "is_lm_head": True},
                    }
                ],
            },
        }
    }
    (tmp_path / "genai_config.json").write_text(json.dumps(cfg))
    db = D.decode_bytes(tmp_path, 4, 3)
    assert [(s.stage, s.weights_bytes, s.lm_head_bytes) for s in db.stages] == [
        ("iterator", HIDDEN * 10 * 4, 0),
        ("lm_head", 0, HIDDEN * VOCAB * 4),
    ]
    assert db.to_dict()["total_bytes"] == HIDDEN * 110 * 4 and db.to_dict()["lm_head_bytes"] == HIDDEN * VOCAB * 4


def test_a_graph_is_read_once_until_its_file_changes(tmp_path, monkeypatch):
    bundle = _flat_bundle(tmp_path, _decoder_graph())
    calls = []
    real = D.read_graph
    monkeypatch.setattr(D, "read_graph", lambda p: calls.append(p) or real(p))
    D._graph_bytes.cache_clear()
    D.decode_bytes(bundle, 8, 4)
    D.decode_bytes(bundle, 16, 8)  # another shape: same graph, new KV length
    assert len(calls) == 1
    onnx.save(_decoder_graph(kv_heads=4, head_size=4), str(bundle / "model.onnx"))
    assert D.decode_bytes(bundle, 2, 2).stages[0].kv_cache_bytes == 2 * 4 * 4 * 2 * 2 and len(calls) == 2


@pytest.mark.parametrize("model", sorted(BUNDLES.glob("*/*.onnx")), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_wire_reader_agrees_with_onnx_on_the_committed_bundles(model):
    ours = read_graph(model)
    theirs = onnx.load(str(model), load_external_data=False).graph
    assert [(i.name, i.dims, i.data_type) for i in ours.initializers] == [
        (i.name, tuple(i.dims), i.data_type) for i in theirs.initializer
    ]
    assert [(n.op_type, n.inputs, n.outputs) for n in ours.nodes] == [
        (n.op_type, tuple(n.input), tuple(n.output)) for n in theirs.node
    ]
    assert [(v.name, v.elem_type) for v in ours.inputs] == [
        (v.name, v.type.tensor_type.elem_type) for v in theirs.input
    ]
    assert [v.name for v in ours.outputs] == [v.name for v in theirs.output]


def test_committed_flat_bundle_reads_one_embedding_row_and_its_int4_weights():
    db = D.decode_bytes(BUNDLES / "tiny-qwen2", 128, 32)
    graph = onnx.load(str(BUNDLES / "tiny-qwen2" / "model.onnx"), load_external_data=False).graph
    packed = sum(
        int(np.prod(t.dims)) for t in graph.initializer if t.name.endswith("_Q4") and not t.name.startswith("lm_head")
    )
    (stage,) = db.stages
    assert stage.weights_bytes > packed  # the packed int4 layer weights, plus their scales and the norms
    assert stage.lm_head_bytes == 512 * 4 * 16 + 512 * 4 * 4  # packed lm_head + its fp32 scales
    assert stage.gathered_row_bytes == 128 * 4 + 2 * 16 * 4  # one fp32 embedding row + one cos and one sin row
