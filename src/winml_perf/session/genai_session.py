"""GenaiSession: an onnxruntime-genai model loaded for timed, fixed-length greedy generation."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Sequence

import numpy as np

from winml_perf.errors import BenchmarkFailure, BundleError, EPUnavailableError
from winml_perf.model.sample import GenerationTiming

_CHAT_TEMPLATE_FILES = ("tokenizer_config.json", "chat_template.jinja", "chat_template.json")


def _explain_load_error(bundle: Path, exc: Exception) -> Exception:
    """Turn onnxruntime-genai's load errors into messages that say what to do."""
    text = str(exc)
    patterns = (
        (r"Cuda interface not available", "CUDA (onnxruntime-genai-cuda is not installed)"),
        (r"(\w+) execution provider is not supported in this build", None),
        (r"DML provider requested", "DML (this onnxruntime-genai build has no DirectML)"),
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

    def __init__(self, bundle: str | Path) -> None:
        self.bundle = Path(bundle)
        self._model = None
        self._tokenizer = None
        self.load_ms: float | None = None
        cfg = json.loads((self.bundle / "genai_config.json").read_text())
        model = cfg.get("model", {})
        self.vocab_size = int(model.get("vocab_size") or 0)
        self.context_length = int(model.get("context_length") or cfg.get("search", {}).get("max_length") or 0)
        eos = model.get("eos_token_id", [])
        self.eos_token_ids = set(eos if isinstance(eos, list) else [eos])
        for key in ("bos_token_id", "pad_token_id"):
            if isinstance(model.get(key), int):
                self.eos_token_ids.add(model[key])

    # -- lifecycle -----------------------------------------------------------------------------
    def load(self) -> "GenaiSession":
        if self._model is not None:
            return self
        import onnxruntime_genai as og

        t0 = time.perf_counter()
        try:
            config = og.Config(str(self.bundle))
            self._model = og.Model(config)
            self._tokenizer = og.Tokenizer(self._model)
        except Exception as exc:  # onnxruntime-genai raises RuntimeError / OrtException
            self._model = None
            raise _explain_load_error(self.bundle, exc) from exc
        self.load_ms = (time.perf_counter() - t0) * 1000.0
        return self

    def unload(self) -> None:
        self._tokenizer = None
        self._model = None

    def __enter__(self) -> "GenaiSession":
        return self.load()

    def __exit__(self, *exc: object) -> None:
        self.unload()

    @property
    def loaded(self) -> bool:
        return self._model is not None

    def _require_loaded(self):
        if self._model is None:
            raise RuntimeError("GenaiSession is not loaded; call load() or use it as a context manager")
        return self._model

    # -- prompts ---------------------------------------------------------------------------------
    def encode(self, text: str) -> list[int]:
        self._require_loaded()
        return [int(t) for t in self._tokenizer.encode(text)]

    def decode(self, ids: Sequence[int]) -> str:
        self._require_loaded()
        return self._tokenizer.decode(np.asarray(ids, dtype=np.int32))

    def has_chat_template(self) -> bool:
        tc = self.bundle / "tokenizer_config.json"
        if tc.exists():
            try:
                if json.loads(tc.read_text()).get("chat_template"):
                    return True
            except json.JSONDecodeError:
                return False
        return any((self.bundle / f).exists() for f in _CHAT_TEMPLATE_FILES[1:])

    def apply_chat_template(self, text: str) -> str:
        self._require_loaded()
        messages = json.dumps([{"role": "user", "content": text}])
        return self._tokenizer.apply_chat_template(messages, add_generation_prompt=True)

    def synthetic_prompt(self, n_tokens: int, seed: int = 0) -> list[int]:
        """``n_tokens`` deterministic ordinary token ids (no special tokens), for --prompt-tokens."""
        high = self.vocab_size or 512
        rng = np.random.default_rng(seed)
        ids: list[int] = []
        while len(ids) < n_tokens:
            for t in rng.integers(low=min(10, high - 1), high=high, size=n_tokens):
                if int(t) not in self.eos_token_ids:
                    ids.append(int(t))
        return ids[:n_tokens]

    # -- measurement -----------------------------------------------------------------------------
    def generate_timed(self, prompt_ids: Sequence[int], max_new_tokens: int) -> GenerationTiming:
        """One greedy generation of exactly ``max_new_tokens`` tokens after ``prompt_ids``.

        The loop holds nothing but the onnxruntime-genai calls and ``perf_counter``; the token
        count is checked after the clock stops.
        """
        import onnxruntime_genai as og

        model = self._require_loaded()
        n_prompt = len(prompt_ids)
        if n_prompt == 0 or max_new_tokens <= 0:
            raise ValueError("generate_timed needs at least one prompt token and one new token")
        total = n_prompt + max_new_tokens
        params = og.GeneratorParams(model)
        params.set_search_options(max_length=total, min_length=total, do_sample=False)
        generator = og.Generator(model, params)
        tokens = np.asarray(prompt_ids, dtype=np.int32)
        steps = [0.0] * (max_new_tokens - 1)
        clock = time.perf_counter

        try:  # zero-cost in CPython 3.11+ while nothing is raised
            t0 = clock()
            generator.append_tokens(tokens)
            t1 = clock()
            generator.generate_next_token()
            t2 = clock()
            prev = t2
            for i in range(max_new_tokens - 1):
                generator.generate_next_token()
                now = clock()
                steps[i] = now - prev
                prev = now
            t_end = prev
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
            e2e_ms=(t_end - t0) * 1000.0,
            token_ids=tuple(sequence[n_prompt:]),
        )
