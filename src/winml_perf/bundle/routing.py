"""Routing rules as a pure function: (config, target, stages) -> RoutePlan.

Forcing an EP rewrites every chosen stage, flat decoders included:

* cpu: the stage's ``provider_options`` becomes ``[]`` (onnxruntime-genai rejects options for CPU);
* a hardware EP: the stage keeps its own options when it already targeted that EP, else borrows the
  options of another stage that targets it, else gets defaults; an EP whose table entry says so
  (OpenVINO, VitisAI) always gets ``device_type`` from the resolved device (the EP's home device
  when none was asked).

A pipeline's decoder-level ``provider_options`` become ``[]`` (the host) when every stage is forced:
genai takes them for the model's primary device, where it keeps managed inputs such as input_ids.
Measured with WebGPU on an H200: decoder-level WebGPU fails ("Managed input input_ids resides on the
primary device ... the pipeline model embeddings is expecting it to reside elsewhere") whatever the
stages say, while decoder-level ``[]`` with every stage on WebGPU runs; and a decoder-level QNN fails
to load on a machine without QNN even when every stage says ``[]``. With ``--stages`` they stay, and
forced stages that inherited them get their own copy. The plan lists each stage's EP before -> after. No I/O here: availability
of EPs on this machine is checked by ``check_available`` against a set the caller supplies.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from winml_perf.bundle.config import GenaiConfig, Stage
from winml_perf.ep import table as eps
from winml_perf.ep.effective import EffectiveOptions, effective_options
from winml_perf.ep.plugins import refuse_if_skipped
from winml_perf.ep.route_flags import FLAGS, RouteFlags
from winml_perf.model.route import CPU, StageRoute
from winml_perf.support.errors import BundleError, EPUnavailableError, UsageError

if TYPE_CHECKING:
    from winml_perf.ep.devices import Target


@dataclass(frozen=True)
class RoutePlan:
    requested: str  # target label: "config", "ep=cpu", "device=npu"
    route: str  # effective: "config" when nothing changed
    ep: str | None  # forced EP (canonical) or None
    stages: tuple[StageRoute, ...]
    config: GenaiConfig = field(repr=False)  # the rewritten config (the source config at route "config")
    decoder_options_rewritten: bool = False
    warnings: tuple[str, ...] = ()
    options: EffectiveOptions | None = None  # the forced EP's decided options (ep/effective.py); None: config, cpu
    assignment: tuple[tuple[str, str], ...] = ()  # a per-stage route: (stage, canonical EP) as asked; () otherwise
    options_per_ep: tuple[EffectiveOptions, ...] = ()  # a per-stage route: each non-CPU EP's decided options
    #: the EP table's entry of each EP the stages run on (canonical name -> EPInfo; none for an EP the
    #: table lacks), looked up once where the plan is made: what later rooms read of an EP
    entries: Mapping[str, eps.EPInfo] = field(default_factory=dict, repr=False)

    @property
    def changed(self) -> bool:
        """True when the route really moves a stage (a no-op forced route is reported as `config`)."""
        return self.route != "config"

    @property
    def forced(self) -> bool:
        return self.ep is not None or bool(self.assignment)

    @property
    def ep_alias(self) -> str | None:
        """The forced EP's short alias, from its entry (a forced EP is one the table knows: genai needs
        its provider name); None: not forced onto one EP."""
        return self.entries[self.ep].alias if self.ep is not None else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "requested": self.requested,
            "route": self.route,
            "ep": self.ep,
            "stages": [s.to_dict() for s in self.stages],
            "decoder_options_rewritten": self.decoder_options_rewritten,
            "warnings": list(self.warnings),
            "options": self.options.to_dict() if self.options else None,
            **({"assignment": dict(self.assignment)} if self.assignment else {}),
            **({"options_per_ep": {o.ep: o.to_dict() for o in self.options_per_ep}} if self.options_per_ep else {}),
        }


Decide = Callable[[str, "str | None", Mapping[str, str], "str | None"], EffectiveOptions]


def _decide_here_unasked(
    ep: str, device: str | None, asked: Mapping[str, str], device_source: str | None
) -> EffectiveOptions:
    """effective_options without asking this machine (no installed version, no registered names)."""
    return effective_options(ep, device, asked, device_source, version=lambda _ep: None, names=lambda _ep: ())


def plan_route(
    config: GenaiConfig,
    target: Target | None,
    stages: list[str] | tuple[str, ...] | None = None,
    ep_options: dict[str, Any] | None = None,
    decide: Decide = _decide_here_unasked,
    *,
    flags: RouteFlags = FLAGS,
) -> RoutePlan:
    """The rewrite for ``target`` (a devices.Target) over ``stages`` (None: all), with ``ep_options``
    (``--ep-option``) over each forced stage's options and the EP's defaults under them, as ``decide``
    (ep/effective.py) rules. Pure unless ``decide`` asks the machine (bundle/prepare.py's does).
    ``flags``: which flags asked for the route, which its refusals name."""
    kind = getattr(target, "kind", "config")
    if kind == "config":
        if stages:
            raise UsageError(
                "--stages limits a forced route, but no --ep or --device was given",
                "add --ep X or --device D, or drop --stages",
            )
        if ep_options:
            raise UsageError(
                "--ep-option sets options of a forced route, but no --ep or --device was given",
                "add --ep X (the config route runs the bundle's own options), or drop --ep-option",
            )
        return _config_plan(config)
    assert target is not None  # only the config route has no target
    if not target.ep:
        raise UsageError(f"route {target.label} resolved to no execution provider", "pass --ep explicitly")
    chosen = _chosen_stages(config, stages, target.label, flags)
    ep = target.ep  # canonical (a Target's ep is what its EP name resolved to)
    if ep_options:
        if ep == CPU:
            asked_by = flags.part("--ep-option", "';options='")
            raise UsageError(
                f"route {target.label}: EP options ({asked_by}) do not apply to {eps.CPU_TAKES_NO_OPTIONS}: "
                f"{', '.join(sorted(ep_options))}",
                "drop those options, or force an EP that takes options",
            )
    decided = _decided(decide, ep, target, dict(ep_options or {}))
    routes, rewritten, decoder_opts = _forced_routes(config, dict.fromkeys(chosen, ep), {ep: decided})
    plan = RoutePlan(
        target.label,
        target.label,
        ep,
        tuple(routes),
        rewritten,
        decoder_opts is not None,
        (),
        decided,
        entries=_entries(routes),
    )
    if not any(r.changed for r in routes) and decoder_opts is None:
        warning = (
            f"route {target.label} changes nothing: every chosen stage already runs on {plan.ep_alias} "
            "with these options, so the effective route is `config`"
        )
        return replace(plan, route="config", warnings=(warning,))
    return plan


def plan_assignment(
    config: GenaiConfig,
    label: str,
    targets: Mapping[str, Any],
    ep_options: Mapping[str, Mapping[str, str]] | None = None,
    decide: Decide = _decide_here_unasked,
) -> RoutePlan:
    """A per-stage route (``--route "stages=context:qnn,iterator:cpu"``): each stage of ``targets``
    (stage -> its devices.Target, kind 'ep') forced onto its own EP with that EP's options as
    ``plan_route`` forces one (``ep_options``: canonical EP -> ``KEY=VALUE`` options, decided once per
    EP); the other stages stay as the config places them. Pure unless ``decide`` asks the machine."""
    unknown = [s for s in targets if s not in config.stage_names]
    if unknown:
        raise UsageError(
            f"--route {label}: {', '.join(unknown)} {'is' if len(unknown) == 1 else 'are'} not a stage of this bundle",
            f"stages here: {', '.join(config.stage_names)}",
        )
    asked = {ep: dict(opts) for ep, opts in (ep_options or {}).items()}  # canonical EPs, as resolved
    stage_eps = {name: target.ep for name, target in targets.items()}
    stray = sorted(set(asked) - set(stage_eps.values()))
    if stray:
        raise UsageError(
            f"--route {label}: options for {', '.join(eps.ep_alias(e) for e in stray)}, which no stage of the route takes",
            "give options only for an EP the route assigns, e.g. stages=context:qnn;options=qnn:soc_model=60",
        )
    if asked.get(CPU):
        raise UsageError(
            f"--route {label}: options for {eps.CPU_TAKES_NO_OPTIONS}",
            "drop the cpu: options",
        )
    decided: dict[str, EffectiveOptions | None] = {}
    for name, target in targets.items():
        ep = stage_eps[name]
        if ep not in decided:
            decided[ep] = _decided(decide, ep, target, asked.get(ep, {}))
    routes, rewritten, decoder_opts = _forced_routes(config, stage_eps, decided)
    assignment = tuple((s.name, stage_eps[s.name]) for s in config.stages if s.name in stage_eps)
    per_ep = tuple(d for d in decided.values() if d is not None)
    entries = _entries(routes)
    if not any(r.changed for r in routes) and decoder_opts is None:
        warning = (
            f"route {label} changes nothing: every stage it names already runs on its EP with these options, "
            "so the effective route is `config`"
        )
        return RoutePlan(
            label, "config", None, tuple(routes), rewritten, False, (warning,), None, assignment, per_ep, entries
        )
    return RoutePlan(
        label, label, None, tuple(routes), rewritten, decoder_opts is not None, (), None, assignment, per_ep, entries
    )


def _entries(routes: list[StageRoute]) -> dict[str, eps.EPInfo]:
    """The table's entry of each EP the stages run on after the plan (an EP it lacks has none)."""
    return {r.ep_after: eps.EPS[r.ep_after] for r in routes if r.ep_after in eps.EPS}


def _decided(decide: Decide, ep: str, target: Any, asked: dict[str, Any]) -> EffectiveOptions | None:
    """The options ``ep`` runs with for ``target`` (its device, or the EP's home device); None for CPU."""
    if ep == CPU:
        return None
    device = getattr(target, "device", None) or (eps.EPS[ep].home_device if ep in eps.EPS else None)
    return decide(ep, device, asked, getattr(target, "device_source", None))


def _forced_routes(
    config: GenaiConfig, stage_eps: Mapping[str, str], decided: Mapping[str, EffectiveOptions | None]
) -> tuple[list[StageRoute], GenaiConfig, list[dict[str, Any]] | None]:
    """Every stage's route, those of ``stage_eps`` (stage -> EP) forced with their EP's ``decided``
    options and the rest as the config places them; and the rewritten config (see _rewritten)."""
    routes, updates = [], {}
    keys = {ep: eps.genai_provider_name(ep) for ep in dict.fromkeys(stage_eps.values())}  # once per EP
    for stage in config.stages:
        before = stage.ep
        if stage.name not in stage_eps:
            routes.append(_route(stage, before, before, stage.provider_options, False, "config"))
            continue
        ep = stage_eps[stage.name]
        after, source = _forced_options(config, stage, ep, keys[ep], decided[ep])
        updates[stage.name] = list(after)
        routes.append(_route(stage, before, ep, after, True, source))
    rewritten, decoder_opts = _rewritten(config, updates, len(stage_eps) == len(config.stages))
    return routes, rewritten, decoder_opts


def _rewritten(
    config: GenaiConfig, updates: dict[str, Any], all_forced: bool
) -> tuple[GenaiConfig, list[dict[str, Any]] | None]:
    """The config with the stages' new options; a pipeline's decoder-level options become [] when every
    stage is forced (the module doc says why). Returns (config, the new decoder options or None: kept)."""
    decoder_opts: list[dict[str, Any]] | None = [] if all_forced and config.kind == "pipeline" else None
    if decoder_opts is not None and tuple(decoder_opts) == config.decoder_provider_options:
        decoder_opts = None
    return config.with_provider_options(updates, decoder_opts), decoder_opts


def check_available(plan: RoutePlan, available: set[str] | frozenset[str], forced_hint: str = "") -> None:
    """Raise EPUnavailableError for the first stage whose EP is not among ``available`` (canonical names)."""
    available = set(available) | {CPU}
    for route in plan.stages:
        if route.ep_after in available:
            continue
        assert route.ep_after is not None  # every stage of a genai plan names its EP (Stage.ep)
        refuse_if_skipped(route.ep_after)
        entry = plan.entries.get(route.ep_after)  # the EP's name and how to get it, from its table entry
        name = (entry.genai_name or entry.alias) if entry is not None else route.ep_after
        install = entry.install_sentence if entry is not None else ""
        raise EPUnavailableError(
            f"stage `{route.stage}` wants {name}, which is not available here"
            + (f" (route {plan.route})" if route.forced else ""),
            (f"to get it: {install}; or " if install else "")
            + "try --ep cpu or --device cpu|gpu|npu|auto (see `winml devices` for what this machine has)"
            + forced_hint,
        )


def _config_plan(config: GenaiConfig) -> RoutePlan:
    routes = []
    for stage in config.stages:
        ep = stage.ep
        if not stage.ep_known:
            raise BundleError(
                f"{config.bundle / 'genai_config.json'}: stage `{stage.name}` names EP {ep!r} in "
                f"{stage.key_path}.session_options.provider_options, which onnxruntime-genai does not know",
                "fix the provider name, or force a route with --ep cpu (a forced route rewrites it away)",
            )
        routes.append(_route(stage, ep, ep, stage.provider_options, False, "config"))
    return RoutePlan("config", "config", None, tuple(routes), config, entries=_entries(routes))


def _chosen_stages(config: GenaiConfig, stages: Sequence[str] | None, label: str, flags: RouteFlags) -> set[str]:
    if not stages:
        return set(config.stage_names)
    unknown = [s for s in stages if s not in config.stage_names]
    if unknown:
        asked_by = flags.part("--stages", "';stages='")
        raise UsageError(
            f"route {label}: stages ({asked_by}) name {', '.join(unknown)}, which "
            f"{'is' if len(unknown) == 1 else 'are'} not a stage of this bundle",
            f"stages here: {', '.join(config.stage_names)}",
        )
    return set(stages)


def _forced_options(
    config: GenaiConfig, stage: Stage, ep: str, genai_key: str, decided: EffectiveOptions | None
) -> tuple[tuple[dict[str, Any], ...], str]:
    if decided is None:
        return (), "cpu"
    source, options, key = "default", None, genai_key
    if stage.ep == ep:
        key = stage.provider_keys[0]  # keep the spelling the config uses
        source, options = "own", stage.ep_options
    else:
        for other in config.stages:
            if other.name != stage.name and other.provider_options and other.ep == ep:
                source, options = f"borrowed:{other.name}", other.ep_options
                break
    return ({key: decided.for_stage(options)},), source


def _route(
    stage: Stage, before: str, after: str, options_after: Sequence[dict[str, Any]], forced: bool, source: str
) -> StageRoute:
    return StageRoute(
        stage.name,
        stage.files,
        before,
        after,
        stage.provider_options,
        tuple(copy.deepcopy(list(options_after))),
        forced,
        source,
        stage.run_on_prompt,
        stage.run_on_token_gen,
        stage.is_lm_head,
    )
