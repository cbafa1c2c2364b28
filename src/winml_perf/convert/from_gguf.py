"""`winml bundle from-gguf`: a GGUF file → an onnxruntime-genai bundle, written whole or not at all.

The bundle is built in a temporary folder beside ``-o`` and moved into place only when complete:
``genai_config.json``, ``model.onnx`` + ``model.onnx.data``, ``tokenizer.json``,
``tokenizer_config.json`` (with the chat template), ``chat_template.jinja`` and ``gguf.json``
(where it came from and what the conversion did to each weight).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from winml_perf.convert.decoder_graph import FLAT, GraphOptions, build_decoder
from winml_perf.convert.gguf_file import INSTALL_HINT, GgufModel, read_gguf
from winml_perf.convert.tokenizer import eos_ids, tokenizer_config, tokenizer_json
from winml_perf.support.errors import UsageError

MODEL_FILE = FLAT
PROVENANCE = "gguf.json"


def genai_config(model: GgufModel, eos: list[int]) -> dict[str, Any]:
    h, tok = model.hyper, model.tokenizer
    pad = tok.pad_id if tok.pad_id is not None else (eos[0] if eos else 0)
    return {
        "model": {
            "bos_token_id": tok.bos_id if tok.bos_id is not None else (eos[0] if eos else 0),
            "context_length": h.context_length,
            "decoder": {
                "session_options": {"log_id": "onnxruntime-genai", "provider_options": []},
                "filename": MODEL_FILE,
                "head_size": h.head_dim,
                "hidden_size": h.hidden,
                "inputs": {
                    "input_ids": "input_ids",
                    "attention_mask": "attention_mask",
                    "past_key_names": "past_key_values.%d.key",
                    "past_value_names": "past_key_values.%d.value",
                },
                "outputs": {
                    "logits": "logits",
                    "present_key_names": "present.%d.key",
                    "present_value_names": "present.%d.value",
                },
                "num_attention_heads": h.heads,
                "num_hidden_layers": h.layers,
                "num_key_value_heads": h.kv_heads,
            },
            "eos_token_id": eos if len(eos) > 1 else (eos[0] if eos else 0),
            "pad_token_id": pad,
            "type": h.architecture,
            "vocab_size": h.vocab_size,
        },
        "search": {
            "do_sample": False,
            "max_length": h.context_length,
            "min_length": 0,
            "num_beams": 1,
            "num_return_sequences": 1,
            "past_present_share_buffer": True,
            "repetition_penalty": 1.0,
            "temperature": 1.0,
            "top_k": 1,
            "top_p": 1.0,
        },
    }


def converter_id() -> str:
    """What made a bundle: this package's converter sources, hashed, so a cached bundle built by another
    version of the converter is rebuilt (scripts/real-model.sh compares it)."""
    digest = hashlib.sha256()
    for source in sorted(Path(__file__).parent.glob("*.py")):
        digest.update(source.name.encode() + b"\0" + source.read_bytes())
    return f"winml-perf bundle from-gguf {digest.hexdigest()[:12]}"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _check_output(out_dir: Path, force: bool) -> None:
    if out_dir.is_symlink():
        raise UsageError(f"output folder {out_dir} is a symbolic link", "give -o a real folder path")
    if out_dir.exists() and (not out_dir.is_dir() or any(out_dir.iterdir())) and not force:
        raise UsageError(
            f"output folder {out_dir} exists and is not empty", "pass --force to replace it, or another -o"
        )


def _save_model(proto: Any, path: Path) -> None:
    import onnx

    onnx.save_model(
        proto, str(path), save_as_external_data=True, all_tensors_to_one_file=True,
        location=path.name + ".data", size_threshold=1024,
    )  # fmt: skip


def _pipeline_config(flat: dict[str, Any], layers: int) -> dict[str, Any]:
    """The flat config rewritten as the four-stage decoder-pipeline `bundle synth --pipeline` writes."""
    from winml_perf.synth.pipeline import pipeline_config

    return pipeline_config(flat, layers)


def convert(
    gguf_path: Path, out_dir: Path, options: GraphOptions, force: bool = False, log: Callable[[str], None] = print
) -> dict[str, Any]:
    """Build the bundle in ``out_dir``; returns a summary (files, sizes, seconds, what each weight became)."""
    try:
        import onnx  # noqa: F401
    except ModuleNotFoundError as exc:
        raise UsageError(
            f"writing ONNX models needs the 'onnx' package ({exc})", f"install it: {INSTALL_HINT}"
        ) from exc
    out_dir = Path(out_dir)
    _check_output(out_dir, force)
    t0 = time.perf_counter()
    log(f"reading {gguf_path}")
    model = read_gguf(Path(gguf_path))
    h = model.hyper
    log(
        f"{h.name}: {h.architecture}, {h.layers} layers, hidden {h.hidden}, {h.heads}/{h.kv_heads} heads, "
        f"vocab {h.vocab_size}; writing the graph ({options.precision})"
    )
    eos = eos_ids(model.tokenizer)
    tok_json = tokenizer_json(model.tokenizer)
    models, built = build_decoder(model, options, log)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{out_dir.name}.", dir=out_dir.parent) as tmp_name:
        tmp = Path(tmp_name) / "bundle"
        tmp.mkdir()
        for filename, proto in models.items():
            log(f"saving {filename} and its weights")
            _save_model(proto, tmp / filename)
        del models
        (tmp / "tokenizer.json").write_text(tok_json, encoding="utf-8")
        tok_cfg = tokenizer_config(model.tokenizer, eos)
        (tmp / "tokenizer_config.json").write_text(
            json.dumps(tok_cfg, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
        )
        if model.tokenizer.chat_template:
            (tmp / "chat_template.jinja").write_text(model.tokenizer.chat_template, encoding="utf-8")
        config = genai_config(model, eos)
        if options.pipeline:
            config = _pipeline_config(config, h.layers)
        (tmp / "genai_config.json").write_text(json.dumps(config, indent=4) + "\n")
        provenance = {
            "source": gguf_path.name,
            "source_sha256": _sha256(Path(gguf_path)),
            "name": h.name,
            "architecture": h.architecture,
            "precision": options.precision,
            "accuracy_level": options.accuracy_level,
            "pipeline": options.pipeline,
            "weights": built.weights,
            "max_carry_over_error": built.max_carry_error,
            "eos_token_ids": eos,
            "converter": converter_id(),
        }
        (tmp / PROVENANCE).write_text(json.dumps(provenance, indent=2) + "\n")
        if out_dir.exists():
            shutil.rmtree(out_dir)
        tmp.rename(out_dir)
    files = {p.name: p.stat().st_size for p in sorted(out_dir.iterdir()) if p.is_file()}
    return {
        "path": str(out_dir),
        "seconds": round(time.perf_counter() - t0, 1),
        "bytes": sum(files.values()),
        "files": files,
        "weights": built.weights,
        "max_carry_over_error": built.max_carry_error,
    }
