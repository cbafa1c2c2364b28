"""Small GGUF files written with the ``gguf`` writer for tests: random weights of a llama or qwen2 shape.

Each tensor type the converter supports can be chosen for the linear weights and the embedding, so the
carry-over of every block layout is checked against the numpy reference (tests/gguf_reference.py).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

SPECIALS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
MERGES = ("Ġ t", "h e", "Ġt he", "Ġ a", "i n", "Ġ Ġ")


def byte_tokens() -> list[str]:
    """GPT-2's byte-to-unicode alphabet, in byte order."""
    printable = (
        list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    )
    chars, extra = {}, 0
    for b in range(256):
        if b in printable:
            chars[b] = chr(b)
        else:
            chars[b] = chr(256 + extra)
            extra += 1
    return [chars[b] for b in range(256)]


def vocabulary() -> tuple[list[str], list[int], list[str]]:
    tokens = list(SPECIALS) + byte_tokens()
    for merge in MERGES:
        tokens.append(merge.replace(" ", ""))
    types = [3] * len(SPECIALS) + [1] * (len(tokens) - len(SPECIALS))
    return tokens, types, list(MERGES)


def write_gguf(  # noqa: PLR0913, PLR0915
    path: Path,
    arch: str = "llama",
    linear_type: str = "Q4_1",
    embed_type: str = "Q8_0",
    *,
    seed: int = 0,
    hidden: int = 64,
    layers: int = 2,
    heads: int = 4,
    kv_heads: int = 2,
    ffn: int = 128,
    tied: bool = True,
    pre: str | None = None,
) -> Path:
    import gguf

    rng = np.random.default_rng(seed)
    tokens, types, merges = vocabulary()
    vocab = len(tokens)
    head_dim = hidden // heads
    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_name(f"test-{arch}")
    writer.add_block_count(layers)
    writer.add_context_length(256)
    writer.add_embedding_length(hidden)
    writer.add_feed_forward_length(ffn)
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv_heads)
    writer.add_rope_dimension_count(head_dim)
    writer.add_rope_freq_base(10000.0 if arch == "llama" else 1000000.0)
    writer.add_layer_norm_rms_eps(1e-5 if arch == "llama" else 1e-6)
    writer.add_vocab_size(vocab)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre(pre or ("smollm" if arch == "llama" else "qwen2"))
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(merges)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_pad_token_id(2)
    writer.add_chat_template(TEMPLATE)

    def add(name: str, values: np.ndarray, type_name: str) -> None:
        values = values.astype(np.float32)
        if type_name == "F32":
            writer.add_tensor(name, values)
            return
        qtype = gguf.GGMLQuantizationType[type_name]
        try:
            data = gguf.quants.quantize(values, qtype)
        except NotImplementedError:  # a type the converter refuses (K-quants): its bytes need not mean anything
            block, size = gguf.GGML_QUANT_SIZES[qtype]
            rows, cols = values.shape
            data = rng.integers(0, 256, (rows, cols // block * size), dtype=np.uint8)
        writer.add_tensor(name, data, raw_shape=data.shape, raw_dtype=qtype)

    def matrix(rows: int, cols: int, scale: float) -> np.ndarray:
        return rng.normal(0, scale, (rows, cols))

    add("token_embd.weight", matrix(vocab, hidden, 1.0), embed_type)
    for i in range(layers):
        p = f"blk.{i}."
        add(p + "attn_norm.weight", 1 + 0.1 * rng.normal(size=hidden), "F32")
        add(p + "ffn_norm.weight", 1 + 0.1 * rng.normal(size=hidden), "F32")
        add(p + "attn_q.weight", matrix(hidden, hidden, 0.3), linear_type)
        add(p + "attn_k.weight", matrix(kv_heads * head_dim, hidden, 0.3), linear_type)
        add(p + "attn_v.weight", matrix(kv_heads * head_dim, hidden, 0.3), linear_type)
        if arch == "qwen2":
            for n, rows in (("q", hidden), ("k", kv_heads * head_dim), ("v", kv_heads * head_dim)):
                add(p + f"attn_{n}.bias", rng.normal(0, 0.5, rows), "F32")
        add(p + "attn_output.weight", matrix(hidden, hidden, 0.2), linear_type)
        add(p + "ffn_gate.weight", matrix(ffn, hidden, 0.2), linear_type)
        add(p + "ffn_up.weight", matrix(ffn, hidden, 0.2), linear_type)
        add(p + "ffn_down.weight", matrix(hidden, ffn, 0.2), linear_type)
    add("output_norm.weight", 1 + 0.1 * rng.normal(size=hidden), "F32")
    if not tied:
        add("output.weight", matrix(vocab, hidden, 0.3), linear_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
