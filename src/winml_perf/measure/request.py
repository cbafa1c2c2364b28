"""PerfRequest: what one `winml perf` run asks, as commands/perf_request.py builds it from the flags,
and settled at a bundle's static prompt length (``at_static_prompt``) before anything else.

The request is read by measure/orchestrate.py (which wires the run), measure/validate.py (its flag
values against the bundle and machine) and measure/prepare.py (each resolved route made ready).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from winml_perf.ep.route_request import RouteRequest
from winml_perf.model.defaults import DEFAULTS
from winml_perf.model.runtime import GENAI, Runtime, runtime_named
from winml_perf.model.spec import IterationPolicy, WarmupPolicy
from winml_perf.session.onnx_options import DEFAULT_GRAPH_OPT
from winml_perf.support.text_table import say

if TYPE_CHECKING:
    from winml_perf.bundle.config import ConfigBook, GenaiConfig


@dataclass(frozen=True)
class PerfRequest:
    path: Path
    runtime: str = GENAI.name
    routes: tuple[RouteRequest, ...] = (RouteRequest(),)
    ep_libraries: tuple[str, ...] = ()
    ep_options: tuple[tuple[str, str], ...] = ()  # --ep-option, under each route's own options
    compile: bool = False
    compile_timeout_s: float = DEFAULTS.compile_timeout_s
    verify_sources: bool = False
    prompt: str | None = None
    apply_template: bool = False
    prompt_tokens: tuple[int, ...] | None = None
    max_new_tokens: tuple[int, ...] = (32,)
    warmup: WarmupPolicy = WarmupPolicy()
    iterations: IterationPolicy = IterationPolicy(iterations=5)
    rounds: int | None = None
    isolate: bool | None = None
    cell_timeout_s: float | None = None
    seed: int = 0
    quiet: bool = False
    store: str | None = None
    no_store: bool = False
    check_outputs: bool = False
    equivalence: bool | None = None  # teacher-forced equivalence; None: on with 2+ routes or a reference bundle
    equivalence_cache: bool = True  # reuse verdicts judged before on the same content (equivalence/verdict_cache.py)
    reference_bundle: Path | None = None  # --reference-bundle: judge every route against this bundle
    reference_route: str | None = None  # --reference ROUTE: judge every other route against this one of the run's
    perplexity: Path | None = None  # --perplexity: each route's perplexity over this text (equivalence/perplexity.py)
    perplexity_chunk: int = 512  # --perplexity-chunk N: tokens per chunk
    strict: bool = False
    allow_uncompiled: bool = False  # --compile: measure a failed compile's route, labelled (uncompiled)
    no_recompile: bool = False  # --compile / --prepare: use what was prepared or refuse (exit 2); never compile here
    onnx_options: dict[str, Any] = field(default_factory=dict)
    prepare_model: bool = False
    explain: bool = False
    series: str | None = None  # --series NAME: the series the records belong to, in place of the bundle's path

    @cached_property
    def runtime_value(self) -> Runtime:
        """The runtime ``runtime`` names, named once a request (UsageError for an unknown name)."""
        return runtime_named(self.runtime)

    @cached_property
    def token_based(self) -> bool:
        """A genai bundle (token-based), not a plain ONNX model."""
        return self.runtime_value.token_based

    @property
    def graph_optimization_level(self) -> str:
        """A plain ONNX model's graph optimisation level: the short name ``options_from_flags`` parsed
        from the flag where the request was made (session/onnx_options.py), else onnxruntime's default."""
        return self.onnx_options.get("graph_optimization_level") or DEFAULT_GRAPH_OPT

    def at_static_prompt(self, configs: ConfigBook) -> PerfRequest:
        """A bundle with a static prompt length S (its genai config read through the run's ``configs``,
        its bundle errors first) is measured at S when no --prompt-tokens is given (a note on stderr
        says so; a --prompt text is fitted to S tokens, as to any --prompt-tokens), and takes only
        --prompt-tokens S when one is; exit 2 naming the stage otherwise
        (GenaiConfig.static_prompt, the rule `serve` and `tune` follow too)."""
        if not self.token_based:
            return self
        config: GenaiConfig = configs.of(self.path)
        static = config.static_prompt(self.prompt_tokens)
        if static is None or self.prompt_tokens is not None:
            return self
        stage, length = static
        fitted = " (the --prompt text tiled or cut to it)" if self.prompt is not None else ""
        say(
            f"note: stage `{stage}` of {self.path} has a static prompt length of {length} tokens: measuring at"
            f" --prompt-tokens {length}{fitted}"
        )
        return replace(self, prompt_tokens=(length,))
