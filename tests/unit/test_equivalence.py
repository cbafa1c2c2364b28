"""--check-outputs: first-difference logic and the warning it puts in records."""

import pytest

from winml_perf.bench.equivalence import check_output, first_difference
from winml_perf.bench.warnings import CODES
from winml_perf.results.record import load_schema


@pytest.mark.parametrize("a,b,expected", [
    ([1, 2, 3], [1, 2, 3], None),
    ([1, 2, 3], [1, 9, 3], 1),
    ([1, 2, 3], [7, 2, 3], 0),
    ([1, 2], [1, 2, 3], 2),
    ([], [], None),
])
def test_first_difference(a, b, expected):
    assert first_difference(a, b) == expected


def test_mismatch_warning_names_position_and_tokens():
    route = {"output_check": {"equal": False, "first_difference": 2,
                                                    "config_token_ids": [5, 6, 7, 8], "route_token_ids": [5, 6, 9, 8]}}
    (w,) = check_output("ep=webgpu", route)
    assert w.code == "output_mismatch"
    assert "ep=webgpu" in w.message and "new token 2" in w.message and "config 7" in w.message and "route 9" in w.message
    assert check_output("x", {"output_check": {"equal": True}}) == []
    assert check_output("config", {}) == []


def test_every_warning_code_is_in_the_record_schema():
    schema = load_schema()
    defs = schema.get("$defs") or schema.get("definitions")
    assert set(defs["warning"]["properties"]["code"]["enum"]) == set(CODES)


def test_partial_cpu_fallback_warns_for_forced_stages_only():
    from winml_perf.bench.warnings import check_partial_fallback

    placement = {"nodes": 29, "cpu_fallback_nodes": 6, "cpu_fallback_ops": {"Cast": 2, "Shape": 1}, "ep_actual": None}
    route = {"stages": [
        {"stage": "context", "forced": True, "ep_after": "WebGpuExecutionProvider", "placement": placement},
        {"stage": "embeddings", "forced": False, "ep_after": "CPUExecutionProvider", "placement": placement},
        {"stage": "lm_head", "forced": True, "ep_after": "WebGpuExecutionProvider", "placement": {**placement, "cpu_fallback_nodes": 0}},
    ]}
    (w,) = check_partial_fallback("ep=webgpu", route)
    assert w.code == "partial_cpu_fallback" and "context" in w.message and "6 of 29" in w.message and "Cast x2" in w.message
    assert check_partial_fallback("config", {"stages": []}) == []
