"""A route as it is planned, prepared, measured and recorded: ``Route``, its ``StageRoute``s and their
``StagePlacement``, the compile outcomes and the output check.

Producers (bundle/prepare.py for genai bundles, measure/orchestrate.py for plain ONNX models) build a
``Route`` once; everyone downstream reads attributes. ``to_dict``/``from_dict`` are the record's JSON
edge: they write and read exactly the route section of a cell record (schemas/record.schema.json).
A section that was not recorded is left out of the JSON rather than written as null, so a route read
back from JSON writes the same JSON again.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import Path
from typing import Any, cast

from winml_perf.model.equivalence import Equivalence
from winml_perf.model.output_equivalence import OutputEquivalence, route_equivalence_from_dict
from winml_perf.model.perplexity import Perplexity

CPU = "CPUExecutionProvider"
#: StagePlacement.status: the session was created / could not be created / the EP is not in this process.
OK, ERROR, UNAVAILABLE = "ok", "error", "unavailable"
#: Route.kind: what the prepare step made of the route (it decides which keys the record carries).
BUNDLE, MODEL = "bundle", "model"


def _tuple(values: Any) -> tuple[Any, ...]:
    return tuple(values or ())


def _str(path: Path | None) -> str | None:
    return None if path is None else str(path)


@dataclass(frozen=True)
class StagePlacement:
    """Where one stage's nodes were placed. ``ep`` is the EP asked (canonical name, or as written)."""

    stage: str
    files: tuple[str, ...]
    ep: str
    status: str  # OK | ERROR | UNAVAILABLE
    nodes_per_ep: Mapping[str, int] = field(default_factory=dict)
    op_types_per_ep: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    providers: tuple[str, ...] = ()
    session_ms: float | None = None
    error: str | None = None

    @property
    def nodes(self) -> int:
        return sum(self.nodes_per_ep.values())

    @property
    def cpu_fallback_ops(self) -> dict[str, int]:
        """Op types (with node counts) placed on CPU although another EP was asked."""
        return {} if self.ep == CPU else dict(sorted(self.op_types_per_ep.get(CPU, {}).items()))

    @property
    def cpu_fallback_nodes(self) -> int:
        return 0 if self.ep == CPU else self.nodes_per_ep.get(CPU, 0)

    @property
    def ep_actual(self) -> str | None:
        """The single EP that holds every node, when it is not the EP asked; else None."""
        holders = [k for k, n in self.nodes_per_ep.items() if n > 0]
        return holders[0] if self.status == OK and len(holders) == 1 and holders[0] != self.ep else None

    def nodes_off(self, ep: str) -> dict[str, int]:
        """Nodes per EP other than ``ep`` (those that would not run on it)."""
        return {k: n for k, n in self.nodes_per_ep.items() if k != ep and n}

    def to_dict(self) -> dict[str, Any]:
        return {
            "stage": self.stage,
            "files": list(self.files),
            "ep": self.ep,
            "status": self.status,
            "nodes": self.nodes,
            "nodes_per_ep": dict(self.nodes_per_ep),
            "cpu_fallback_nodes": self.cpu_fallback_nodes,
            "cpu_fallback_ops": self.cpu_fallback_ops,
            "op_types_per_ep": {k: dict(v) for k, v in self.op_types_per_ep.items()},
            "ep_actual": self.ep_actual,
            "providers": list(self.providers),
            "session_ms": self.session_ms,
            "error": self.error,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> StagePlacement:
        return cls(
            d["stage"],
            _tuple(d.get("files")),
            d["ep"],
            d["status"],
            dict(d.get("nodes_per_ep") or {}),
            {k: dict(v) for k, v in (d.get("op_types_per_ep") or {}).items()},
            _tuple(d.get("providers")),
            d.get("session_ms"),
            d.get("error"),
        )


@dataclass(frozen=True)
class StageRoute:
    """One stage of a route: its files and EP before -> after.

    A stage planned from a genai config (``options_source`` set) also records how its provider
    options were rewritten and the stage's pipeline flags; the single stage of a plain ONNX model
    records the four core keys only. ``placement`` is where its nodes ran (forced genai routes).
    """

    stage: str
    files: tuple[str, ...]
    ep_before: str | None  # canonical name, the unknown genai key as written, or None (plain ONNX model)
    ep_after: str | None
    provider_options_before: tuple[dict[str, Any], ...] = ()
    provider_options_after: tuple[dict[str, Any], ...] = ()
    forced: bool = False
    options_source: str | None = None  # "config" | "cpu" | "own" | "borrowed:<stage>" | "default"; None: not planned
    run_on_prompt: bool = True
    run_on_token_gen: bool = True
    is_lm_head: bool = False
    placement: StagePlacement | None = None

    @property
    def planned(self) -> bool:
        """True for a stage of a genai config plan (it carries options and pipeline flags)."""
        return self.options_source is not None

    @property
    def changed(self) -> bool:
        return self.provider_options_before != self.provider_options_after

    @property
    def ep_actual(self) -> str | None:
        """The EP that ran every node of the stage when that is not ``ep_after`` (from its placement)."""
        return self.placement.ep_actual if self.placement is not None else None

    def ran_on(self, actual: Mapping[str, str] | None = None) -> str | None:
        """What ran the stage: the session's report (``actual``: {stage: EP}), else its placement's
        proof, else the EP the route asked."""
        return (actual or {}).get(self.stage) or self.ep_actual or self.ep_after

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "stage": self.stage,
            "files": list(self.files),
            "ep_before": self.ep_before,
            "ep_after": self.ep_after,
        }
        if self.planned:
            d.update(
                {
                    "provider_options_before": copy.deepcopy(list(self.provider_options_before)),
                    "provider_options_after": copy.deepcopy(list(self.provider_options_after)),
                    "forced": self.forced,
                    "options_source": self.options_source,
                    "run_on_prompt": self.run_on_prompt,
                    "run_on_token_gen": self.run_on_token_gen,
                    "is_lm_head": self.is_lm_head,
                }
            )
        if self.placement is not None:
            d["placement"] = self.placement.to_dict()
            if self.ep_actual:
                d["ep_actual"] = self.ep_actual
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> StageRoute:
        placement = d.get("placement")
        return cls(
            d["stage"],
            _tuple(d.get("files")),
            d.get("ep_before"),
            d.get("ep_after"),
            tuple(copy.deepcopy(list(d.get("provider_options_before") or ()))),
            tuple(copy.deepcopy(list(d.get("provider_options_after") or ()))),
            bool(d.get("forced", False)),
            d.get("options_source"),
            bool(d.get("run_on_prompt", True)),
            bool(d.get("run_on_token_gen", True)),
            bool(d.get("is_lm_head", False)),
            StagePlacement.from_dict(placement) if placement else None,
        )


def with_placements(stages: Sequence[StageRoute], placements: Sequence[StagePlacement]) -> tuple[StageRoute, ...]:
    """The stages, each with its placement from ``placements`` (matched by stage name) when there is one."""
    by_stage = {p.stage: p for p in placements}
    return tuple(replace(s, placement=by_stage[s.stage]) if s.stage in by_stage else s for s in stages)


class CompileStatus(StrEnum):
    """What one EPContext compile job came to (equal to its text, which records hold)."""

    COMPILED = "compiled"
    NOTHING_TO_COMPILE = "nothing to compile"  # the EP claims no node: the stage runs its source model
    FAILED = "failed"
    TIMEOUT = "timeout"
    DISCARDED = "discarded"  # compiled, but not used: another compile of the route failed


#: The statuses of a compile that went wrong: the stage keeps its source model.
COMPILE_FAILURES = (CompileStatus.FAILED, CompileStatus.TIMEOUT)


@dataclass(frozen=True)
class CompileOutcome:
    """What the EPContext compile of one job (a model file shared by ``stages``) came to."""

    stages: tuple[str, ...]
    source: str
    ep: str
    output: str | None  # file in the derived bundle; None when the stage keeps its source model
    status: CompileStatus
    reason: str = ""
    compile_ms: float = 0.0
    compatibility: Mapping[str, Any] | None = (
        None  # bundle.epcontext.compat.Verdict.to_dict(): verdict, source, status, info
    )

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "stages": list(self.stages),
            "source": self.source,
            "ep": self.ep,
            "output": self.output,
            "status": self.status,
            "reason": self.reason,
            "compile_ms": self.compile_ms,
        }
        if self.compatibility is not None:
            d["compatibility"] = dict(self.compatibility)
        return d

    @property
    def compiled_output(self) -> str:
        """``output`` of a compiled outcome: every compiled job writes its file."""
        if self.output is None:
            raise ValueError(f"compile outcome of {self.source} ({self.status}) has no output file")
        return self.output

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> CompileOutcome:
        return cls(
            _tuple(d.get("stages")),
            d["source"],
            d["ep"],
            d.get("output"),
            CompileStatus(d["status"]),
            d.get("reason") or "",
            float(d.get("compile_ms") or 0.0),
            dict(d["compatibility"]) if d.get("compatibility") else None,
        )


@dataclass(frozen=True)
class OutputCheck:
    """--check-outputs: the greedy tokens of the config route and of this route for one fixed prompt."""

    prompt_tokens: int
    new_tokens: int
    seed: int
    config_token_ids: tuple[int, ...]
    route_token_ids: tuple[int, ...]
    first_difference: int | None  # first differing position; None when equal

    @property
    def equal(self) -> bool:
        return self.first_difference is None

    def to_dict(self) -> dict[str, Any]:
        return {
            "prompt_tokens": self.prompt_tokens,
            "new_tokens": self.new_tokens,
            "seed": self.seed,
            "equal": self.equal,
            "first_difference": self.first_difference,
            "config_token_ids": list(self.config_token_ids),
            "route_token_ids": list(self.route_token_ids),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> OutputCheck:
        return cls(
            cast(int, d.get("prompt_tokens")),
            cast(int, d.get("new_tokens")),
            cast(int, d.get("seed")),
            _tuple(d.get("config_token_ids")),
            _tuple(d.get("route_token_ids")),
            d.get("first_difference"),
        )


@dataclass(frozen=True)
class Route:
    """One route: its label ('config', 'ep=cpu[context]', ...), what was asked and what it became,
    its stages, and what preparing it cost and found.

    ``kind`` says what the prepare step made: ``BUNDLE`` (a genai bundle, loaded from ``path``:
    the bundle itself or a derived bundle, with its cache, compile and placement outcomes) or
    ``MODEL`` (a plain ONNX model; ``prepared`` describes the prepared model, if any). ``None``:
    the route was not prepared here (only its label is recorded).
    """

    label: str
    requested: str | None = None  # the target's label: "config", "ep=cpu", "device=npu"
    effective: str | None = None  # what runs: "config" when nothing moved
    stages: tuple[StageRoute, ...] = ()
    kind: str | None = None
    target: Mapping[str, Any] | None = None  # devices.Target.to_dict(): recorded, not read back into a Target
    plugin_registration_ms: float | None = None
    emulated: tuple[str, ...] = ()  # EPs of this route that ran on an emulator here (QNN's HTP emulator): not NPU speed
    # BUNDLE routes
    path: Path | None = None  # the folder to load
    derived_path: Path | None = None
    cache: str | None = None  # "hit" | "miss" | None
    cache_reason: str | None = None
    prepare_ms: float = 0.0
    compile_ms: float = 0.0
    warnings: tuple[str, ...] = ()
    compile: tuple[CompileOutcome, ...] = ()
    placement_cache: str | None = None  # "hit" | "miss" | None
    placement_reason: str | None = None
    placement_ms: float | None = None
    # MODEL routes
    prepared: Mapping[str, Any] | None = None  # bundle.onnx_prepare.PreparedModel.to_dict(), or None
    # added after preparing
    output_check: OutputCheck | None = None
    equivalence: Equivalence | OutputEquivalence | None = None  # logits (genai) or outputs (plain ONNX): issue 24
    actual: Mapping[str, str] | None = None  # what the session reported ran: {stage: EP} (or {"error": ...})
    aliases: tuple[str, ...] = ()  # other --route labels that resolved to this very route: measured once, as this
    perplexity: Perplexity | None = None  # --perplexity: this route's own perplexity over the text (issue 34)
    perplexity_not_measured: str | None = None  # --perplexity asked, but this route's could not be taken: why

    def __post_init__(self) -> None:
        if self.kind not in (None, BUNDLE, MODEL):
            raise ValueError(f"Route.kind must be {BUNDLE!r}, {MODEL!r} or None, not {self.kind!r}")
        for name in ("stages", "warnings", "compile", "emulated", "aliases"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        for name in ("path", "derived_path"):
            if getattr(self, name) is not None:
                object.__setattr__(self, name, Path(getattr(self, name)))

    @property
    def resolved(self) -> bool:
        """True when the route was resolved (what was asked, what it became, its stages), not only named."""
        return self.requested is not None or bool(self.stages)

    @property
    def runs_as_config(self) -> bool:
        """True for a genai route that loads exactly the config: the config route, or a forced route whose
        plan moved no stage and changed no option (bundle/routing.py) and compiled nothing."""
        compiled = any(c.status == "compiled" for c in self.compile)
        return self.kind == BUNDLE and self.effective == "config" and not compiled

    @property
    def placements(self) -> tuple[StagePlacement, ...]:
        return tuple(s.placement for s in self.stages if s.placement is not None)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"label": self.label}
        stages = [s.to_dict() for s in self.stages]
        if self.kind == BUNDLE:
            d["path"] = _str(self.path)
        if self.resolved:
            d.update({"route": self.effective, "requested": self.requested})
            if self.kind != MODEL:  # a model route lists its stage after the target (the key order records have)
                d["stages"] = stages
        if self.kind == BUNDLE:
            d.update(self._bundle_fields())
        if self.target is not None:
            d["target"] = dict(self.target)
        if self.plugin_registration_ms is not None:
            d["plugin_registration_ms"] = self.plugin_registration_ms
        if self.emulated:
            d["emulated"] = list(self.emulated)
        if self.kind == MODEL:
            if self.resolved:
                d["stages"] = stages
            d["prepared"] = dict(self.prepared) if self.prepared is not None else None
        d.update(self._judgements())
        return d

    def _bundle_fields(self) -> dict[str, Any]:
        """A bundle route's preparation: its derived folder, cache, compile and placement."""
        return {
            "derived_path": _str(self.derived_path),
            "cache": self.cache,
            "cache_reason": self.cache_reason,
            "prepare_ms": self.prepare_ms,
            "compile_ms": self.compile_ms,
            "warnings": list(self.warnings),
            "compile": [c.to_dict() for c in self.compile],
            "placement_cache": self.placement_cache,
            "placement_reason": self.placement_reason,
            "placement_ms": self.placement_ms,
        }

    def _judgements(self) -> dict[str, Any]:
        """What judged the route (output check, equivalence, perplexity) and where it really ran, where known."""
        d: dict[str, Any] = {}
        if self.output_check is not None:
            d["output_check"] = self.output_check.to_dict()
        if self.equivalence is not None:
            d["equivalence"] = self.equivalence.to_dict()
        if self.actual:
            d["actual"] = dict(self.actual)
        if self.aliases:
            d["aliases"] = list(self.aliases)
        if self.perplexity is not None:
            d["perplexity"] = self.perplexity.to_dict()
        if self.perplexity_not_measured is not None:
            d["perplexity_not_measured"] = self.perplexity_not_measured
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Route:
        kind = BUNDLE if "path" in d else MODEL if "prepared" in d else None
        check = d.get("output_check")
        return cls(
            label=d["label"],
            requested=d.get("requested"),
            effective=d.get("route"),
            stages=tuple(StageRoute.from_dict(s) for s in d.get("stages") or ()),
            kind=kind,
            target=dict(d["target"]) if d.get("target") is not None else None,
            plugin_registration_ms=d.get("plugin_registration_ms"),
            emulated=_tuple(d.get("emulated")),
            path=d.get("path"),
            derived_path=d.get("derived_path"),
            cache=d.get("cache"),
            cache_reason=d.get("cache_reason"),
            prepare_ms=d.get("prepare_ms") or 0.0,
            compile_ms=d.get("compile_ms") or 0.0,
            warnings=_tuple(d.get("warnings")),
            compile=tuple(CompileOutcome.from_dict(c) for c in d.get("compile") or ()),
            placement_cache=d.get("placement_cache"),
            placement_reason=d.get("placement_reason"),
            placement_ms=d.get("placement_ms"),
            prepared=dict(d["prepared"]) if d.get("prepared") is not None else None,
            output_check=OutputCheck.from_dict(check) if check else None,
            equivalence=route_equivalence_from_dict(d["equivalence"]) if d.get("equivalence") else None,
            actual=dict(d["actual"]) if d.get("actual") else None,
            aliases=_tuple(d.get("aliases")),
            perplexity=Perplexity.from_dict(d["perplexity"]) if d.get("perplexity") else None,
            perplexity_not_measured=d.get("perplexity_not_measured"),
        )


#: What a route's shown label adds to its label (issue 35): a compiled route and an uncompiled one,
#: or an emulator's timings and a device's, never share a label.
COMPILED_MARK = " (compiled)"
EMULATED_MARK = " (emulated)"


def shown_label(route: Mapping[str, Any] | Route) -> str:
    """A route's label as every listing shows it: its label, `` (compiled)`` when a stage of it ran
    an EPContext model this run compiled, and `` (emulated)`` when an EP of it ran on an emulator
    (not the device's speed). Takes a Route or its record dict (``Route.to_dict()``)."""
    if isinstance(route, Route):
        label = route.label or ""
        compiled = any(c.status == "compiled" for c in route.compile)
        emulated = bool(route.emulated)
    else:
        label = str(route.get("label") or "")
        compiled = any(isinstance(c, Mapping) and c.get("status") == "compiled" for c in route.get("compile") or ())
        emulated = bool(route.get("emulated"))
    if compiled and not label.endswith(COMPILED_MARK):
        label += COMPILED_MARK
    if emulated and not label.endswith(EMULATED_MARK):
        label += EMULATED_MARK
    return label


def bare_label(shown: str) -> str:
    """A shown label without its marks: the label ``--route`` names."""
    for mark in (EMULATED_MARK, COMPILED_MARK):
        shown = shown.removesuffix(mark)
    return shown
