"""Placement proof for a plain .onnx model: its one stage (``model``) measured as a bundle's stage is.

The model is opened in the parent, before measuring, on the route's EP with its provider options,
session config and graph optimisation level, and the session's own node assignment is counted
(placement.assigned_nodes). A prepared model is measured through its source at the requested level:
an EPContext model shows its partitions, not the nodes they hold. The result goes into the route's
stage, so the record's warnings (nodes on CPU, or every node on CPU: ep_mismatch) and ``--strict``
read it as they read a bundle's stages.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from winml_perf.bundle.placement import RECORD_ASSIGNMENT, assigned_nodes, summarize
from winml_perf.model.route import StagePlacement
from winml_perf.session.onnx_options import GRAPH_OPT_LEVELS

STAGE = "model"


def model_placement(
    model: Path, ep: str, provider_options: Mapping[str, str], session_config: Mapping[str, str], level: str
) -> StagePlacement:
    """Where the session put each node of ``model`` on ``ep`` (nodes per EP, op types per EP), at ``level``
    (a short name, parsed where the request was made: session/onnx_options.py)."""
    entries = {str(k): str(v) for k, v in session_config.items()}
    entries[RECORD_ASSIGNMENT] = "1"
    ort_level = GRAPH_OPT_LEVELS[level]
    options = {str(k): str(v) for k, v in provider_options.items()}
    found = assigned_nodes(Path(model), ep, options, entries, ort_level)
    if isinstance(found, StagePlacement):
        return replace(found, stage=STAGE, files=(Path(model).name,))
    assigned, used, session_ms = found
    per_node = [(e, op, domain) for e, _name, op, domain in assigned]
    return summarize(STAGE, (Path(model).name,), ep, per_node, used, session_ms)
