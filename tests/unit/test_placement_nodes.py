"""Placement per node (bundle/placement_nodes.py, `bundle show --placement-nodes`), on the CPU EP.
The QNN side (the NPU bundle's context stage) is in tests/e2e/test_qnn_compile_truth_e2e.py."""

from __future__ import annotations

import collections
import json

from typer.testing import CliRunner

from winml_perf.bundle import placement as pl
from winml_perf.bundle.config import load_config
from winml_perf.bundle.placement_nodes import node_lines, stage_nodes
from winml_perf.cli import app

CPU = "CPUExecutionProvider"


def test_every_node_is_listed_with_its_name_op_type_and_the_ep_its_session_assigned(tiny_pipeline):
    config = load_config(tiny_pipeline)
    listed = {s.stage: s for s in stage_nodes(config)}
    counted = {p.stage: p for p in pl.measure_config(config)}
    for stage, placement in counted.items():
        nodes = listed[stage].nodes
        assert collections.Counter(n.ep for n in nodes) == placement.nodes_per_ep
        assert collections.Counter(n.op_type for n in nodes) == placement.op_types_per_ep[CPU]
    context = {n.node: n for n in listed["context"].nodes}
    assert all(name.startswith("/model/") for name in context), sorted(context)[:3]
    assert all(n.node for s in listed.values() for n in s.nodes)  # a node without a name shows as UNNAMED


def test_a_stage_whose_session_fails_says_why_instead_of_listing_nodes(tiny_pipeline, monkeypatch):
    from winml_perf.bundle import placement_nodes
    from winml_perf.model.route import ERROR, StagePlacement

    real = placement_nodes.assigned_nodes

    def failing_lm_head(model, ep, *rest):
        if model.name == "lm_head.onnx":
            return StagePlacement("", (), ep, ERROR, error="Fail: scripted session failure")
        return real(model, ep, *rest)

    monkeypatch.setattr(placement_nodes, "assigned_nodes", failing_lm_head)
    by_stage = {s.stage: s for s in stage_nodes(load_config(tiny_pipeline))}
    assert by_stage["lm_head"].nodes == () and by_stage["lm_head"].error == "Fail: scripted session failure"
    assert by_stage["context"].nodes
    assert any(line.startswith("lm_head: no session") for line in node_lines(list(by_stage.values())))


def test_bundle_show_placement_nodes_prints_one_line_per_node(tiny_pipeline):
    """Issue 23 finding 7: placement was printed as counts only; no command named the nodes."""
    table = CliRunner().invoke(app, ["bundle", "show", str(tiny_pipeline), "--ep", "cpu", "--placement-nodes"])
    assert table.exit_code == 0, table.output
    lines = table.output.splitlines()
    start = lines.index("placement per node (stage, node, op type, EP), from each stage's session:")
    stages = ("embeddings", "context", "iterator", "lm_head")
    per_node = [line.split() for line in lines[start + 1 :] if line.split()[:1] and line.split()[0] in stages]
    assert len([c for c in per_node if c[0] == "context"]) == 29 and all(c[-1] == "cpu" for c in per_node)
    doc = CliRunner().invoke(
        app, ["bundle", "show", str(tiny_pipeline), "--ep", "cpu", "--placement-nodes", "--format", "json"]
    )
    nodes = {s["stage"]: s["nodes"] for s in json.loads(doc.stdout)["nodes"]}
    assert len(nodes["context"]) == 29 and set(nodes["context"][0]) == {"stage", "node", "op_type", "ep"}
