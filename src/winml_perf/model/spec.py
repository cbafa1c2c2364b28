"""What to measure: frozen, picklable specs of a session, a prompt, policies, routes and cells.

A *route* is one way to run a bundle (config, ep=cpu, device=gpu, ...) already resolved and
prepared by the caller into a folder to load. A *cell* is one route at one shape
(prompt tokens x new tokens). ``expand_sweep`` forms the Cartesian product.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from winml_perf.model import metrics
from winml_perf.model.defaults import DEFAULTS
from winml_perf.model.route import Route
from winml_perf.model.runtime import GENAI, runtime_named
from winml_perf.support.errors import UsageError


@dataclass(frozen=True)
class SessionSpec:
    """How to open a session, in any process: the runtime, the folder/model to load, plugin EP
    libraries to register first ('NAME=PATH'), and runtime options."""

    runtime: str
    path: str
    plugin_libraries: tuple[str, ...] = ()
    options: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        runtime_named(self.runtime)  # a UsageError for an unknown name
        object.__setattr__(self, "path", str(self.path))
        object.__setattr__(self, "plugin_libraries", tuple(self.plugin_libraries))
        object.__setattr__(self, "options", dict(self.options))

    @property
    def token_based(self) -> bool:
        return runtime_named(self.runtime).token_based

    def to_dict(self) -> dict[str, Any]:
        return {
            "runtime": self.runtime,
            "path": self.path,
            "plugin_libraries": list(self.plugin_libraries),
            "options": dict(self.options),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SessionSpec:
        return cls(d["runtime"], d["path"], tuple(d.get("plugin_libraries", ())), dict(d.get("options", {})))


@dataclass(frozen=True)
class PromptSpec:
    """The prompt fed each iteration: ``text`` (optionally through the chat template, then tiled or
    cut to the cell's prompt_tokens when that is set) or, when ``text`` is None, ``n`` synthetic
    ordinary tokens drawn with ``seed``."""

    text: str | None = None
    apply_template: bool = False
    seed: int = 0

    @property
    def mode(self) -> str:
        return "synthetic" if self.text is None else "text"

    def to_dict(self) -> dict[str, Any]:
        return {"mode": self.mode, "text": self.text, "apply_template": self.apply_template, "seed": self.seed}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PromptSpec:
        return cls(d.get("text"), bool(d.get("apply_template", False)), int(d.get("seed", 0)))


@dataclass(frozen=True)
class WarmupPolicy:
    """Iterations run and discarded before measuring.

    ``mode='count'``: exactly ``count``. ``mode='settle'``: at least ``count``, then until the last
    ``settle_window`` times lie within ``settle_tolerance_pct`` of their median, at most ``max_count``.
    ``per_batch``: discarded iterations at the start of each later batch of an interleaved sweep.
    """

    mode: Literal["count", "settle"] = "count"
    count: int = DEFAULTS.warmup
    max_count: int = DEFAULTS.warmup_max
    settle_window: int = DEFAULTS.settle_window
    settle_tolerance_pct: float = DEFAULTS.settle_tolerance_pct
    per_batch: int = 0

    def __post_init__(self) -> None:
        if self.mode not in ("count", "settle"):
            raise UsageError(f"unknown warmup mode {self.mode!r}", "use --warmup N or --warmup auto")
        if self.count < 0 or self.per_batch < 0 or self.max_count < self.count:
            raise UsageError(f"--warmup: counts must be >= 0 and max >= count (got {self.count}, max {self.max_count})")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> WarmupPolicy:
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})


@dataclass(frozen=True)
class IterationPolicy:
    """Measured repetitions at two levels (Kalibera & Jones 2013): ``invocations`` (a fresh process
    and model load each) x iterations in each.

    Fixed: exactly ``invocations`` x ``iterations``. Adaptive when ``target_ci_pct`` is set: until
    the 95 % CI of the median of the primary metric is within ±target_ci_pct, with at least
    ``min_iterations`` in each invocation and at least ``invocations`` invocations; the rule picks
    another iteration or another invocation by the variance at each level (measure/stopping.py); caps:
    ``max_iterations`` (all invocations together), ``max_invocations`` and ``max_time_s`` (time
    charged to the cell: loads, warmups and iterations). ``max_invocations`` 1 is the
    within-process rule (one invocation, its interval covers that process only)."""

    iterations: int = DEFAULTS.iterations
    target_ci_pct: float | None = None
    min_iterations: int = DEFAULTS.min_iterations
    max_iterations: int = DEFAULTS.max_iterations
    max_time_s: float = DEFAULTS.max_time_s
    # One process unless asked: in-process callers (tests, benchmarks, a child host) build policies
    # without the command line, which asks for DEFAULTS.invocations.
    invocations: int = 1
    max_invocations: int = 1
    duration_s: float | None = None  # a sustained run: generate until this much measured time has passed

    def __post_init__(self) -> None:
        if self.invocations < 1:
            raise UsageError(f"--invocations must be >= 1, got {self.invocations}", "pass --invocations 1 or more")
        if self.duration_s is not None and not self.duration_s > 0:
            raise UsageError(f"--duration must be longer than 0 s, got {self.duration_s}")
        if self.target_ci_pct is None:
            if self.iterations < 1:
                raise UsageError(f"--iterations must be >= 1, got {self.iterations}")
        else:
            if not self.target_ci_pct > 0:
                raise UsageError(f"--target-ci must be > 0 %, got {self.target_ci_pct}")
            if self.min_iterations < 1 or self.max_iterations < self.min_iterations:
                raise UsageError(
                    f"--min-iterations {self.min_iterations} / --max-iterations {self.max_iterations}: need 1 <= min <= max"
                )
            if not self.max_time_s > 0:
                raise UsageError(f"--max-time must be > 0 s, got {self.max_time_s}")
            if self.max_invocations < self.invocations:
                raise UsageError(
                    f"--max-invocations {self.max_invocations} is below --invocations {self.invocations}",
                    "pass --max-invocations at least --invocations",
                )

    @property
    def adaptive(self) -> bool:
        return self.target_ci_pct is not None

    @property
    def multi_invocation(self) -> bool:
        """Whether more than one invocation may run (then every invocation is a fresh session)."""
        return (self.max_invocations if self.adaptive else self.invocations) > 1

    @classmethod
    def fixed(cls, n: int, invocations: int = 1) -> IterationPolicy:
        return cls(iterations=n, invocations=invocations)

    @classmethod
    def until_ci(
        cls,
        target_pct: float,
        min_iterations: int = DEFAULTS.min_iterations,
        max_iterations: int = DEFAULTS.max_iterations,
        max_time_s: float = DEFAULTS.max_time_s,
        invocations: int = 1,
        max_invocations: int = 1,
    ) -> IterationPolicy:
        return cls(
            target_ci_pct=target_pct,
            min_iterations=min_iterations,
            max_iterations=max_iterations,
            max_time_s=max_time_s,
            invocations=invocations,
            max_invocations=max_invocations,
        )

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["mode"] = "adaptive" if self.adaptive else "fixed"
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> IterationPolicy:
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})


def _route_for(label: str, route: Route | None) -> Route:
    """``route``, or a bare Route named ``label`` when none was prepared; its label must be ``label``."""
    if route is None:
        return Route(label)
    if route.label != label:
        raise ValueError(f"route labelled {route.label!r} given for {label!r}")
    return route


@dataclass(frozen=True)
class RouteSpec:
    """One prepared route: its label ('config', 'ep=cpu', ...), the session to open, the Route to
    record (asked / resolved / per-stage; a bare Route(label) when none is given), the source
    bundle, and the prepare/compile time spent making it."""

    label: str
    session: SessionSpec
    route: Route | None = None
    bundle: str = ""
    prepare_ms: float | None = None
    compile_ms: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "route", _route_for(self.label, self.route))
        object.__setattr__(self, "bundle", str(self.bundle or self.session.path))

    @property
    def recorded_route(self) -> Route:
        """``route``: never None once built (a bare Route named by the label when none was given)."""
        assert self.route is not None  # __post_init__ sets it
        return self.route

    @classmethod
    def from_route(
        cls,
        route: Route,
        bundle: str,
        runtime: str = GENAI.name,
        plugin_libraries: Sequence[str] = (),
        options: Mapping[str, Any] | None = None,
    ) -> RouteSpec:
        """From a Route prepared by bundle.prepare.prepare_route: its session loads ``route.path``."""
        return cls(
            route.label,
            SessionSpec(runtime, str(route.path), tuple(plugin_libraries), dict(options or {})),
            route=route,
            bundle=str(bundle),
            prepare_ms=route.prepare_ms,
            compile_ms=route.compile_ms,
        )


@dataclass(frozen=True)
class CellSpec:
    """One route at one shape, with the policies that say how to measure it."""

    route_label: str
    session: SessionSpec
    prompt_tokens: int | None = None
    max_new_tokens: int | None = None
    prompt: PromptSpec = PromptSpec()
    warmup: WarmupPolicy = WarmupPolicy()
    iterations: IterationPolicy = IterationPolicy()
    cell_timeout_s: float | None = None
    route: Route | None = None
    bundle: str = ""
    prepare_ms: float | None = None
    compile_ms: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "route", _route_for(self.route_label, self.route))
        object.__setattr__(self, "bundle", str(self.bundle or self.session.path))
        if self.session.token_based:
            if self.max_new_tokens is None or self.max_new_tokens < 1:
                raise UsageError(f"--max-new-tokens must be >= 1, got {self.max_new_tokens}")
            if self.prompt.text is None and (self.prompt_tokens is None or self.prompt_tokens < 1):
                raise UsageError(f"--prompt-tokens must be >= 1, got {self.prompt_tokens}")
        if self.cell_timeout_s is not None and not self.cell_timeout_s > 0:
            raise UsageError(f"--cell-timeout must be > 0 s, got {self.cell_timeout_s}")

    @property
    def recorded_route(self) -> Route:
        """``route``: never None once built (a bare Route named by the label when none was given)."""
        assert self.route is not None  # __post_init__ sets it
        return self.route

    @property
    def shape_key(self) -> tuple[int | None, int | None, PromptSpec]:
        """Cells with the same shape key (and different routes) are interleaved together."""
        return (self.prompt_tokens, self.max_new_tokens, self.prompt)

    @property
    def key(self) -> str:
        """Readable unique key within a sweep: route|p<prompt>|n<new>."""
        shape = "".join(f"|{k}{v}" for k, v in (("p", self.prompt_tokens), ("n", self.max_new_tokens)) if v is not None)
        return f"{self.route_label}{shape}"

    @property
    def primary_metric(self) -> str:
        """The metric the adaptive stopping rule and the variation warning look at."""
        return metrics.primary_metric(self.session.token_based, self.max_new_tokens)


def _positive_ints(values: Sequence[int] | None, flag: str) -> list[int | None]:
    if values is None:
        return [None]
    out: list[int | None] = list(values)
    if not out:
        raise UsageError(f"{flag} got an empty list", f"give at least one value, e.g. {flag} 128")
    for v in out:
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise UsageError(f"{flag}: {v!r} is not a positive whole number", f"e.g. {flag} 16,128,512")
    if len(set(out)) != len(out):
        raise UsageError(f"{flag}: repeated value in {out}", "list each value once")
    return out


#: More cells than this in one `winml perf` is a typo until --large-sweep says otherwise.
MAX_SWEEP_CELLS = 1000


def expand_sweep(
    routes: Sequence[RouteSpec],
    prompt_tokens: Sequence[int] | None,
    max_new_tokens: Sequence[int] | None,
    *,
    prompt: PromptSpec = PromptSpec(),
    warmup: WarmupPolicy = WarmupPolicy(),
    iterations: IterationPolicy = IterationPolicy(),
    cell_timeout_s: float | None = None,
) -> list[CellSpec]:
    """The Cartesian product routes x prompt_tokens x max_new_tokens, shape-major
    (for each prompt length, for each new-token count, every route).
    ``None`` for a shape axis means "not applicable" (plain ONNX models; text prompts)."""
    if not routes:
        raise UsageError("no route to measure", "give at least one --route (default: config)")
    labels = [r.label for r in routes]
    dupes = sorted({x for x in labels if labels.count(x) > 1})
    if dupes:
        raise UsageError(f"--route given twice: {', '.join(dupes)}", "list each route once")
    ps = _positive_ints(prompt_tokens, "--prompt-tokens")
    ns = _positive_ints(max_new_tokens, "--max-new-tokens")
    cells = []
    for p in ps:
        for n in ns:
            for r in routes:
                cells.append(
                    CellSpec(
                        route_label=r.label,
                        session=r.session,
                        prompt_tokens=p,
                        max_new_tokens=n,
                        prompt=prompt,
                        warmup=warmup,
                        iterations=iterations,
                        cell_timeout_s=cell_timeout_s,
                        route=r.route,
                        bundle=r.bundle,
                        prepare_ms=r.prepare_ms,
                        compile_ms=r.compile_ms,
                    )
                )
    return cells


def finite_or_none(x: float | None) -> float | None:
    """JSON has no NaN: NaN and infinities become None."""
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else None


def check_sweep_size(routes: int, prompts: tuple[int, ...], news: tuple[int, ...], allowed: bool) -> None:
    """A sweep over MAX_SWEEP_CELLS cells is a typo until --large-sweep says otherwise (exit 2, before any work)."""
    cells = routes * max(1, len(prompts)) * max(1, len(news))
    if cells > MAX_SWEEP_CELLS and not allowed:
        raise UsageError(
            f"the sweep has {cells:,} cells ({routes} route(s) x {max(1, len(prompts))} prompt length(s) x "
            f"{max(1, len(news))} new-token count(s)), over the limit of {MAX_SWEEP_CELLS:,}",
            "sweep fewer values, or pass --large-sweep to run it anyway",
        )
