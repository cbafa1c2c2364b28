"""GenaiSession: an onnxruntime-genai model loaded for timed, fixed-length greedy generation."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from winml_perf.ep.table import EPS
from winml_perf.model.sample import GenerationTiming
from winml_perf.support.errors import BenchmarkFailure, BundleError, EPUnavailableError
from winml_perf.support.json_input import read_json

_CHAT_TEMPLATE_FILES = ("tokenizer_config.json", "chat_template.jinja", "chat_template.json")
#: onnxruntime-genai's tokenizer opens tokenizer_config.json, then one of these for the vocabulary.
_TOKENIZER_CONFIG = "tokenizer_config.json"
_VOCAB_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json", "sentencepiece.bpe.model")
TOKENIZER_REMEDY = "restore the tokenizer files, or measure with --prompt-tokens N (synthetic tokens need none)"


@dataclass(frozen=True)
class TokenFacts:
    """What genai_config.json says about token ids and lengths (0: not given)."""

    vocab_size: int
    context_length: int
    special_ids: frozenset[int]
    kv_bytes_per_token: int  # an upper estimate of the KV cache one token costs (fp32), 0 when unknown


def _whole(node: dict[str, Any], key: str, where: Path, default: int = 0) -> int:
    value = node.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise BundleError(f"{where}: {key} is {value!r}, not a whole number of 0 or more", "fix or regenerate the file")
    return value


def token_facts(cfg: object, where: Path) -> TokenFacts:
    """Token facts of a parsed genai_config.json; BundleError (exit 2) for values of the wrong kind."""
    model = cfg.get("model") if isinstance(cfg, dict) else None
    if not isinstance(cfg, dict) or not isinstance(model, dict):
        raise BundleError(f"{where}: key model is missing or not an object", "a genai_config.json needs model.decoder")
    search = cfg.get("search")
    if not isinstance(search, dict):
        search = {}
    context = _whole(model, "context_length", where) or _whole(search, "max_length", where)
    special: set[int] = set()
    for key in ("eos_token_id", "bos_token_id", "pad_token_id"):
        value = model.get(key)
        for v in value if isinstance(value, list) else [value]:
            if isinstance(v, int) and not isinstance(v, bool):
                special.add(v)
            elif v is not None and key == "eos_token_id":
                raise BundleError(
                    f"{where}: model.eos_token_id holds {v!r}, not a token id", "fix or regenerate the file"
                )
    decoder = model.get("decoder")
    if not isinstance(decoder, dict):
        decoder = {}
    layers, heads, head = (_whole(decoder, k, where) for k in ("num_hidden_layers", "num_key_value_heads", "head_size"))
    return TokenFacts(_whole(model, "vocab_size", where), context, frozenset(special), 2 * 4 * layers * heads * head)


def missing_tokenizer_file(bundle: Path) -> str | None:
    """The tokenizer file a text prompt would need and the bundle lacks, or None."""
    if not (bundle / _TOKENIZER_CONFIG).is_file():
        return _TOKENIZER_CONFIG
    if not any((bundle / f).is_file() for f in _VOCAB_FILES):
        return _VOCAB_FILES[0]
    return None


def damaged_tokenizer_file(bundle: Path) -> str | None:
    """What is wrong with a tokenizer file the bundle has (empty, not JSON, not an object), naming
    the file; None when each reads. onnxruntime-genai would fail the cell without naming it."""
    for name in (_TOKENIZER_CONFIG, *_VOCAB_FILES):
        path = bundle / name
        if not path.is_file():
            continue
        if path.stat().st_size == 0:
            return f"{path} is empty (0 bytes)"
        if path.suffix != ".json":
            continue
        try:
            data = read_json(path)
        except BundleError as exc:
            return exc.message
        if not isinstance(data, dict):
            return f"{path} holds a JSON {type(data).__name__}, not the object a tokenizer file is"
    return None


def has_chat_template(bundle: Path) -> bool:
    tc = bundle / _TOKENIZER_CONFIG
    if tc.is_file():
        try:
            data = read_json(tc)
        except BundleError:
            data = None
        if isinstance(data, dict) and data.get("chat_template"):
            return True
    return any((bundle / f).is_file() for f in _CHAT_TEMPLATE_FILES[1:])


def _explain_load_error(bundle: Path, exc: Exception) -> Exception:
    """Turn onnxruntime-genai's load errors into messages that say what to do."""
    text = str(exc)
    patterns = (
        *(info.genai_unavailable for info in EPS.values() if info.genai_unavailable),  # the EP table's
        (r"(\w+) execution provider is not supported in this build", None),
        (r"Unknown provider name '([^']+)'", None),
    )
    for pattern, label in patterns:
        m = re.search(pattern, text)
        if m:
            what = label or m.group(1)
            return EPUnavailableError(
                f"{bundle}: onnxruntime-genai could not load the model: {what} is not available here "
                f"({text.strip().splitlines()[0]})",
                "try --ep cpu, or --device with a device that `winml devices` lists",
            )
    if "Could not determine default backend path" in text:
        return BundleError(
            f"{bundle / 'genai_config.json'}: a stage names QNN without backend_type, so the QNN EP cannot be created "
            f"({text.strip().splitlines()[0][-120:]})",
            'add "backend_type": "htp" to its QNN provider options, or force the route with --ep qnn '
            "(which adds it; --ep-option backend_type=htp to say so)",
        )
    if "does not support provider options" in text:
        return BundleError(
            f"{bundle / 'genai_config.json'}: a stage gives provider options to the CPU EP, which "
            f"onnxruntime-genai rejects ({text.strip().splitlines()[0]})",
            "use an empty provider_options list for CPU stages, or force a route with --ep",
        )
    return BundleError(f"{bundle}: onnxruntime-genai could not load the model: {text.strip()}")


class GenaiSession:
    """Load a bundle once, then run timed greedy generations of an exact length.

    Usable as a context manager: ``with GenaiSession(path) as s: s.generate_timed(ids, 32)``.
    """

    def __init__(self, bundle: str | Path, config: Mapping[str, Any] | None = None) -> None:
        """``config``: the bundle's genai_config.json as parsed (GenaiConfig.raw) where the caller has it
        (a run's ConfigBook); read here otherwise."""
        self.bundle = Path(bundle)
        self._model = None
        self._tokenizer = None
        self.load_ms: float | None = None
        where = self.bundle / "genai_config.json"
        if config is None and not self.bundle.is_dir():  # a run's derived bundle removed by hand mid-run
            raise BundleError(
                f"{self.bundle}: the bundle folder no longer exists",
                "run again: a route's derived bundle (_compiled/) is rebuilt; to remove derived bundles use "
                "`winml bundle clean`, which waits for runs measuring from them",
            )
        facts = token_facts(read_json(where) if config is None else config, where)
        self.vocab_size = facts.vocab_size
        self.context_length = facts.context_length
        self.eos_token_ids = set(facts.special_ids)

    # -- lifecycle -----------------------------------------------------------------------------
    def load(self) -> GenaiSession:
        if self._model is not None:
            return self
        import onnxruntime_genai as og

        t0 = time.perf_counter()
        try:
            config = og.Config(str(self.bundle))
            self._model = og.Model(config)
        except Exception as exc:  # onnxruntime-genai raises RuntimeError / OrtException
            self._model = None
            raise _explain_load_error(self.bundle, exc) from exc
        self.load_ms = (time.perf_counter() - t0) * 1000.0
        return self

    def unload(self) -> None:
        self._tokenizer = None
        self._model = None

    def __enter__(self) -> GenaiSession:
        return self.load()

    def __exit__(self, *exc: object) -> None:
        self.unload()

    @property
    def loaded(self) -> bool:
        return self._model is not None

    def _require_loaded(self) -> Any:
        if self._model is None:
            raise RuntimeError("GenaiSession is not loaded; call load() or use it as a context manager")
        return self._model

    # -- prompts ---------------------------------------------------------------------------------
    def _tokenizer_or_fail(self) -> Any:
        """The tokenizer, made on first use: synthetic token prompts need none (bundles without one)."""
        import onnxruntime_genai as og

        model = self._require_loaded()
        if self._tokenizer is None:
            missing = missing_tokenizer_file(self.bundle)
            if missing:
                raise BundleError(
                    f"{self.bundle} has no {missing}: a text prompt needs the bundle's tokenizer",
                    "measure with --prompt-tokens N (synthetic tokens), or add the tokenizer files",
                )
            damaged = damaged_tokenizer_file(self.bundle)
            if damaged:
                raise BundleError(f"{damaged}: a text prompt needs the bundle's tokenizer", TOKENIZER_REMEDY)
            self._tokenizer = og.Tokenizer(model)
        return self._tokenizer

    def encode(self, text: str) -> list[int]:
        return [int(t) for t in self._tokenizer_or_fail().encode(text)]

    def decode(self, ids: Sequence[int]) -> str:
        return str(self._tokenizer_or_fail().decode(np.asarray(ids, dtype=np.int32)))

    def has_chat_template(self) -> bool:
        return has_chat_template(self.bundle)

    def apply_chat_template(self, text: str) -> str:
        messages = json.dumps([{"role": "user", "content": text}])
        return str(self._tokenizer_or_fail().apply_chat_template(messages, add_generation_prompt=True))

    def synthetic_prompt(self, n_tokens: int, seed: int = 0) -> list[int]:
        """``n_tokens`` deterministic ordinary token ids (no special tokens), for --prompt-tokens."""
        high = self.vocab_size or 512
        low = min(10, high - 1)
        if len({t for t in self.eos_token_ids if low <= t < high}) >= high - low:
            raise BundleError(
                f"{self.bundle / 'genai_config.json'}: vocab_size {high} leaves no ordinary token "
                "for a synthetic prompt",
                "check model.vocab_size and the special token ids",
            )
        rng = np.random.default_rng(seed)
        ids: list[int] = []
        while len(ids) < n_tokens:
            for t in rng.integers(low=min(10, high - 1), high=high, size=n_tokens):
                if int(t) not in self.eos_token_ids:
                    ids.append(int(t))
        return ids[:n_tokens]

    # -- measurement -----------------------------------------------------------------------------
    def generate_timed(
        self, prompt_ids: Sequence[int], max_new_tokens: int, mark: Callable[[], object] | None = None
    ) -> GenerationTiming:
        """One greedy generation of exactly ``max_new_tokens`` tokens after ``prompt_ids``.

        The loop holds nothing but the onnxruntime-genai calls and ``perf_counter``; the token
        count is checked after the clock stops. ``mark`` (an energy meter's read) is called at the
        phase boundaries: before the prompt, after the first token, after the last; the middle
        call's time is left out of the decode steps and of e2e.
        """
        import onnxruntime_genai as og

        model = self._require_loaded()
        n_prompt = len(prompt_ids)
        if n_prompt == 0 or max_new_tokens <= 0:
            raise ValueError("generate_timed needs at least one prompt token and one new token")
        total = n_prompt + max_new_tokens
        clock = time.perf_counter
        t_request = clock()  # a request pays the generator's creation before its prompt (request TTFT)
        params = og.GeneratorParams(model)
        params.set_search_options(max_length=total, min_length=total, do_sample=False)
        generator = og.Generator(model, params)
        tokens = np.asarray(prompt_ids, dtype=np.int32)
        steps = [0.0] * (max_new_tokens - 1)

        try:  # zero-cost in CPython 3.11+ while nothing is raised
            if mark is not None:
                before = clock()
                mark()
                t_request += clock() - before  # nor in the generator's creation
            t0 = clock()
            generator.append_tokens(tokens)
            t1 = clock()
            generator.generate_next_token()
            t2 = clock()
            prev = t2
            if mark is not None:
                mark()
                prev = clock()
            marked = prev - t2  # the mark's time is in no phase (0 without a mark)
            for i in range(max_new_tokens - 1):
                generator.generate_next_token()
                now = clock()
                steps[i] = now - prev
                prev = now
            t_end = prev
            if mark is not None:
                mark()
        except Exception as exc:  # onnxruntime-genai raises RuntimeError with the EP's message
            raise BenchmarkFailure(
                f"{self.bundle}: onnxruntime-genai failed while generating: {str(exc).strip().splitlines()[0]}",
                "the route's EP could not run this model as configured; see the stage table (winml bundle show) "
                "and try another --ep/--stages",
            ) from exc

        sequence = [int(t) for t in generator.get_sequence(0)]
        del generator
        if len(sequence) != total:
            raise BenchmarkFailure(
                f"{self.bundle}: generation produced {len(sequence) - n_prompt} new tokens after "
                f"{n_prompt} prompt tokens, expected exactly {max_new_tokens}",
                "check search.max_length / context_length in genai_config.json",
            )
        if sequence[:n_prompt] != [int(t) for t in prompt_ids]:
            raise BenchmarkFailure(
                f"{self.bundle}: the generator's sequence does not start with the {n_prompt} prompt tokens fed"
            )
        return GenerationTiming(
            prompt_tokens=n_prompt,
            new_tokens=max_new_tokens,
            prompt_ms=(t1 - t0) * 1000.0,
            ttft_ms=(t2 - t0) * 1000.0,
            decode_step_ms=tuple(s * 1000.0 for s in steps),
            e2e_ms=(t_end - t0 - marked) * 1000.0,
            token_ids=tuple(sequence[n_prompt:]),
            generator_ms=(t0 - t_request) * 1000.0,
        )
