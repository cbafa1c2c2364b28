"""--check-outputs: first-difference logic and the warning it puts in records."""

from dataclasses import replace

import pytest

from winml_perf.equivalence.greedy import first_difference
from winml_perf.model.record import load_schema
from winml_perf.model.route import OK, OutputCheck, Route, StagePlacement, StageRoute
from winml_perf.record.warnings import CODES, check_same_output


@pytest.mark.parametrize(
    "a,b,expected",
    [
        ([1, 2, 3], [1, 2, 3], None),
        ([1, 2, 3], [1, 9, 3], 1),
        ([1, 2, 3], [7, 2, 3], 0),
        ([1, 2], [1, 2, 3], 2),
        ([], [], None),
    ],
)
def test_first_difference(a, b, expected):
    assert first_difference(a, b) == expected


def test_mismatch_warning_names_position_and_tokens():
    check = OutputCheck(16, 4, 0, (5, 6, 7, 8), (5, 6, 9, 8), 2)
    route = Route("ep=webgpu", output_check=check)
    (w,) = check_same_output("ep=webgpu", route)
    assert w.code == "output_mismatch"
    assert (
        "ep=webgpu" in w.message and "new token 2" in w.message and "config 7" in w.message and "route 9" in w.message
    )
    equal = OutputCheck(16, 2, 0, (5, 6), (5, 6), None)
    assert equal.equal and check_same_output("x", Route("x", output_check=equal)) == []
    assert check_same_output("config", Route("config")) == []


def test_output_check_round_trips_the_records_json():
    d = {
        "prompt_tokens": 16,
        "new_tokens": 4,
        "seed": 0,
        "equal": False,
        "first_difference": 2,
        "config_token_ids": [5, 6, 7, 8],
        "route_token_ids": [5, 6, 9, 8],
    }
    check = OutputCheck.from_dict(d)
    assert not check.equal and check.first_difference == 2 and check.to_dict() == d


def test_every_warning_code_is_in_the_record_schema():
    schema = load_schema()
    defs = schema.get("$defs") or schema.get("definitions")
    assert set(defs["warning"]["properties"]["code"]["enum"]) == set(CODES)


def test_partial_cpu_fallback_warns_for_forced_stages_only():
    from winml_perf.record.warnings import check_partial_fallback

    webgpu, cpu = "WebGpuExecutionProvider", "CPUExecutionProvider"
    mixed = StagePlacement(
        "context",
        ("t.onnx",),
        webgpu,
        OK,
        {webgpu: 23, cpu: 6},
        {webgpu: {"MatMul": 23}, cpu: {"Cast": 2, "Shape": 1, "Gather": 3}},
    )
    whole = StagePlacement("lm_head", ("l.onnx",), webgpu, OK, {webgpu: 5}, {webgpu: {"MatMul": 5}})
    route = Route(
        "ep=webgpu",
        "ep=webgpu",
        "ep=webgpu",
        (
            StageRoute("context", ("t.onnx",), cpu, webgpu, forced=True, options_source="default", placement=mixed),
            StageRoute(
                "embeddings",
                ("e.onnx",),
                cpu,
                cpu,
                forced=False,
                options_source="config",
                placement=replace(mixed, ep=cpu),
            ),
            StageRoute("lm_head", ("l.onnx",), cpu, webgpu, forced=True, options_source="default", placement=whole),
        ),
    )
    (w,) = check_partial_fallback("ep=webgpu", route)
    assert (
        w.code == "partial_cpu_fallback"
        and "context" in w.message
        and "6 of 29" in w.message
        and "Cast x2" in w.message
    )
    assert check_partial_fallback("config", Route("config", "config", "config")) == []


def test_the_question_follows_the_precision_of_both_sides():
    from winml_perf.model.equivalence import PRECISION_QUESTION, SAME_MODEL_QUESTION, StagePrecision, question_for

    int8, fp32 = "fp32 model, MatMulNBits accuracy_level 4 (int8 A)", "fp32 model, MatMulNBits accuracy_level 0"
    cpu = (StagePrecision("decoder", "CPUExecutionProvider", (4,), (), int8),)
    cpu0 = (StagePrecision("decoder", "CPUExecutionProvider", (0,), (), fp32),)
    gpu = (StagePrecision("decoder", "WebGpuExecutionProvider", (4,), (), int8),)
    assert question_for(cpu, cpu) == SAME_MODEL_QUESTION  # another bundle on the same route
    assert question_for(gpu, cpu) == PRECISION_QUESTION  # another EP
    assert question_for(cpu0, cpu) == PRECISION_QUESTION  # another precision on the same EP
    assert question_for((), cpu) == PRECISION_QUESTION  # unknown: the wider question


def test_top_k_is_the_first_k_of_a_stable_descending_sort_ties_included():
    import numpy as np

    from winml_perf.stats.equivalence import top_k

    rng = np.random.default_rng(7)
    for trial in range(200):
        vocab, k = int(rng.integers(5, 120)), 5
        rows = rng.integers(-2, 2, size=(3, vocab)).astype(np.float64) if trial % 2 else rng.standard_normal((3, vocab))
        if trial % 9 == 0:
            rows[:] = 0.5  # every entry tied: the lowest indices
        stable = np.argsort(-rows, axis=-1, kind="stable")[:, :k]
        assert top_k(rows, k) == [sorted(r.tolist()) for r in stable]
