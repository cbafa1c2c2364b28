"""The candidates of a tune: every per-stage assignment of the EPs given, and the one route each is
measured as.

An assignment is measured as the config route when it is the config's own, as ``ep=E;stages=S``
when every stage it changes goes to one EP E (the rest stay as the bundle's config places them), and
as a per-stage route (`--route "stages=context:webgpu,iterator:qnn"`) naming each changed stage with
its own EP when it changes stages to two or more EPs.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from winml_perf.measure.orchestrate import RouteRequest
from winml_perf.support.errors import UsageError

CONFIG_LABEL = "config"


@dataclass(frozen=True)
class Candidate:
    """One per-stage assignment (stage -> canonical EP, pipeline order) and the route it is measured as."""

    assignment: tuple[tuple[str, str], ...]
    route: RouteRequest

    @property
    def label(self) -> str:
        return self.route.label


def canonical_eps(words: Sequence[str]) -> list[str]:
    """--eps words -> canonical EP names, in the order given, each once; exit 2 for an unknown one."""
    from winml_perf.ep.table import is_known_ep, normalize_ep_name, valid_names_text

    out: list[str] = []
    for word in words:
        if not is_known_ep(word):
            raise UsageError(f"--eps {word!r} is not a known EP", f"use one of {valid_names_text()}")
        name = normalize_ep_name(word)
        if name not in out:
            out.append(name)
    if not out:
        raise UsageError("--eps names no EP", "e.g. --eps cpu,webgpu")
    return out


def config_assignment(bundle: Path) -> tuple[tuple[str, str], ...]:
    """(stage, EP) as the bundle's genai_config.json places each stage, in pipeline order."""
    from winml_perf.bundle.config import load_config

    return tuple((stage.name, stage.ep) for stage in load_config(bundle).stages)


def enumerate_candidates(
    config: Sequence[tuple[str, str]],
    eps: Sequence[str],
    options: Mapping[str, Mapping[str, str]],
    searched: Sequence[str] = (),
) -> list[Candidate]:
    """Config first, then every other assignment of ``eps`` to the stages (the fewest changed stages
    first); ``options``: per canonical EP, the options its forced routes carry; ``searched``: only
    these stages take another EP (--stages; empty: every stage), the others stay as config has them."""
    from winml_perf.ep.table import ep_alias

    stages = [s for s, _ in config]
    placed = dict(config)
    unknown = [s for s in searched if s not in placed]
    if unknown:
        raise UsageError(
            f"--stages {','.join(unknown)}: the bundle has no such stage", f"its stages: {', '.join(stages)}"
        )
    out = [Candidate(tuple(config), RouteRequest())]
    seen = {tuple(config)}
    choices = [list(eps) if not searched or s in searched else [placed[s]] for s in stages]
    for choice in itertools.product(*choices):
        assignment = tuple(zip(stages, choice))
        if assignment in seen:
            continue
        seen.add(assignment)
        changed = [(s, ep) for s, ep in assignment if placed[s] != ep]
        forced = {ep for _, ep in changed}
        if len(forced) > 1:
            scoped = sorted((f"{ep_alias(ep)}:{k}", v) for ep in forced for k, v in options.get(ep, {}).items())
            per_stage = tuple((s, ep_alias(ep)) for s, ep in changed)
            out.append(Candidate(assignment, RouteRequest(assign=per_stage, options=tuple(scoped))))
            continue
        (ep,) = forced
        chosen = tuple(s for s, _ in changed)
        # Forcing every stage is the plain `ep=E` route.
        route_stages = () if len(chosen) == len(stages) else chosen
        route = RouteRequest(ep=ep_alias(ep), stages=route_stages, options=tuple(sorted(options.get(ep, {}).items())))
        out.append(Candidate(assignment, route))
    return [out[0], *sorted(out[1:], key=lambda c: _order(c, eps))]


def _order(c: Candidate, eps: Sequence[str]) -> tuple[int, str]:
    moved = c.route.assign or c.route.stages
    return (len(moved) if moved else 99, c.label)


def device_crossings(
    assignment: Sequence[tuple[str, str]], on_prompt: Mapping[str, bool], on_tokens: Mapping[str, bool]
) -> int:
    """How often data crosses from one device to another along the pipeline: adjacent stages (in
    pipeline order) whose EPs take their inputs and outputs on different devices (ep/table.py's
    io_device: CPU, OpenVINO and QNN on the host, WebGPU on its GPU), counted on the prompt path
    (stages that run on the prompt) and on the token path (stages that run on token generation);
    the larger count."""
    from winml_perf.ep.table import io_device, is_known_ep

    def device(ep: str) -> str:
        return io_device(ep) if is_known_ep(ep) else ep

    def crossings(path: list[str]) -> int:
        return sum(1 for a, b in itertools.pairwise(path) if a != b)

    prompt = [device(ep) for s, ep in assignment if on_prompt.get(s, True)]
    tokens = [device(ep) for s, ep in assignment if on_tokens.get(s, True)]
    return max(crossings(prompt), crossings(tokens))
