"""Text of an explanation (one route) and of a difference (two routes)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from winml_perf.explain.breakdown import PhaseBreakdown, phases_from_dict
from winml_perf.explain.difference import Contribution, Difference, short_ep

PHASE_TITLES = {"prompt": "prompt pass", "decode_step": "decode step", "run": "inference"}
TOP_OPS = 5
TOP_CONTRIBUTIONS = 8


def fmt_bytes(n: float) -> str:
    sign = "-" if n < 0 else ""
    n = abs(n)
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{sign}{n / size:.1f} {unit}"
    return f"{sign}{n:.0f} B"


def _count(x: float) -> str:
    return f"{x:.0f}" if abs(x - round(x)) < 1e-9 else f"{x:.1f}"


def _signed_ms(x: float) -> str:
    return f"{'+' if x >= 0 else '−'}{abs(x):.3f} ms"


def phase_lines(phase: PhaseBreakdown) -> list[str]:
    title = PHASE_TITLES.get(phase.phase, phase.phase)
    mean = f" (mean of {phase.instances})" if phase.instances > 1 else ""
    lines = [
        f"  {title}{mean}: {phase.wall_ms:.3f} ms = sessions {phase.sessions_ms:.3f} + host {phase.host_ms:.3f} ms"
    ]
    for s in phase.stages:
        lines.append(
            f"    {s.stage:<12} {s.session_ms:9.3f} ms  ({s.runs:g} run{'s' if s.runs != 1 else ''}; "
            f"operators {s.ops_ms:.3f}, outside operators {s.overhead_ms:.3f})"
        )
        for o in s.ops[:TOP_OPS]:
            extra = f", {fmt_bytes(o.bytes)}" if o.is_copy else ""
            lines.append(f"      {o.op:<34} {short_ep(o.ep):<8} {o.ms:9.3f} ms  ×{_count(o.count)}{extra}")
        if len(s.ops) > TOP_OPS:
            rest = s.ops[TOP_OPS:]
            lines.append(f"      {len(rest)} more operator types{'':<14} {sum(o.ms for o in rest):9.3f} ms")
    copies = phase.copies()
    if copies["count"]:
        lines.append(
            f"    copies between devices: ×{_count(copies['count'])}, {fmt_bytes(copies['bytes'])}, {copies['ms']:.3f} ms"
        )
    return lines


def explain_lines(record: Mapping[str, Any]) -> list[str]:
    """The breakdown of one cell record (dict) with an ``explain`` section."""
    section = record.get("explain") or {}
    head = f"explain {record.get('cell_key', '?')}"
    if section.get("error"):
        return [f"{head}: profiling failed: {section['error']}"]
    note = section.get("profiled") or {}
    how = (
        f"{note.get('warmup_generations', 0)} warmup + 1 profiled generation"
        if "generations" in note
        else f"{note.get('warmup_runs', 0)} warmup + {note.get('runs', '?')} profiled runs"
    )
    lines = [f"{head} (onnxruntime profiler, separate session: {how}; no measured iteration profiled)"]
    for phase in phases_from_dict(section).values():
        lines += phase_lines(phase)
    return lines


def _contribution(c: Contribution) -> str:
    what = c.label
    if c.eps:
        what += f" [{c.eps}]"
    if c.is_copy or c.count_a != c.count_b:
        what += f" ×{_count(c.count_b)}" if not c.count_a else f" ×{_count(c.count_a)}→{_count(c.count_b)}"
    if c.is_copy and c.bytes_delta:
        what += f" ({'+' if c.bytes_delta > 0 else ''}{fmt_bytes(c.bytes_delta)})"
    return f"    {what:<64} {_signed_ms(c.delta_ms)}"


def difference_lines(diff: Difference, top: int = TOP_CONTRIBUTIONS) -> list[str]:
    title = PHASE_TITLES.get(diff.phase, diff.phase)
    lines = [
        f"  {diff.label_b} vs {diff.label_a}, {title}: {_signed_ms(diff.delta_ms)} "
        f"({diff.wall_a_ms:.3f} → {diff.wall_b_ms:.3f} ms), of which"
    ]
    layout = diff.layout(top)
    lines += [_contribution(c) for c in layout.named]
    for g in layout.groups:
        what = f"{g.count} smaller contribution{'s' if g.count != 1 else ''}: {g.kind}"
        lines.append(f"    {what:<64} {_signed_ms(g.delta_ms)}")
    lines.append(f"    {diff.host.label:<64} {_signed_ms(diff.host.delta_ms)}")
    if layout.named_pct is not None:
        grouped = f"; grouped by kind {layout.grouped_pct:.0f} %" if layout.groups else ""
        host = 100.0 * diff.host.delta_ms / diff.delta_ms
        lines.append(
            f"    named stages/operators/copies: {layout.named_pct:.0f} % of the difference{grouped}; host {host:.0f} %"
        )
    return lines


def _shape(record: Mapping[str, Any]) -> tuple[object, object]:
    shape = record.get("shape") or {}
    return (shape.get("prompt_tokens"), shape.get("max_new_tokens"))


def baseline_of(records: Sequence[Mapping[str, Any]]) -> Mapping[str, Any]:
    """The config route when there is one, else the first."""
    for r in records:
        if (r.get("route") or {}).get("label") == "config":
            return r
    return records[0]


def run_explain_text(doc: Mapping[str, Any]) -> str:
    """Every explained cell of a run record (dict), then each route's difference to the baseline route of its shape."""
    from winml_perf.explain.difference import record_difference

    cells = [c for c in doc.get("cells") or () if c.get("explain")]
    if not cells:
        return ""
    lines: list[str] = []
    for c in cells:
        lines += explain_lines(c)
    groups: dict[tuple[object, object], list[Mapping[str, Any]]] = {}
    for c in cells:
        if (c.get("explain") or {}).get("phases"):
            groups.setdefault(_shape(c), []).append(c)
    for members in groups.values():
        base = baseline_of(members)
        for other in members:
            if other is base:
                continue
            lines.append(f"difference {other.get('cell_key')} vs {base.get('cell_key')}")
            for diff in record_difference(base, other):
                lines += difference_lines(diff)
    return "\n".join(lines) + "\n"
