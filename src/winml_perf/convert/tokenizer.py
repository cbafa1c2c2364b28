"""A Hugging Face ``tokenizer.json`` built with the ``tokenizers`` library from a GGUF vocabulary and merges.

Byte-level BPE (``tokenizer.ggml.model`` = gpt2). The pre-tokenizer follows llama.cpp's for the file's
``tokenizer.ggml.pre``: ``smollm`` splits digits one by one before the GPT-2 split; ``qwen2`` splits
numbers into single digits and uses the Qwen2 pattern. Control tokens (token_type 3) become special
added tokens, matched before pre-tokenization as llama.cpp does when it parses specials.
"""

from __future__ import annotations

import json
from typing import Any

from winml_perf.convert.gguf_file import INSTALL_HINT, GgufTokenizer
from winml_perf.support.errors import UsageError

CONTROL = 3
USER_DEFINED = 4
# Qwen2's split, as its tokenizer.json and llama.cpp's LLAMA_VOCAB_PRE_TYPE_QWEN2 state it.
_QWEN2_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
PRE_TOKENIZERS = ("smollm", "qwen2", "gpt-2", "default")


def _pre_tokenizer(pre: str) -> dict[str, Any]:
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    if pre == "smollm":
        # llama.cpp's two passes (every digit its own piece, then GPT-2's split), as SmolLM2's own
        # tokenizer.json writes them. The tokenizers library and llama.cpp agree on every test string;
        # onnxruntime-genai's tokenizer splits a run of spaces before a digit differently (docs/real-model.md).
        digits = {"type": "Digits", "individual_digits": True}
        return {"type": "Sequence", "pretokenizers": [digits, byte_level]}
    if pre == "qwen2":
        split = {"type": "Split", "pattern": {"Regex": _QWEN2_SPLIT}, "behavior": "Isolated", "invert": False}
        return {"type": "Sequence", "pretokenizers": [split, {**byte_level, "use_regex": False}]}
    if pre in ("gpt-2", "default"):
        return byte_level
    raise UsageError(
        f"GGUF pre-tokenizer '{pre}' (tokenizer.ggml.pre) is not supported",
        f"supported: {', '.join(PRE_TOKENIZERS)}",
    )


def special_ids(tok: GgufTokenizer) -> list[int]:
    return [i for i, kind in enumerate(tok.token_types) if kind in (CONTROL, USER_DEFINED)]


def tokenizer_json(tok: GgufTokenizer) -> str:
    """The tokenizer.json text; checked by loading it with the ``tokenizers`` library."""
    try:
        from tokenizers import Tokenizer
    except ModuleNotFoundError as exc:
        raise UsageError(f"building the tokenizer needs the 'tokenizers' package ({exc})", INSTALL_HINT) from exc
    vocab = {token: i for i, token in enumerate(tok.tokens)}
    added = [
        {
            "id": i,
            "content": tok.tokens[i],
            "single_word": False,
            "lstrip": False,
            "rstrip": False,
            "normalized": tok.token_types[i] != CONTROL,
            "special": tok.token_types[i] == CONTROL,
        }
        for i in special_ids(tok)
    ]
    unk = tok.tokens[tok.unk_id] if tok.unk_id is not None and tok.unk_id < len(tok.tokens) else None
    spec = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": _pre_tokenizer(tok.pre),
        "post_processor": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": True},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": unk,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": False,
            "vocab": vocab,
            "merges": [m.split(" ", 1) for m in tok.merges],
        },
    }
    text = json.dumps(spec, ensure_ascii=False)
    Tokenizer.from_str(text)  # raises if the library cannot read what we wrote
    return text


def tokenizer_config(tok: GgufTokenizer, eos_ids: list[int]) -> dict[str, Any]:
    """tokenizer_config.json: class, special tokens, the chat template, no BOS added (as the GGUF says)."""

    def name(i: int | None) -> str | None:
        return tok.tokens[i] if i is not None and 0 <= i < len(tok.tokens) else None

    config: dict[str, Any] = {
        "tokenizer_class": "GPT2Tokenizer",
        "add_bos_token": tok.add_bos,
        "add_prefix_space": False,
        "clean_up_tokenization_spaces": False,
        "model_max_length": 1 << 30,
        "bos_token": name(tok.bos_id),
        "eos_token": name(eos_ids[0]) if eos_ids else None,
        "pad_token": name(tok.pad_id),
        "unk_token": name(tok.unk_id),
        "added_tokens_decoder": {
            str(i): {"content": tok.tokens[i], "special": tok.token_types[i] == CONTROL} for i in special_ids(tok)
        },
    }
    if tok.chat_template:
        config["chat_template"] = tok.chat_template
    return config


def eos_ids(tok: GgufTokenizer) -> list[int]:
    """The file's eos, then the token the chat template closes a turn with (``<|im_end|>``), if it differs."""
    ids = [tok.eos_id] if tok.eos_id is not None else []
    template = tok.chat_template or ""
    for closer in ("<|im_end|>", "<|eot_id|>", "<|endoftext|>"):
        if closer in template and closer in tok.tokens:
            i = tok.tokens.index(closer)
            if i not in ids:
                ids.append(i)
            break
    return ids
