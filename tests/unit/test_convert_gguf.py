"""`winml bundle from-gguf` on small GGUF files written here: every block layout carried over exactly,
the graph equal to a numpy model written from llama.cpp's definitions, and clear refusals."""

from __future__ import annotations

import json

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")
pytest.importorskip("tokenizers")
pytest.importorskip("onnx")

from tests import gguf_reference  # noqa: E402
from tests.gguf_files import write_gguf  # noqa: E402
from winml_perf.convert import blocks  # noqa: E402
from winml_perf.convert.decoder_graph import GraphOptions, unpermute_order  # noqa: E402
from winml_perf.convert.from_gguf import convert  # noqa: E402
from winml_perf.convert.gguf_file import read_gguf  # noqa: E402

QUIET = dict(log=lambda message: None)


@pytest.mark.parametrize("type_name", ["Q4_0", "Q4_1", "Q8_0"])
def test_blocks_carry_over_to_matmulnbits_without_requantizing(type_name):
    rng = np.random.default_rng(1)
    values = rng.normal(0, 1, (48, 96)).astype(np.float32)
    values[3] += 5.0  # a row far from zero: Q4_1's min matters
    qtype = gguf.GGMLQuantizationType[type_name]
    raw = gguf.quants.quantize(values, qtype)
    reference = gguf.quants.dequantize(raw, qtype).reshape(48, 96)
    nb = blocks.to_nbits(raw, type_name, 48, 96)
    assert nb.bits == (8 if type_name == "Q8_0" else 4)
    # what MatMulNBits computes from these inputs equals llama.cpp's dequantized values
    np.testing.assert_allclose(blocks.nbits_values(nb), reference, rtol=0, atol=1e-6 * np.abs(reference).max())
    np.testing.assert_array_equal(blocks.dequantize(raw, type_name, 48, 96), reference)


def test_row_reorder_is_exact_and_undoes_llama_cpp_permutation():
    heads, head_dim = 3, 8
    hf_rows = np.arange(heads * head_dim)
    # llama.cpp's converter: reshape(heads, 2, dim/2).swapaxes(1, 2)
    gguf_rows = hf_rows.reshape(heads, 2, head_dim // 2).swapaxes(1, 2).reshape(-1)
    np.testing.assert_array_equal(gguf_rows[unpermute_order(heads * head_dim, heads)], hf_rows)


def _logits(bundle, ids):
    import onnxruntime as ort

    config = json.loads((bundle / "genai_config.json").read_text())["model"]["decoder"]
    session = ort.InferenceSession(str(bundle / "model.onnx"))
    feeds = {"input_ids": np.array([ids], np.int64), "attention_mask": np.ones((1, len(ids)), np.int64)}
    dtype = np.float16 if session.get_inputs()[-1].type == "tensor(float16)" else np.float32  # the KV cache's
    empty = np.zeros((1, config["num_key_value_heads"], 0, config["head_size"]), dtype)
    for i in range(config["num_hidden_layers"]):
        feeds[f"past_key_values.{i}.key"] = feeds[f"past_key_values.{i}.value"] = empty
    return session.run(["logits"], feeds)[0][0]


CASES = [
    ("llama", "Q4_1", "Q8_0", True),
    ("llama", "Q4_0", "F16", True),
    ("llama", "Q8_0", "Q8_0", False),
    ("llama", "F16", "F32", True),
    ("qwen2", "F32", "Q8_0", False),
    ("qwen2", "Q4_1", "Q4_0", True),
]


@pytest.mark.parametrize("arch,linear,embed,tied", CASES)
def test_converted_graph_equals_llama_cpp_definitions(tmp_path, arch, linear, embed, tied):
    source = write_gguf(tmp_path / "m.gguf", arch, linear, embed, tied=tied, seed=3)
    summary = convert(source, tmp_path / "bundle", GraphOptions(accuracy_level=0), **QUIET)
    ids = [5, 40, 77, 120, 9, 200, 33, 61, 250]
    expected = gguf_reference.logits(read_gguf(source), ids)
    got = _logits(tmp_path / "bundle", ids)
    assert np.abs(got - expected).max() < 1e-3 * max(1.0, np.abs(expected).max())
    np.testing.assert_array_equal(got.argmax(-1), expected.argmax(-1))
    if linear.startswith("Q"):
        assert any("carried over" in how for how in summary["weights"]), summary["weights"]
        assert summary["max_carry_over_error"] < 1e-5


def test_fp32_and_int4_precisions(tmp_path):
    source = write_gguf(tmp_path / "m.gguf", "llama", "F32", "F32")
    ids = [5, 40, 77, 120]
    expected = gguf_reference.logits(read_gguf(source), ids)
    fp32 = convert(source, tmp_path / "fp32", GraphOptions(precision="fp32", accuracy_level=0), **QUIET)
    assert set(fp32["weights"]) == {"F32 as float32 MatMul", "F32 embedding as float32 Gather"}
    assert np.abs(_logits(tmp_path / "fp32", ids) - expected).max() < 1e-3
    int4 = convert(source, tmp_path / "int4", GraphOptions(precision="int4", accuracy_level=0), **QUIET)
    assert any("quantized to int4" in how for how in int4["weights"]), int4["weights"]
    got = _logits(tmp_path / "int4", ids)
    assert 1e-3 < np.abs(got - expected).max()  # re-quantized: not the file's values any more
    assert np.corrcoef(got.ravel(), expected.ravel())[0, 1] > 0.9


@pytest.mark.parametrize("pipeline", [False, True], ids=["flat", "pipeline"])
def test_genai_generates_the_reference_greedy_tokens(tmp_path, pipeline):
    """The KV cache, the attention mask and rotary positions of decode steps, through onnxruntime-genai;
    the pipeline split (embeddings, transformer as context and iterator, lm_head) gives the same tokens."""
    import onnxruntime_genai as og

    source = write_gguf(tmp_path / "m.gguf", "llama", "Q4_1", "Q8_0", seed=5)
    convert(source, tmp_path / "bundle", GraphOptions(accuracy_level=0, pipeline=pipeline), **QUIET)
    if pipeline:
        config = json.loads((tmp_path / "bundle" / "genai_config.json").read_text())["model"]
        assert config["type"] == "decoder-pipeline"
        assert sorted(config["decoder"]["pipeline"][0]) == ["context", "embeddings", "iterator", "lm_head"]
        assert not (tmp_path / "bundle" / "model.onnx").exists()
    model = read_gguf(source)
    prompt = [7, 100, 150, 42, 61]
    expected = list(prompt)
    for _ in range(8):
        expected.append(int(gguf_reference.logits(model, expected)[-1].argmax()))
    og_model = og.Model(str(tmp_path / "bundle"))
    params = og.GeneratorParams(og_model)
    params.set_search_options(max_length=len(expected), min_length=len(expected), do_sample=False)
    generator = og.Generator(og_model, params)
    generator.append_tokens(np.array(prompt, np.int32))
    got = list(prompt)
    while not generator.is_done():
        generator.generate_next_token()
        got.append(int(generator.get_next_tokens()[0]))
    assert got == expected


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_tokenizer_files_read_by_genai_and_tokenizers_alike(tmp_path, arch):
    import onnxruntime_genai as og
    from tokenizers import Tokenizer

    source = write_gguf(tmp_path / "m.gguf", arch, "Q8_0", "Q8_0")
    convert(source, tmp_path / "bundle", GraphOptions(), **QUIET)
    hf = Tokenizer.from_file(str(tmp_path / "bundle" / "tokenizer.json"))
    og_tok = og.Tokenizer(og.Model(str(tmp_path / "bundle")))
    # onnxruntime-genai's tokenizer splits a run of spaces before a digit unlike the tokenizers library and
    # llama.cpp (docs/real-model.md): the strings here have none
    texts = ["the 1234 theatre", " 12 a", " 1 22 333", " a tin\nthe", "<|im_start|>user\nhe 9<|im_end|>", "ÿ€ done"]
    for text in texts:
        ids = hf.encode(text).ids
        assert list(og_tok.encode(text)) == ids, text
    assert hf.encode("12").ids == [hf.token_to_id("1"), hf.token_to_id("2")]  # one digit a token, both pre-tokenizers
    assert hf.encode("<|im_end|>").ids == [2]
    config = json.loads((tmp_path / "bundle" / "tokenizer_config.json").read_text())
    assert "chat_template" in config and config["eos_token"] == "<|im_end|>"
    provenance = json.loads((tmp_path / "bundle" / "gguf.json").read_text())
    assert provenance["source"] == "m.gguf" and len(provenance["source_sha256"]) == 64


def test_layers_are_named_as_the_builder_names_them(tmp_path):
    """The equivalence check's layer taps find every decoder layer's output in a converted model."""
    import onnx

    from winml_perf.bundle.variants import layer_tensors

    source = write_gguf(tmp_path / "m.gguf", layers=3)
    convert(source, tmp_path / "bundle", GraphOptions(), **QUIET)
    model = onnx.load(str(tmp_path / "bundle" / "model.onnx"), load_external_data=False)
    assert sorted(layer_tensors(model, add=True)) == [0, 1, 2]


#: fp16 cases: llama and qwen2, float and block sources, tied and untied heads
FP16_CASES = [
    ("llama", "F16", "F16", True),
    ("llama", "Q4_1", "Q8_0", True),
    ("qwen2", "Q8_0", "Q8_0", False),
    ("qwen2", "Q4_1", "F16", False),
]


@pytest.mark.parametrize("arch,linear,embed,tied", FP16_CASES)
def test_fp16_computes_in_float16_near_the_reference(tmp_path, arch, linear, embed, tied):
    """-p fp16: float16 inputs, outputs and float weights; the file's blocks still carried over, with fp16
    scales. Logits within 1e-2 × max(1, |logit|): float16 keeps 11 significant bits (relative spacing
    2⁻¹⁰ ≈ 1e-3, so a logit near 28 is held to ±0.016 alone), and every op's output is rounded again over
    two layers; measured here up to 5.6e-3 relative (accuracy_level 0), so 1e-2 leaves about 2× margin."""
    import onnx

    source = write_gguf(tmp_path / "m.gguf", arch, linear, embed, tied=tied, seed=3)
    summary = convert(source, tmp_path / "bundle", GraphOptions(precision="fp16", accuracy_level=0), **QUIET)
    model = onnx.load(str(tmp_path / "bundle" / "model.onnx"), load_external_data=False)
    f16, i64 = onnx.TensorProto.FLOAT16, onnx.TensorProto.INT64
    for value in [*model.graph.input, *model.graph.output]:
        expected_type = i64 if value.name in ("input_ids", "attention_mask") else f16
        assert value.type.tensor_type.elem_type == expected_type, value.name
    assert not any(node.op_type == "Cast" and "mask" not in node.name for node in model.graph.node)
    floats = [t for t in model.graph.initializer if t.data_type in (onnx.TensorProto.FLOAT, f16)]
    assert floats and all(t.data_type == f16 for t in floats)  # norms, cos/sin, scales, embedding: float16
    ids = [5, 40, 77, 120, 9, 200, 33, 61, 250]
    expected = gguf_reference.logits(read_gguf(source), ids)
    got = _logits(tmp_path / "bundle", ids)
    assert got.dtype == np.float16
    assert np.abs(got.astype(np.float64) - expected).max() < 1e-2 * max(1.0, np.abs(expected).max())
    np.testing.assert_array_equal(got.argmax(-1), expected.argmax(-1))
    weights = summary["weights"]
    if linear.startswith("Q"):
        assert weights[f"{linear} carried over as {4 if linear != 'Q8_0' else 8}-bit MatMulNBits (fp16 scales)"]
    else:
        assert set(weights) == {"F16 as float16 MatMul", "F16 embedding as float16 Gather"}
    # Q4_1's offset m + 8d rounded to float16 is not exact any more: measured, and small against the weights
    assert summary["max_carry_over_error"] < 1e-3
    provenance = json.loads((tmp_path / "bundle" / "gguf.json").read_text())
    assert provenance["precision"] == "fp16" and provenance["weights"] == weights
    assert provenance["max_carry_over_error"] == summary["max_carry_over_error"]
    config = json.loads((tmp_path / "bundle" / "genai_config.json").read_text())["model"]
    names = {v.name: v for v in [*model.graph.input, *model.graph.output]}
    decoder = config["decoder"]
    assert decoder["filename"] == "model.onnx" and config["type"] == arch
    for i in range(decoder["num_hidden_layers"]):
        for name in (decoder["inputs"]["past_key_names"] % i, decoder["outputs"]["present_value_names"] % i):
            dims = names[name].type.tensor_type.shape.dim
            assert (dims[1].dim_value, dims[3].dim_value) == (decoder["num_key_value_heads"], decoder["head_size"])
    assert f"past_key_values.{decoder['num_hidden_layers']}.key" not in names


def test_fp16_carry_over_error_is_measured_against_the_file_values(tmp_path):
    """Q4_1's per-block offset m + 8d rounded to float16 differs from the file's value: the reported error is
    what MatMulNBits computes from the float16 inputs against llama.cpp's dequantized values, over all matrices."""
    source = write_gguf(tmp_path / "m.gguf", "qwen2", "Q4_1", "F16", tied=False, seed=3)
    summary = convert(source, tmp_path / "bundle", GraphOptions(precision="fp16"), **QUIET)
    model = read_gguf(source)
    worst = 0.0
    for t in model.tensors.values():
        if t.type_name == "Q4_1":
            rows, cols = t.shape
            nb = blocks.to_nbits(t.data, "Q4_1", rows, cols)
            assert nb.offsets is not None
            half = blocks.NBits(4, nb.packed, nb.scales.astype(np.float16), None, nb.offsets.astype(np.float16))
            reference = blocks.dequantize(t.data, "Q4_1", rows, cols)
            worst = max(worst, float(np.abs(blocks.nbits_values(half) - reference).max()))
    assert summary["max_carry_over_error"] == worst and 0 < worst < 1e-3
    auto = convert(source, tmp_path / "auto", GraphOptions(), **QUIET)
    assert auto["max_carry_over_error"] < worst  # float32 offsets: exact to float32 rounding


@pytest.mark.parametrize(
    "arch,linear,embed,seed",
    [("llama", "Q4_1", "Q8_0", 8), ("qwen2", "F16", "F16", 8)],
)
def test_fp16_genai_generates_the_reference_greedy_tokens(tmp_path, arch, linear, embed, seed):
    """-p fp16 through onnxruntime-genai (a float16 KV cache, on the CPU EP): the float64 reference's tokens.
    Seed 8 is picked so that every step's top-1 logit leads the next by at least 0.5 (llama) and 1.1 (qwen2):
    float16 moves these logits by up to about 0.1 here, so random weights with a closer race (seed 5 has
    0.09 on qwen2) could flip a token by rounding alone, which says nothing about the graph."""
    import onnxruntime_genai as og

    source = write_gguf(tmp_path / "m.gguf", arch, linear, embed, seed=seed)
    convert(source, tmp_path / "bundle", GraphOptions(precision="fp16", accuracy_level=0), **QUIET)
    model = read_gguf(source)
    prompt = [7, 100, 150, 42, 61]
    expected = list(prompt)
    margins = []
    for _ in range(8):
        last = gguf_reference.logits(model, expected)[-1]
        top = np.sort(last)
        margins.append(round(float(top[-1] - top[-2]), 3))  # shown if a token flips
        expected.append(int(last.argmax()))
    og_model = og.Model(str(tmp_path / "bundle"))
    params = og.GeneratorParams(og_model)
    params.set_search_options(max_length=len(expected), min_length=len(expected), do_sample=False)
    generator = og.Generator(og_model, params)
    generator.append_tokens(np.array(prompt, np.int32))
    got = list(prompt)
    while not generator.is_done():
        generator.generate_next_token()
        got.append(int(generator.get_next_tokens()[0]))
    assert got == expected, margins
    assert min(margins) > 0.3  # the margin the seed was picked for: 3× the float16 logit error measured
