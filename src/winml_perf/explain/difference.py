"""The difference of two routes' breakdowns of one phase, as contributions that sum to it exactly.

    wall_b - wall_a = sum(operator deltas) + sum(stage session-overhead deltas) + host delta

An operator contribution is one op type in one stage (its EP may differ between the routes: a
forced route moves MatMulNBits from CPU to WebGPU, the key stays "iterator MatMulNBits"). The host
delta (the runtime's own work between sessions: sampling, KV-cache handling, copies it makes
itself) is what no session explains; it is kept apart, never ranked among the named causes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypedDict

from winml_perf.explain.breakdown import PhaseBreakdown, phases_from_dict

HOST = "host, outside every session (sampling, KV cache, runtime copies)"
#: No line that names nothing (a group of small contributions) holds more than this share of a difference.
MAX_UNNAMED_SHARE = 0.10
COPIES = "copies across the partition boundary"
OUTSIDE = "stages' time outside operators"


@dataclass(frozen=True)
class Contribution:
    label: str
    delta_ms: float
    count_a: float = 0.0
    count_b: float = 0.0
    bytes_delta: float = 0.0
    eps: str = ""  # "CPU", or "CPU→WebGPU" when the op changed EP
    is_copy: bool = False


@dataclass(frozen=True)
class Difference:
    phase: str
    label_a: str
    label_b: str
    wall_a_ms: float
    wall_b_ms: float
    contributions: tuple[Contribution, ...]  # named causes, largest |delta| first
    host: Contribution

    @property
    def delta_ms(self) -> float:
        return self.wall_b_ms - self.wall_a_ms

    @property
    def named_ms(self) -> float:
        """Every stage and operator contribution together (all but the host): with the host, the difference."""
        return sum(c.delta_ms for c in self.contributions)

    @property
    def named_pct(self) -> float | None:
        """Share of the difference the stages' and operators' contributions account for together (None
        when there is no difference); what the text calls "named" is Layout.named_pct: only named lines."""
        return None if self.delta_ms == 0 else 100.0 * self.named_ms / self.delta_ms

    def layout(self, top: int = 8, max_unnamed_share: float = MAX_UNNAMED_SHARE) -> Layout:
        """The lines to print: the ``top`` largest contributions by name, the rest grouped by kind
        (kind_of), and a group's largest members named too while the group would hold more than
        ``max_unnamed_share`` of the difference, so that no unnamed line holds more."""
        named = list(self.contributions[:top])
        rest = list(self.contributions[top:])
        kinds = kind_names(self.contributions)
        limit = abs(self.delta_ms) * max_unnamed_share
        while True:
            groups: dict[str, list[Contribution]] = {}
            for c in rest:
                groups.setdefault(kind_of(c, kinds), []).append(c)
            over = [members for members in groups.values() if abs(sum(c.delta_ms for c in members)) > limit]
            if not over or not self.delta_ms:
                break
            largest = max(over[0], key=lambda c: abs(c.delta_ms))
            rest.remove(largest)
            named.append(largest)
        named.sort(key=lambda c: (-abs(c.delta_ms), c.label))
        grouped = tuple(
            Group(kind, len(members), sum(c.delta_ms for c in members))
            for kind, members in sorted(groups.items(), key=lambda kv: -abs(sum(c.delta_ms for c in kv[1])))
        )
        return Layout(self, tuple(named), grouped)


@dataclass(frozen=True)
class Group:
    """Small contributions of one kind, on one line."""

    kind: str
    count: int
    delta_ms: float


@dataclass(frozen=True)
class Layout:
    """How a difference prints: named lines, groups of small ones by kind, the host."""

    diff: Difference
    named: tuple[Contribution, ...]
    groups: tuple[Group, ...]

    @property
    def named_pct(self) -> float | None:
        """Share of the difference on named lines only (None when there is no difference)."""
        d = self.diff.delta_ms
        return None if d == 0 else 100.0 * sum(c.delta_ms for c in self.named) / d

    @property
    def grouped_pct(self) -> float | None:
        d = self.diff.delta_ms
        return None if d == 0 else 100.0 * sum(g.delta_ms for g in self.groups) / d


def kind_names(contributions: tuple[Contribution, ...]) -> bool:
    """Whether any contribution ran on an EP other than CPU (then CPU nodes sit between partitions)."""
    return any(c.eps and c.eps != "CPU" for c in contributions)


def kind_of(c: Contribution, partitioned: bool) -> str:
    """The kind a small contribution is grouped by: copies, time outside operators, CPU nodes (between
    partitions when another EP holds some), or one EP's partitions (per EP, or per move between EPs)."""
    if c.is_copy:
        return COPIES
    if not c.eps:
        return OUTSIDE
    if c.eps == "CPU":
        return "CPU nodes between partitions" if partitioned else "CPU operators"
    return f"{c.eps} partitions"


def short_ep(name: str) -> str:
    """'WebGpuExecutionProvider' -> 'WebGpu'."""
    return name[: -len("ExecutionProvider")] if name.endswith("ExecutionProvider") else name


class _OpTotals(TypedDict):
    """One (stage, op) of a phase, summed over its nodes."""

    ms: float
    count: float
    bytes: float
    eps: list[str]
    copy: bool


def _ops(phase: PhaseBreakdown) -> dict[tuple[str, str], _OpTotals]:
    out: dict[tuple[str, str], _OpTotals] = {}
    for stage in phase.stages:
        for op in stage.ops:
            t = out.setdefault(
                (stage.stage, op.op), {"ms": 0.0, "count": 0.0, "bytes": 0.0, "eps": [], "copy": op.is_copy}
            )
            t["ms"] += op.ms
            t["count"] += op.count
            t["bytes"] += op.bytes
            t["eps"].append(short_ep(op.ep))
    return out


def _eps(a: list[str], b: list[str]) -> str:
    ea, eb = "+".join(sorted(set(a))), "+".join(sorted(set(b)))
    if not ea or not eb or ea == eb:
        return ea or eb
    return f"{ea}→{eb}"


def phase_difference(a: PhaseBreakdown, b: PhaseBreakdown, label_a: str = "a", label_b: str = "b") -> Difference:
    """How ``b`` differs from ``a`` in the same phase."""
    if a.phase != b.phase:
        raise ValueError(f"cannot compare phase {a.phase!r} with {b.phase!r}")
    ops_a, ops_b, out = _ops(a), _ops(b), []
    for key in sorted(set(ops_a) | set(ops_b)):
        ta, tb = ops_a.get(key), ops_b.get(key)
        zero: _OpTotals = {"ms": 0.0, "count": 0.0, "bytes": 0.0, "eps": [], "copy": False}
        ta, tb = ta or zero, tb or zero
        out.append(
            Contribution(
                f"{key[0]} {key[1]}",
                tb["ms"] - ta["ms"],
                ta["count"],
                tb["count"],
                tb["bytes"] - ta["bytes"],
                _eps(ta["eps"], tb["eps"]),
                ta["copy"] or tb["copy"],
            )
        )
    over_a = {s.stage: s.overhead_ms for s in a.stages}
    over_b = {s.stage: s.overhead_ms for s in b.stages}
    for stage in sorted(set(over_a) | set(over_b)):
        out.append(
            Contribution(
                f"{stage} outside operators (I/O copies, device wait)", over_b.get(stage, 0.0) - over_a.get(stage, 0.0)
            )
        )
    out.sort(key=lambda c: (-abs(c.delta_ms), c.label))
    host = Contribution(HOST, b.host_ms - a.host_ms)
    return Difference(a.phase, label_a, label_b, a.wall_ms, b.wall_ms, tuple(out), host)


def _label(record: Mapping[str, Any]) -> str:
    route = record.get("route") or {}
    return str(route.get("label") or record.get("cell_key") or "?")


def record_difference(record_a: Mapping[str, Any], record_b: Mapping[str, Any]) -> list[Difference]:
    """The differences of every phase two cell records (dicts) both explain: ``b`` relative to ``a``."""
    pa = phases_from_dict(record_a.get("explain") or {})
    pb = phases_from_dict(record_b.get("explain") or {})
    return [phase_difference(pa[name], pb[name], _label(record_a), _label(record_b)) for name in pa if name in pb]
