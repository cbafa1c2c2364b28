"""Read a GGUF file into plain values: the architecture's hyper-parameters, the tokenizer, the tensors.

Everything the converter needs crosses out of here as a frozen ``GgufModel``; only this file imports
the ``gguf`` package (PyPI, maintained with llama.cpp). Unsupported architectures and tensor types
are refused here, before anything is written.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from winml_perf.support.errors import UsageError

ARCHITECTURES = ("llama", "qwen2")
TENSOR_TYPES = ("F32", "F16", "Q8_0", "Q4_0", "Q4_1")
INSTALL_HINT = "pip install -e '.[gguf]'"


@dataclass(frozen=True)
class Hyper:
    """The shape of a llama-family decoder, as the GGUF metadata states it."""

    architecture: str
    layers: int
    hidden: int
    ffn: int
    heads: int
    kv_heads: int
    head_dim: int
    rope_base: float
    rms_eps: float
    context_length: int
    vocab_size: int
    name: str


@dataclass(frozen=True)
class GgufTokenizer:
    """The tokenizer as llama.cpp reads it from the file."""

    model: str
    pre: str
    tokens: tuple[str, ...]
    token_types: tuple[int, ...]
    merges: tuple[str, ...]
    bos_id: int | None
    eos_id: int | None
    pad_id: int | None
    unk_id: int | None
    add_bos: bool
    chat_template: str | None


@dataclass(frozen=True)
class GgufTensor:
    """One tensor: its type name, its shape in numpy (row-major) order, its raw bytes or values."""

    name: str
    type_name: str
    shape: tuple[int, ...]
    data: np.ndarray  # float32/float16 values, or uint8 blocks of shape (rows, bytes per row)


@dataclass(frozen=True)
class GgufModel:
    path: Path
    hyper: Hyper
    tokenizer: GgufTokenizer
    tensors: Mapping[str, GgufTensor]


def _reader_module() -> Any:
    try:
        import gguf
    except ModuleNotFoundError as exc:
        raise UsageError(f"reading GGUF files needs the 'gguf' package ({exc})", f"install it: {INSTALL_HINT}") from exc
    return gguf


def _field(fields: Mapping[str, Any], key: str, path: Path, default: Any = ...) -> Any:
    field = fields.get(key)
    if field is None:
        if default is ...:
            raise UsageError(
                f"{path}: GGUF metadata key '{key}' is missing", "is this a complete llama.cpp model file?"
            )
        return default
    return field.contents()


def _hyper(fields: Mapping[str, Any], path: Path, vocab: int) -> Hyper:
    arch = str(_field(fields, "general.architecture", path))
    if arch not in ARCHITECTURES:
        raise UsageError(
            f"{path}: architecture '{arch}' (general.architecture) is not supported",
            f"supported: {', '.join(ARCHITECTURES)}",
        )
    heads = int(_field(fields, f"{arch}.attention.head_count", path))
    hidden = int(_field(fields, f"{arch}.embedding_length", path))
    head_dim = int(_field(fields, f"{arch}.rope.dimension_count", path, hidden // heads))
    if head_dim * heads != hidden:
        raise UsageError(
            f"{path}: head dimension {head_dim} × {heads} heads ≠ hidden {hidden}",
            "only models whose rotary dimension spans the whole head are supported",
        )
    return Hyper(
        architecture=arch,
        layers=int(_field(fields, f"{arch}.block_count", path)),
        hidden=hidden,
        ffn=int(_field(fields, f"{arch}.feed_forward_length", path)),
        heads=heads,
        kv_heads=int(_field(fields, f"{arch}.attention.head_count_kv", path, heads)),
        head_dim=head_dim,
        rope_base=float(_field(fields, f"{arch}.rope.freq_base", path, 10000.0)),
        rms_eps=float(_field(fields, f"{arch}.attention.layer_norm_rms_epsilon", path)),
        context_length=int(_field(fields, f"{arch}.context_length", path)),
        vocab_size=int(_field(fields, f"{arch}.vocab_size", path, vocab)),
        name=str(_field(fields, "general.name", path, path.stem)),
    )


def _optional_int(fields: Mapping[str, Any], key: str) -> int | None:
    field = fields.get(key)
    return None if field is None else int(field.contents())


def _tokenizer(fields: Mapping[str, Any], path: Path) -> GgufTokenizer:
    model = str(_field(fields, "tokenizer.ggml.model", path))
    if model != "gpt2":
        raise UsageError(
            f"{path}: tokenizer model '{model}' (tokenizer.ggml.model) is not supported",
            "supported: gpt2 (byte-level BPE, as SmolLM2 and Qwen2 ship)",
        )
    add_bos = fields.get("tokenizer.ggml.add_bos_token")
    template = fields.get("tokenizer.chat_template")
    return GgufTokenizer(
        model=model,
        pre=str(_field(fields, "tokenizer.ggml.pre", path, "default")),
        tokens=tuple(str(t) for t in _field(fields, "tokenizer.ggml.tokens", path)),
        token_types=tuple(int(t) for t in _field(fields, "tokenizer.ggml.token_type", path)),
        merges=tuple(str(m) for m in _field(fields, "tokenizer.ggml.merges", path)),
        bos_id=_optional_int(fields, "tokenizer.ggml.bos_token_id"),
        eos_id=_optional_int(fields, "tokenizer.ggml.eos_token_id"),
        pad_id=_optional_int(fields, "tokenizer.ggml.padding_token_id"),
        unk_id=_optional_int(fields, "tokenizer.ggml.unknown_token_id"),
        add_bos=bool(add_bos.contents()) if add_bos is not None else False,
        chat_template=str(template.contents()) if template is not None else None,
    )


def _tensor(raw: Any, path: Path) -> GgufTensor:
    type_name = raw.tensor_type.name
    if type_name not in TENSOR_TYPES:
        raise UsageError(
            f"{path}: tensor '{raw.name}' has type {type_name}, which is not supported",
            f"supported types: {', '.join(TENSOR_TYPES)}",
        )
    shape = tuple(int(d) for d in reversed([int(x) for x in raw.shape]))  # GGUF lists the fastest dimension first
    return GgufTensor(name=str(raw.name), type_name=type_name, shape=shape, data=np.asarray(raw.data))


def read_gguf(path: Path) -> GgufModel:
    """The file's hyper-parameters, tokenizer and tensors (memory-mapped); UsageError for what is not supported."""
    if not path.is_file():
        raise UsageError(f"{path}: no such GGUF file", "give the path of a .gguf file")
    gguf = _reader_module()
    try:
        reader = gguf.GGUFReader(str(path))
    except (ValueError, OSError, KeyError) as exc:
        raise UsageError(f"{path}: not a readable GGUF file ({exc})", "give a llama.cpp GGUF model file") from exc
    fields = reader.fields
    arch = str(_field(fields, "general.architecture", path))
    if arch not in ARCHITECTURES:
        raise UsageError(
            f"{path}: architecture '{arch}' (general.architecture) is not supported",
            f"supported: {', '.join(ARCHITECTURES)}",
        )
    tokenizer = _tokenizer(fields, path)
    hyper = _hyper(fields, path, len(tokenizer.tokens))
    tensors = {t.name: _tensor(t, path) for t in reader.tensors}
    return GgufModel(path=path, hyper=hyper, tokenizer=tokenizer, tensors=tensors)
