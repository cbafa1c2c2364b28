"""explain/: profile parsing, breakdown sums, the difference of two routes, splitting a pipeline's runs."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from winml_perf.bundle.config import parse_config
from winml_perf.explain.breakdown import PhaseBreakdown, phase_breakdown, phases_from_dict
from winml_perf.explain.difference import phase_difference, record_difference
from winml_perf.explain.genai_run import split_runs
from winml_perf.explain.profile import NodeEvent, ProfileError, RunProfile, parse_events
from winml_perf.explain.text import difference_lines, run_explain_text
from winml_perf.support.errors import BenchmarkFailure

CPU, GPU = "CPUExecutionProvider", "WebGpuExecutionProvider"


def node(name, op, ts, dur, ep=CPU, size=0):
    return {
        "cat": "Node",
        "name": f"{name}_kernel_time",
        "ts": ts,
        "dur": dur,
        "ph": "X",
        "args": {"op_name": op, "provider": ep, "output_size": str(size)},
    }


def run(ts, dur):
    return {"cat": "Session", "name": "model_run", "ts": ts, "dur": dur, "ph": "X"}


def events_two_runs():
    return [
        {"cat": "Session", "name": "session_initialization", "ts": 0, "dur": 50},
        node("init_const", "Cast", 10, 5),  # during initialisation: no run holds it
        run(100, 40),
        node("mm", "MatMulNBits", 105, 20),
        node("cp", "MemcpyToHost", 126, 6, GPU, 4096),
        {"cat": "Node", "name": "mm_fence_before", "ts": 104, "dur": 1, "args": {"op_name": "MatMulNBits"}},
        run(200, 30),
        node("mm", "MatMulNBits", 202, 18),
    ]


def test_nodes_go_to_the_run_whose_span_holds_them_and_nothing_else_counts():
    runs = parse_events(events_two_runs())
    assert [(r.ts_us, r.dur_us) for r in runs] == [(100, 40), (200, 30)]
    assert [[(n.op, n.ep, n.dur_us, n.output_bytes) for n in r.nodes] for r in runs] == [
        [("MatMulNBits", CPU, 20, 0), ("MemcpyToHost", GPU, 6, 4096)],
        [("MatMulNBits", CPU, 18, 0)],
    ]


def test_a_profile_that_is_not_a_list_of_events_is_an_error():
    with pytest.raises(ProfileError, match="not an onnxruntime profile"):
        parse_events({"traceEvents": []}, "x.json")


def test_breakdown_means_and_its_sums_hold_exactly():
    runs = parse_events(events_two_runs())
    phase = phase_breakdown("decode_step", [0.050, 0.040], {"iterator": runs})
    [stage] = phase.stages
    assert stage.runs == 1 and stage.session_ms == pytest.approx(0.035)
    ops = {o.op: o for o in stage.ops}
    assert ops["MatMulNBits"].count == 1 and ops["MatMulNBits"].ms == pytest.approx(0.019)
    assert ops["MemcpyToHost"].count == 0.5 and ops["MemcpyToHost"].bytes == 2048
    assert stage.ops_ms + stage.overhead_ms == pytest.approx(stage.session_ms, abs=1e-12)
    assert phase.sessions_ms + phase.host_ms == pytest.approx(phase.wall_ms, abs=1e-12)
    assert phase.copies() == {"count": 0.5, "ms": 0.003, "bytes": 2048}
    assert PhaseBreakdown.from_dict(json.loads(json.dumps(phase.to_dict()))) == phase


def _phase(wall_ms, stages):
    """stages: {name: ([(op, ep, dur_us, bytes), ...], session_us)}, one run each."""
    runs = {
        name: [RunProfile(0, session_us, tuple(NodeEvent(*n) for n in nodes))]
        for name, (nodes, session_us) in stages.items()
    }
    return phase_breakdown("decode_step", [wall_ms], runs)


def test_difference_ranks_contributions_that_sum_to_the_wall_difference_and_keeps_host_apart():
    a = _phase(1.0, {"iterator": ([("MatMulNBits", CPU, 500, 0), ("Add", CPU, 100, 0)], 700)})
    b = _phase(
        9.0,
        {
            "iterator": (
                [("MatMulNBits", GPU, 100, 0), ("Add", GPU, 100, 0), ("MemcpyFromHost", GPU, 6000, 3_100_000)],
                6500,
            )
        },
    )
    diff = phase_difference(a, b, "config", "ep=webgpu")
    assert diff.delta_ms == pytest.approx(8.0)
    first = diff.contributions[0]
    assert (first.label, first.count_b, first.bytes_delta, first.is_copy) == (
        "iterator MemcpyFromHost",
        1,
        3_100_000,
        True,
    )
    assert first.delta_ms == pytest.approx(6.0)
    mm = next(c for c in diff.contributions if c.label == "iterator MatMulNBits")
    assert mm.delta_ms == pytest.approx(-0.4) and mm.eps == "CPU→WebGpu"
    assert [abs(c.delta_ms) for c in diff.contributions] == sorted(
        (abs(c.delta_ms) for c in diff.contributions), reverse=True
    )
    assert diff.named_ms + diff.host.delta_ms == pytest.approx(diff.delta_ms, abs=1e-12)
    assert diff.host.delta_ms == pytest.approx(8.0 - 5.8)  # walls minus sessions
    text = "\n".join(difference_lines(diff))
    assert "ep=webgpu vs config, decode step: +8.000 ms" in text
    assert "iterator MemcpyFromHost [WebGpu] ×1 (+3.1 MB)" in text and "host, outside every session" in text


def test_phases_of_different_kinds_are_not_compared():
    a = _phase(1.0, {"m": ([], 10)})
    with pytest.raises(ValueError):
        phase_difference(a, phase_breakdown("prompt", [1.0], {}))


PIPELINE = {
    "model": {
        "type": "decoder-pipeline",
        "decoder": {
            "pipeline": [
                {
                    "embeddings": {"filename": "e.onnx"},
                    "context": {"filename": "t.onnx", "run_on_token_gen": False},
                    "iterator": {"filename": "t.onnx", "run_on_prompt": False},
                    "lm_head": {"filename": "h.onnx", "is_lm_head": True},
                }
            ]
        },
    }
}


def _runs(n, tag):
    return [RunProfile(i, tag, ()) for i in range(n)]


def test_a_pipelines_runs_split_into_prompt_and_decode_steps_of_the_last_generation(tmp_path):
    config = parse_config(tmp_path, PIPELINE, check_files=False)
    steps = 3  # two generations of 1 prompt pass + 3 decode steps each
    runs = {"embeddings": _runs(8, 1), "context": _runs(2, 2), "iterator": _runs(6, 3), "lm_head": _runs(8, 4)}
    split = split_runs(config, runs, steps)
    assert {k: len(v) for k, v in split["prompt"].items()} == {
        "embeddings": 1,
        "context": 1,
        "iterator": 0,
        "lm_head": 1,
    }
    assert {k: len(v) for k, v in split["decode_step"].items()} == {
        "embeddings": 3,
        "context": 0,
        "iterator": 3,
        "lm_head": 3,
    }
    assert split["prompt"]["embeddings"] == runs["embeddings"][4:5]  # the second generation's, not the warmup's
    with pytest.raises(BenchmarkFailure, match="ran 7 times"):
        split_runs(config, {**runs, "iterator": _runs(7, 3)}, steps)


def _record(label, phase):
    return {
        "cell_key": f"{label}|p16|n8",
        "route": {"label": label},
        "shape": {"prompt_tokens": 16, "max_new_tokens": 8},
        "explain": {
            "method": "m",
            "profiled": {"generations": 2, "warmup_generations": 1},
            "phases": {"decode_step": phase.to_dict()},
        },
    }


def test_two_stored_records_compare_and_a_run_prints_each_route_against_config():
    a = _record("config", _phase(1.0, {"iterator": ([("MatMulNBits", CPU, 500, 0)], 600)}))
    b = _record("ep=webgpu", _phase(2.0, {"iterator": ([("MatMulNBits", GPU, 1400, 0)], 1500)}))
    [diff] = record_difference(a, b)
    assert (diff.label_a, diff.label_b, diff.contributions[0].label) == ("config", "ep=webgpu", "iterator MatMulNBits")
    assert phases_from_dict(b["explain"])["decode_step"].wall_ms == 2.0
    text = run_explain_text({"cells": [b, a]})
    assert "difference ep=webgpu|p16|n8 vs config|p16|n8" in text and text.count("difference ") == 1


# -- the runner's side: after the measured iterations, never instead of them ---------------------------
def test_the_runner_explains_a_cell_after_its_measured_iterations_with_the_same_prompt_ids():
    from tests.unit.fakes import open_fake_session
    from tests.unit.test_runner import cell
    from winml_perf.measure.runner import SweepRunner

    seen = []

    def explainer(c, prompt_ids, timeout_s):
        seen.append((c.key, list(prompt_ids)))
        return {"method": "m", "profiled": {"measured_iterations_profiled": 0}, "phases": {}}

    [result] = (
        SweepRunner([cell(prompt=16, new=8)], open_fake_session, sample_memory=False, explainer=explainer).run().results
    )
    assert result.ok and len(result.samples) == 5  # measured as asked
    assert result.explain["profiled"] == {"measured_iterations_profiled": 0}
    [(key, ids)] = seen
    assert key == result.cell.key and len(ids) == 16 and len(ids) == result.prompt_info["tokens"]


def test_an_explainer_that_fails_leaves_an_error_and_an_ok_cell():
    from tests.unit.fakes import open_fake_session
    from tests.unit.test_runner import cell
    from winml_perf.measure.runner import SweepRunner

    def explainer(c, prompt_ids, timeout_s):
        raise RuntimeError("no profile written")

    [result] = SweepRunner([cell()], open_fake_session, sample_memory=False, explainer=explainer).run().results
    assert result.ok and result.explain == {"error": "RuntimeError: no profile written"}


def test_an_explain_section_with_phases_or_with_an_error_is_a_valid_record_and_a_bare_one_is_not():
    from tests.unit.fakes import FAKE_ENV, open_fake_session
    from tests.unit.test_runner import cell
    from winml_perf.measure.runner import run_cell
    from winml_perf.record.build import cell_record
    from winml_perf.record.validation import validate_record
    from winml_perf.support.errors import StoreError

    result = run_cell(cell(), open_fake_session, sample_memory=False)
    phase = _phase(1.0, {"iterator": ([("MatMulNBits", CPU, 500, 0)], 600)}).to_dict()
    good = [
        {"method": "m", "profiled": {"generations": 2}, "phases": {"decode_step": phase}},
        {"error": "RuntimeError: x"},
    ]
    for section in good:
        validate_record(cell_record(replace(result, explain=section), run_id="0" * 32, environment=FAKE_ENV).to_dict())
    with pytest.raises(StoreError, match="explain"):
        validate_record(
            cell_record(replace(result, explain={"method": "m"}), run_id="0" * 32, environment=FAKE_ENV).to_dict()
        )


def test_small_contributions_are_grouped_by_kind_and_no_unnamed_line_holds_over_a_tenth():
    """The H200 case of issue 37: a route whose decode step is one large partition, 29 small ones, CPU
    nodes between them and copies across the boundary. Before, 29 smaller contributions held 90 % of
    the difference on one unnamed line while "named" said 100 %."""
    ov = "OpenVINOExecutionProvider"
    a = _phase(10.0, {"iterator": ([("MatMulNBits", CPU, 7870, 0)], 8000)})
    nodes = [("OpenVINO-EP-subgraph_0", ov, 3950, 0)]
    nodes += [(f"OpenVINO-EP-subgraph_{i}", ov, 400 + 10 * i, 0) for i in range(1, 22)]  # 21 small partitions
    nodes += [(f"Cast_{i}", CPU, 120, 0) for i in range(4)]  # CPU nodes between the partitions
    nodes += [("MemcpyToHost", CPU, 300, 1000), ("MemcpyFromHost", ov, 300, 1000)]
    b = _phase(25.0, {"iterator": (nodes, 23000)})
    diff = phase_difference(a, b, "config", "ep=openvino")
    layout = diff.layout()
    unnamed = [g for g in layout.groups]
    assert unnamed and all(abs(g.delta_ms) <= 0.10 * abs(diff.delta_ms) for g in unnamed)
    kinds = {g.kind for g in layout.groups}
    assert "OpenVINO partitions" in kinds
    # every contribution is on a named line or in a group, once
    assert len(layout.named) + sum(g.count for g in layout.groups) == len(diff.contributions)
    total = sum(c.delta_ms for c in layout.named) + sum(g.delta_ms for g in layout.groups) + diff.host.delta_ms
    assert total == pytest.approx(diff.delta_ms)
    named_pct = 100 * sum(c.delta_ms for c in layout.named) / diff.delta_ms
    assert layout.named_pct == pytest.approx(named_pct) and named_pct < 100
    text = "\n".join(difference_lines(diff))
    assert "smaller contributions: OpenVINO partitions" in text
    assert f"named stages/operators/copies: {named_pct:.0f} % of the difference; grouped by kind" in text
    assert " smaller contributions " not in text  # no unnamed lump of every kind


def test_without_a_difference_nothing_is_promoted_and_nothing_divides_by_zero():
    a = _phase(1.0, {"iterator": ([("Add", CPU, 100, 0)] * 12, 1300)})
    diff = phase_difference(a, a, "config", "config")
    assert diff.layout().named_pct is None
    assert "named" not in "\n".join(difference_lines(diff))
