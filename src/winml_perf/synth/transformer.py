"""Random-weight onnxruntime-genai bundles of real architecture shapes, made offline.

Needs the ``synth`` extra (torch, transformers, tokenizers, safetensors, onnx, onnx-ir). Steps:
a Hugging Face folder from a config (no hub access), a byte-level BPE tokenizer trained locally
on a generated corpus, then onnxruntime-genai's model builder. ``pipeline=True`` splits the
result into an NPU-style decoder-pipeline bundle (embeddings / context / iterator / lm_head);
``static_npu=True`` also fixes its shapes and routes context and iterator to QNN (synth_static).
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

from winml_perf.ep import child
from winml_perf.support.errors import UsageError, WinmlPerfError

ARCHITECTURES = ("qwen2", "qwen3", "llama")
PRECISIONS = ("int4", "fp16", "fp32")
SPECIAL_TOKENS = ("<pad>", "<s>", "</s>", "<unk>")  # ids 0..3: pad, bos, eos, unk

# Shapes of real models (hidden, layers, heads, kv heads, intermediate, vocab, head_dim, tied).
PRESETS: dict[str, dict[str, int]] = {
    "tiny": dict(
        hidden_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=256,
        vocab_size=512,
        max_position_embeddings=1024,
    ),
    "qwen2.5-0.5b": dict(
        hidden_size=896,
        num_hidden_layers=24,
        num_attention_heads=14,
        num_key_value_heads=2,
        intermediate_size=4864,
        vocab_size=151936,
        max_position_embeddings=32768,
    ),
    "qwen2.5-1.5b": dict(
        hidden_size=1536,
        num_hidden_layers=28,
        num_attention_heads=12,
        num_key_value_heads=2,
        intermediate_size=8960,
        vocab_size=151936,
        max_position_embeddings=32768,
    ),
    "qwen3-0.6b": dict(
        hidden_size=1024,
        num_hidden_layers=28,
        num_attention_heads=16,
        num_key_value_heads=8,
        intermediate_size=3072,
        vocab_size=151936,
        max_position_embeddings=40960,
        head_dim=128,
    ),
    "llama-3.2-1b": dict(
        hidden_size=2048,
        num_hidden_layers=16,
        num_attention_heads=32,
        num_key_value_heads=8,
        intermediate_size=8192,
        vocab_size=128256,
        max_position_embeddings=131072,
    ),
}
DEFAULT_ARCH = {
    "tiny": "qwen2",
    "qwen2.5-0.5b": "qwen2",
    "qwen2.5-1.5b": "qwen2",
    "qwen3-0.6b": "qwen3",
    "llama-3.2-1b": "llama",
}
# Large enough that random logits are far apart, so greedy decoding walks through varied tokens
# instead of repeating one (with the default 0.02 and tied embeddings it repeats a single token).
INIT_RANGE = 0.3
CHAT_TEMPLATE = (
    "{% for m in messages %}<s>{{ m['role'] }}\n{{ m['content'] }}</s>\n{% endfor %}"
    "{% if add_generation_prompt %}<s>assistant\n{% endif %}"
)
_WORD_PARTS = (
    "ka",
    "lo",
    "mi",
    "ter",
    "on",
    "ra",
    "vel",
    "sin",
    "du",
    "pre",
    "fix",
    "nor",
    "an",
    "es",
    "ti",
    "bro",
    "qua",
    "zen",
    "ul",
    "po",
    "de",
    "mar",
    "gi",
    "stu",
    "op",
    "ex",
    "ly",
    "ing",
    "ed",
    "th",
)


class SynthSummary(TypedDict):
    """What ``synthesize`` made: the bundle's folder, its size and the files in it, the time it took."""

    path: str
    seconds: float
    bytes: int
    files: dict[str, int]  # file name -> size in bytes


@dataclass(frozen=True)
class SynthSpec:
    preset: str = "tiny"
    arch: str | None = None
    precision: str = "int4"
    execution_provider: str = "cpu"
    pipeline: bool = False
    quantize_lm_head: bool = False
    seed: int = 0
    context_length: int | None = None
    overrides: dict[str, int] = field(default_factory=dict)  # config entries over the preset's shape
    static_npu: bool = False
    prompt_length: int = 16  # static_npu: the context stage's fixed prompt length S
    kv_length: int = 128  # static_npu: positions in the fixed KV buffer (prompt + generated)
    soc_model: str = "60"  # static_npu: QNN soc_model (fp16 precision on HTP needs one)

    def architecture(self) -> str:
        return self.arch or DEFAULT_ARCH[self.preset]


def check_spec(spec: SynthSpec) -> None:
    if spec.preset not in PRESETS:
        raise UsageError(f"--preset {spec.preset!r} is unknown", f"use one of: {', '.join(PRESETS)}")
    if spec.architecture() not in ARCHITECTURES:
        raise UsageError(f"--arch {spec.arch!r} is unknown", f"use one of: {', '.join(ARCHITECTURES)}")
    if spec.precision not in PRECISIONS:
        raise UsageError(f"--precision {spec.precision!r} is unknown", f"use one of: {', '.join(PRECISIONS)}")
    if spec.static_npu and not 1 < spec.prompt_length < spec.kv_length:
        raise UsageError(
            f"--prompt-length {spec.prompt_length} must be above 1 and below --kv-length {spec.kv_length}",
            "the context stage takes S > 1 tokens; the KV buffer must hold the prompt and the generated tokens",
        )


def _require_synth_extra() -> None:
    from winml_perf.support.optional import require

    require("`winml bundle synth`", "torch", "transformers", "tokenizers", "safetensors", "onnx", "onnx_ir")


def _corpus(seed: int, n_lines: int = 4000) -> list[str]:
    import random

    rng = random.Random(seed)
    lines = []
    for _ in range(n_lines):
        words = ["".join(rng.choice(_WORD_PARTS) for _ in range(rng.randint(1, 3))) for _ in range(rng.randint(4, 14))]
        lines.append(" ".join(words).capitalize() + rng.choice(".!?,;:") + f" {rng.randint(0, 9999)}")
    return lines


def _write_tokenizer(hf_dir: Path, vocab_size: int, seed: int) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_corpus(seed), trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<s>", eos_token="</s>", pad_token="<pad>", unk_token="<unk>"
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(str(hf_dir))


def make_hf_folder(spec: SynthSpec, hf_dir: Path) -> dict[str, Any]:
    """A random-weight Hugging Face model folder of the preset's shape; returns the config dict."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    shape = {**PRESETS[spec.preset], **spec.overrides}
    if spec.context_length:
        shape["max_position_embeddings"] = spec.context_length
    torch.manual_seed(spec.seed)
    config = AutoConfig.for_model(
        spec.architecture(),
        **shape,
        initializer_range=INIT_RANGE,
        tie_word_embeddings=False,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        torch_dtype="float32",
    )
    model = AutoModelForCausalLM.from_config(config)
    model.save_pretrained(str(hf_dir), safe_serialization=True)
    _write_tokenizer(hf_dir, min(shape["vocab_size"], 32000), spec.seed)
    hf_config: dict[str, Any] = config.to_dict()  # Any where transformers is absent (mypy skips its import)
    return hf_config


def run_builder(hf_dir: Path, out_dir: Path, cache_dir: Path, precision: str, ep: str, extra: list[str]) -> None:
    cmd = [
        sys.executable,
        "-m",
        "onnxruntime_genai.models.builder",
        "-i",
        str(hf_dir),
        "-o",
        str(out_dir),
        "-p",
        precision,
        "-e",
        ep,
        "-c",
        str(cache_dir),
    ]
    if extra:
        cmd += ["--extra_options", *extra]
    result = child.run_command(cmd)
    if not result.ok or not (out_dir / "genai_config.json").exists():
        tail = "\n".join((result.stderr or result.stdout).strip().splitlines()[-15:])
        raise WinmlPerfError(f"onnxruntime-genai's model builder failed (it {result.exit.text}):\n{tail}")


def synthesize(spec: SynthSpec, out_dir: Path, force: bool = False, log: Callable[[str], None] = print) -> SynthSummary:
    """Make the bundle in ``out_dir``; returns a summary (files, sizes, seconds)."""
    check_spec(spec)
    _require_synth_extra()
    out_dir = Path(out_dir)
    if out_dir.exists() and any(out_dir.iterdir()):
        if not force:
            raise UsageError(
                f"output folder {out_dir} exists and is not empty", "pass --force to replace it, or another -o"
            )
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="winml-synth-") as tmp_name:
        tmp = Path(tmp_name)
        hf_dir, build_dir = tmp / "hf", tmp / "bundle"
        log(f"making a random-weight {spec.architecture()} model of shape {spec.preset} (seed {spec.seed})")
        hf_config = make_hf_folder(spec, hf_dir)
        log(f"building with onnxruntime-genai's model builder (-p {spec.precision} -e {spec.execution_provider})")
        pipeline = spec.pipeline or spec.static_npu
        extra = ["exclude_embeds=true", "exclude_lm_head=true", "filename=transformer.onnx"] if pipeline else []
        run_builder(hf_dir, build_dir, tmp / "cache", spec.precision, spec.execution_provider, extra)
        if pipeline:
            from winml_perf.synth.pipeline import make_pipeline

            make_pipeline(build_dir, hf_dir, hf_config, spec.precision, spec.quantize_lm_head)
        if spec.static_npu:
            from winml_perf.synth.static_npu import make_static

            log(
                f"fixing shapes: context {spec.prompt_length} tokens, iterator 1, KV buffer {spec.kv_length}; both on QNN"
            )
            make_static(build_dir, spec.prompt_length, spec.kv_length, spec.soc_model)
        _write_provenance(build_dir, spec)
        if out_dir.exists():
            shutil.rmtree(out_dir)
        out_dir.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(build_dir), str(out_dir))
    files = {p.name: p.stat().st_size for p in sorted(out_dir.iterdir()) if p.is_file()}
    return {
        "path": str(out_dir),
        "seconds": round(time.perf_counter() - t0, 1),
        "bytes": sum(files.values()),
        "files": files,
    }


def _write_provenance(build_dir: Path, spec: SynthSpec) -> None:
    import onnxruntime_genai as og

    from winml_perf import __version__

    info = {
        "made_by": f"winml-perf {__version__} bundle synth",
        "onnxruntime_genai": og.__version__,
        "preset": spec.preset,
        "arch": spec.architecture(),
        "precision": spec.precision,
        "execution_provider": spec.execution_provider,
        "pipeline": spec.pipeline or spec.static_npu,
        "quantize_lm_head": spec.quantize_lm_head,
        "seed": spec.seed,
        "overrides": spec.overrides,
        "random_weights": True,
    }
    if spec.static_npu:
        info["static_npu"] = {
            "prompt_length": spec.prompt_length,
            "kv_length": spec.kv_length,
            "soc_model": spec.soc_model,
        }
    (build_dir / "synth.json").write_text(json.dumps(info, indent=2) + "\n")
