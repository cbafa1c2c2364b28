"""A route as the command line asks for it: ``--route`` specs or ``--ep/--device/--stages``, parsed into
RouteRequests before anything is resolved (ep/resolved.py resolves each, in this room); and
``--reference ROUTE`` found among them."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from winml_perf.ep.devices import DEVICE_CHOICES, check_device_word
from winml_perf.ep.options import label_suffix, parse_options
from winml_perf.support.errors import UsageError


@dataclass(frozen=True)
class RouteRequest:
    """One route as asked: ``config``, ``ep=NAME`` or ``device=CLASS``, optionally limited to stages,
    with EP options (``KEY=VALUE`` pairs, over ``--ep-option``); or a per-stage route (``assign``:
    (stage, EP as written) pairs, ``stages=context:qnn,iterator:cpu``) whose options are
    ``EP:KEY=VALUE`` pairs."""

    ep: str | None = None
    device: str | None = None
    stages: tuple[str, ...] = ()
    options: tuple[tuple[str, str], ...] = ()
    assign: tuple[tuple[str, str], ...] = ()
    spec: str | None = field(default=None, compare=False)  # the --route text; None for --ep/--device/--stages

    def flag(self, name: str) -> str:
        """Where the route's ``name`` part was given: ``--route 'SPEC'``, else the flag ``--NAME``."""
        return f"--route {self.spec!r}" if self.spec is not None else f"--{name}"

    @property
    def label(self) -> str:
        if self.assign:
            mapping = ",".join(f"{stage}:{ep}" for stage, ep in self.assign)
            return f"stages={mapping}" + label_suffix(dict(self.options))
        base = (
            f"ep={self.ep}"
            if self.ep
            else f"device={self.device}"
            if self.device and self.device != "config"
            else "config"
        )
        return base + label_suffix(dict(self.options)) + (f"[{','.join(self.stages)}]" if self.stages else "")


ROUTE_KEYS = ("stages", "options")


def parse_route(text: str) -> RouteRequest:
    """``config`` | ``ep=webgpu`` | ``device=gpu``, then optional ``;stages=context,iterator`` and
    ``;options=soc_model=60,htp_arch=73`` parts."""
    head, *tails = (part.strip() for part in text.strip().split(";"))
    if head.partition("=")[0].strip() == "stages":
        return _parse_per_stage(text, head, tails)
    parts: dict[str, str] = {}
    for tail in filter(None, tails):
        key, _, value = (p.strip() for p in tail.partition("="))
        if key not in ROUTE_KEYS or not value or key in parts:
            raise UsageError(
                f"--route {text!r}: after ';' only stages=NAME[,NAME] and options=KEY=VALUE[,KEY=VALUE] are understood, once each",
                "e.g. --route 'ep=qnn;stages=context,iterator;options=soc_model=60,htp_arch=73'",
            )
        parts[key] = value
    stages = tuple(s.strip() for s in parts.get("stages", "").split(",") if s.strip())
    options = (
        tuple(sorted(parse_options(parts["options"].split(","), f"--route {text!r}: options").items()))
        if "options" in parts
        else ()
    )
    if head == "config":
        if stages or options:
            raise UsageError(
                f"--route {text!r}: the config route has no stages to force nor options to set",
                "drop ';stages=...'/';options=...' or use ep=/device=",
            )
        return RouteRequest()
    key, sep, value = (part.strip() for part in head.partition("="))
    if not sep or key not in ("ep", "device") or not value:
        raise UsageError(f"--route {text!r} is not understood", "use config, ep=NAME or device=cpu|gpu|npu|auto")
    if "=" in value or "," in value:  # ep=cpu,intra_op_num_threads=1: options written as part of the name
        raise UsageError(
            f"--route {text!r}: {value!r} is not one {key} name; a route's stages and options follow ';' "
            "(';stages=', ';options=')",
            f"e.g. --route '{key}={_glued_fix(value)}'",
        )
    if key == "ep":  # its name is checked where it is normalised, once (ep/resolved.py)
        return RouteRequest(ep=value, stages=stages, options=options, spec=text)
    check_device_word(value, DEVICE_CHOICES, f"--route {text!r}")
    return RouteRequest(device=value, stages=stages, options=options, spec=text)


def _glued_fix(value: str) -> str:
    """``cpu,k=1`` -> ``cpu;options=k=1``; ``cpu stages=a`` (a route part glued on) -> ``cpu;stages=a``."""
    name, _, rest = re.split(r"([,\s]+)", value, maxsplit=1) if re.search(r"[,\s]", value) else (value, "", "")
    if rest.partition("=")[0] in ROUTE_KEYS:
        return f"{name};" + re.sub(r"[,\s]+(?=(?:stages|options)=)", ";", rest)
    return f"{name.partition('=')[0]};options={rest or value}"


def _parse_per_stage(text: str, head: str, tails: list[str]) -> RouteRequest:
    """``stages=context:qnn,iterator:cpu`` then an optional ``;options=qnn:soc_model=60,...``."""
    example = "e.g. --route 'stages=context:qnn,iterator:cpu;options=qnn:soc_model=60'"
    assign: list[tuple[str, str]] = []
    for item in head.partition("=")[2].split(","):
        stage, sep, ep = (p.strip() for p in item.partition(":"))
        if not sep or not stage or not ep:
            raise UsageError(f"--route {text!r}: {item.strip()!r} is not STAGE:EP", example)
        if stage in dict(assign):
            raise UsageError(f"--route {text!r}: stage {stage} is given twice", example)
        assign.append((stage, ep))
    parts = [t for t in tails if t]
    if len(parts) > 1 or (parts and parts[0].partition("=")[0].strip() != "options"):
        raise UsageError(
            f"--route {text!r}: after a per-stage route's ';' only options=EP:KEY=VALUE[,...] is understood, once",
            example,
        )
    options = parse_options(parts[0].partition("=")[2].split(","), f"--route {text!r}: options") if parts else {}
    unscoped = [k for k in options if ":" not in k]
    if unscoped:
        raise UsageError(
            f"--route {text!r}: option {unscoped[0]} does not say which EP it is for",
            "write it EP:KEY=VALUE; " + example,
        )
    return RouteRequest(assign=tuple(assign), options=tuple(sorted(options.items())))


def route_requests(
    route: Sequence[str], ep: str | None, device: str | None, stages: str | None
) -> tuple[RouteRequest, ...]:
    """The run's routes: each ``--route`` spec, else the one route of ``--ep/--device/--stages``."""
    stage_list = tuple(s.strip() for s in stages.split(",") if s.strip()) if stages else ()
    if route:
        if ep or device or stages:
            raise UsageError(
                "--route cannot be combined with --ep/--device/--stages",
                "put each route in its own --route, e.g. --route 'ep=webgpu;stages=context'",
            )
        return tuple(parse_route(r) for r in route)
    return (RouteRequest(ep=ep, device=device, stages=stage_list),)


def reference_label(label: str, routes: Sequence[RouteRequest]) -> str:
    """``--reference ROUTE``: the label of one of ``routes`` that ``label`` names; else exit 2 naming them."""
    labels = [r.label for r in routes]
    try:  # a spelling no --route takes names no route of the run: said as of --reference, not --route
        wanted = parse_route(label).label if label.strip() else label
    except UsageError:
        wanted = label
    if wanted not in labels:
        raise UsageError(
            f"--reference {label}: not one of this run's routes ({', '.join(labels)})",
            "pass one of them, e.g. --route config --route ep=cpu --reference ep=cpu",
        )
    return wanted
