"""Placement node by node: the EP a stage's onnxruntime session assigned each node to.

``bundle show --placement-nodes`` prints one line per node (stage, node name, op type, EP). The stage's
model is opened exactly as the placement counts open it (placement.stage_session: the EP, provider
options, session config and optimisation level genai would use) and the names come from the session's
own ``get_provider_graph_assignment_info()``, never from what the EP was asked to take.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from winml_perf.bundle.config import GenaiConfig
from winml_perf.bundle.placement import assigned_nodes, op_name, stage_session
from winml_perf.ep import table as eps
from winml_perf.model.route import StagePlacement

UNNAMED = "(unnamed)"  # ONNX allows a node without a name


@dataclass(frozen=True)
class NodePlacement:
    stage: str
    node: str
    op_type: str  # with its domain when not the default one: com.microsoft.GroupQueryAttention
    ep: str

    def to_dict(self) -> dict[str, Any]:
        return {"stage": self.stage, "node": self.node, "op_type": self.op_type, "ep": self.ep}


@dataclass(frozen=True)
class StageNodes:
    stage: str
    nodes: tuple[NodePlacement, ...]
    error: str | None = None  # why no session opened: then no nodes

    def to_dict(self) -> dict[str, Any]:
        return {"stage": self.stage, "nodes": [n.to_dict() for n in self.nodes], "error": self.error}


def stage_nodes(
    config: GenaiConfig, stages: Sequence[str] | None = None, folder: Path | None = None
) -> list[StageNodes]:
    """Each chosen stage's nodes with the EP its session assigned (plugin EPs registered first)."""
    from winml_perf.ep.plugins import registered_plugins

    registered_plugins()  # the registry registers the plugin EPs once per process
    out = []
    for stage in config.stages:
        if stages is not None and stage.name not in stages:
            continue
        model, ep, ep_options, entries, level = stage_session(Path(folder or config.bundle), config, stage)
        found = assigned_nodes(model, ep, ep_options, entries, level)
        if isinstance(found, StagePlacement):
            out.append(StageNodes(stage.name, (), found.error or found.status))
            continue
        nodes = tuple(
            NodePlacement(stage.name, name or UNNAMED, op_name(op, domain), e) for e, name, op, domain in found[0]
        )
        out.append(StageNodes(stage.name, nodes))
    return out


def node_lines(stages: Sequence[StageNodes]) -> list[str]:
    """``stage  node  op type  EP`` per node, columns aligned; a stage without a session says why."""
    rows = [(n.stage, n.node, n.op_type, _ep_text(n.ep)) for s in stages for n in s.nodes]
    widths = [max((len(r[i]) for r in rows), default=0) for i in range(3)]
    lines = []
    for s in stages:
        if s.error is not None:
            lines.append(f"{s.stage}: no session, so no per-node placement: {s.error}")
        for n in s.nodes:
            cells = (n.stage, n.node, n.op_type)
            lines.append("  ".join(c.ljust(w) for c, w in zip(cells, widths)) + "  " + _ep_text(n.ep))
    return lines


def _ep_text(ep: str) -> str:
    return eps.ep_alias(ep) if eps.is_known_ep(ep) else ep
