"""The first phase of `winml perf`: every flag value of the settled request (measure/request.py,
``PerfRequest.at_static_prompt``) checked against the bundle and the machine (``validate_request``),
before any route is resolved or prepared or anything is allocated. Each refusal is exit 2, naming
the flag and the fix.

Sizes: a cell's prompt plus new tokens must fit the bundle's context (``model.context_length``,
else ``search.max_length``), and the memory the longest cell would take (the prompt's ids, and the
KV cache onnxruntime-genai reserves for the whole length) must fit the memory available now.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from winml_perf.support.errors import BundleError, UsageError
from winml_perf.support.json_input import read_json

if TYPE_CHECKING:
    from winml_perf.bundle.config import GenaiConfig

#: Seeds are stored as 64-bit integers and fed to numpy's generator (which refuses negatives).
MAX_SEED = 2**63 - 1
#: Longest timeout a flag may ask for (a year); the OS's waits overflow well past it.
MAX_TIMEOUT_S = 365 * 24 * 3600.0
#: What one prompt token costs besides the KV cache: a Python int in a list, the int32 copy fed.
HOST_BYTES_PER_TOKEN = 64


def available_memory_bytes() -> int:
    import psutil

    return int(psutil.virtual_memory().available)


def _check_timeout(value: float | None, flag: str) -> None:
    if value is None:
        return
    if not (math.isfinite(value) and 0 < value <= MAX_TIMEOUT_S):
        raise UsageError(
            f"{flag} must be a number of seconds above 0 and at most {MAX_TIMEOUT_S:g}, got {value}", f"e.g. {flag} 600"
        )


def _check_common(req: Any) -> None:
    if isinstance(req.seed, bool) or not 0 <= req.seed <= MAX_SEED:
        raise UsageError(f"--seed must be 0 or more (at most {MAX_SEED}), got {req.seed}", "e.g. --seed 0")
    _check_timeout(req.cell_timeout_s, "--cell-timeout")
    _check_timeout(req.compile_timeout_s, "--compile-timeout")
    if req.iterations.adaptive:
        _check_timeout(req.iterations.max_time_s, "--max-time")


def _check_prompt(req: Any, bundle: Path) -> None:
    from winml_perf.session.genai_session import (
        TOKENIZER_REMEDY,
        damaged_tokenizer_file,
        has_chat_template,
        missing_tokenizer_file,
    )

    if req.prompt is not None and not req.prompt.strip():
        raise UsageError(
            "--prompt is empty", "give some text, or drop --prompt for synthetic tokens (--prompt-tokens N)"
        )
    if req.apply_template and req.prompt is None:
        raise UsageError("--apply-template needs --prompt (synthetic tokens have no text to wrap)", "add --prompt TEXT")
    if req.prompt is not None:
        missing = missing_tokenizer_file(bundle)
        if missing:
            raise BundleError(
                f"{bundle} has no {missing}: --prompt needs the bundle's tokenizer",
                "measure with --prompt-tokens N instead (synthetic tokens need no tokenizer)",
            )
        damaged = damaged_tokenizer_file(bundle)
        if damaged:
            raise BundleError(f"{damaged}: --prompt needs the bundle's tokenizer", TOKENIZER_REMEDY)
    if req.apply_template and not has_chat_template(bundle):
        raise BundleError(
            f"{bundle} has no chat template (tokenizer_config.json chat_template, chat_template.jinja "
            "or chat_template.json): --apply-template has nothing to apply",
            "drop --apply-template",
        )


def _check_lengths(req: Any, bundle: Path, prompt_tokens: tuple[int, ...] | None, read: GenaiConfig | None) -> None:
    config = bundle / "genai_config.json"
    doc = read.raw if read is not None else read_json(config)
    longest_prompt = max(prompt_tokens) if prompt_tokens else 1  # a text prompt's length is known only once encoded
    check_fits(doc, config, longest_prompt, max(req.max_new_tokens), prompt_given=bool(prompt_tokens))


def check_fits(
    doc: Any, config: Path, longest_prompt: int, longest_new: int, *, prompt_given: bool = True, in_flight: int = 1
) -> None:
    """The longest request (``longest_prompt`` + ``longest_new`` tokens) must fit the bundle's context
    (``doc``: its genai_config.json, read from ``config``), and ``in_flight`` of them at once (`winml
    serve --concurrency`) the memory available now; else exit 2 naming the flags."""
    from winml_perf.session.genai_session import token_facts

    facts = token_facts(doc, config)
    if facts.context_length:
        if longest_prompt + longest_new > facts.context_length:
            flags = "--prompt-tokens + --max-new-tokens" if prompt_given else "--max-new-tokens (+ the prompt)"
            model = doc.get("model") if isinstance(doc, dict) else None
            key = (
                "model.context_length"
                if isinstance(model, dict) and model.get("context_length")
                else "search.max_length"
            )
            raise UsageError(
                f"{flags} = {longest_prompt} + {longest_new} exceeds the bundle's context of "
                f"{facts.context_length} tokens ({key} = {facts.context_length} in {config})",
                f"keep the sum at or under {facts.context_length}, or raise {key} if the model allows it",
            )
    need = in_flight * (longest_prompt + longest_new) * (HOST_BYTES_PER_TOKEN + facts.kv_bytes_per_token)
    free = available_memory_bytes()
    if need > free:
        each = f"--prompt-tokens {longest_prompt} with --max-new-tokens {longest_new}"
        asked = f"--concurrency {in_flight} requests in flight, each {each}," if in_flight > 1 else each
        raise UsageError(
            f"{asked} would need about "
            f"{need / 2**30:.1f} GiB, more than the {free / 2**30:.1f} GiB of memory available",
            "ask for fewer tokens" + (" or a lower --concurrency" if in_flight > 1 else ""),
        )


def validate_request(req: Any, default_prompt_tokens: tuple[int, ...], config: GenaiConfig | None = None) -> None:
    """Refuse (exit 2) any flag value that cannot work with this bundle on this machine.

    ``req`` is a measure/request.PerfRequest; ``default_prompt_tokens`` what a synthetic prompt gets
    when --prompt-tokens is not given (the runtime is the request's, named once: ``req.token_based``).
    ``config``: the bundle's genai_config.json as the run read it (else read here).
    A plain ONNX model's inputs are checked once its routes are resolved (measure/prepare.py)."""
    _check_common(req)
    if not req.token_based:
        return
    bundle = Path(req.path)
    _check_prompt(req, bundle)
    prompt_tokens = req.prompt_tokens or (None if req.prompt is not None else default_prompt_tokens)
    _check_lengths(req, bundle, prompt_tokens, config)
    _check_modules(req)


def _check_modules(req: Any) -> None:
    """Before anything is prepared: the optional modules this run's features import (exit 2 naming pip)."""
    from winml_perf.equivalence.attach import wants_equivalence
    from winml_perf.support.optional import require

    if wants_equivalence(req.equivalence, len(req.routes), req.reference_bundle or req.reference_route):
        require("the equivalence check (on with 2+ routes or a reference; --no-equivalence turns it off)", "onnx")


def reference_bundle(path: Path | None, equivalence: bool | None, token_based: bool, bundle: Path) -> Path | None:
    """--reference-bundle: a genai bundle folder, with the equivalence check on; else exit 2."""
    if path is None:
        return None
    if equivalence is False or not token_based:
        raise UsageError(
            "--reference-bundle needs the equivalence check of a genai bundle",
            "drop --no-equivalence (or --runtime winml), or drop --reference-bundle",
        )
    if not (path / "genai_config.json").is_file():
        raise UsageError(
            f"--reference-bundle {path}: no genai_config.json there", "pass a bundle folder with the same tokenizer"
        )
    check_same_vocabulary(bundle, path)
    return path


def _vocab_size(folder: Path) -> object:
    config = read_json(folder / "genai_config.json", UsageError)
    return ((config or {}).get("model") or {}).get("vocab_size") if isinstance(config, dict) else None


def _tokenizer(folder: Path) -> object:
    path = folder / "tokenizer.json"
    if not path.is_file():
        return None
    doc = read_json(path, UsageError)
    return (doc.get("model"), doc.get("added_tokens")) if isinstance(doc, dict) else doc


def check_same_vocabulary(bundle: Path, reference: Path | None) -> None:
    """--reference-bundle must speak the bundle's language: the same vocabulary size and tokenizer,
    else its token ids mean other words and no comparison of logits is a judgement (exit 2, naming both)."""
    if reference is None or not (bundle / "genai_config.json").is_file():
        return
    mine, theirs = _vocab_size(bundle), _vocab_size(reference)
    if mine != theirs:
        raise UsageError(
            f"--reference-bundle {reference} has vocab_size {theirs}, but {bundle} has {mine}: "
            "their token ids mean different words",
            "pass a reference bundle of the same model family (same tokenizer and vocabulary)",
        )
    if _tokenizer(bundle) != _tokenizer(reference):
        raise UsageError(
            f"--reference-bundle {reference} has another tokenizer than {bundle} (tokenizer.json differs)",
            "pass a reference bundle with the same tokenizer",
        )
