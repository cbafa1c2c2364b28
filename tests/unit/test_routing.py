"""Routing rules: golden rewritten configs, per-stage plan, no-op forcing, bad input. Pure: no hardware needed."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.unit.bundle_fakes import CONFIG_TARGET, FLAT_CPU, FLAT_QNN, ep_target, make_bundle, pipeline_config
from winml_perf.bundle.config import load_config
from winml_perf.bundle.routing import check_available, plan_route
from winml_perf.ep.route_flags import ROUTE_SPEC
from winml_perf.support.errors import BundleError, EPUnavailableError, UsageError

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
UPDATE = os.environ.get("WINML_PERF_UPDATE_GOLDEN") == "1"

CASES = {
    # name: (config factory, ep, device, stages)
    "flat_qnn_to_cpu": (lambda: FLAT_QNN, "cpu", None, None),
    "flat_qnn_to_openvino_gpu": (lambda: FLAT_QNN, "openvino", "gpu", None),
    "flat_cpu_to_qnn": (lambda: FLAT_CPU, "qnn", None, None),
    "pipeline_list_to_cpu": (lambda: pipeline_config("list"), "cpu", None, None),
    "pipeline_object_to_cpu": (lambda: pipeline_config("object"), "cpu", None, None),
    "pipeline_list_to_qnn": (lambda: pipeline_config("list"), "qnn", None, None),
    "pipeline_object_to_openvino_npu": (lambda: pipeline_config("object"), "openvino", "npu", None),
    "pipeline_list_stages_context_iterator_to_cpu": (
        lambda: pipeline_config("list"),
        "cpu",
        None,
        ["context", "iterator"],
    ),
    "pipeline_object_stages_lm_head_to_qnn": (lambda: pipeline_config("object"), "qnn", None, ["lm_head"]),
}


def _plan(tmp_path, raw, ep=None, device=None, stages=None):
    target = ep_target(ep, device) if ep else CONFIG_TARGET
    return plan_route(load_config(make_bundle(tmp_path, raw)), target, stages)


@pytest.mark.parametrize("case", sorted(CASES))
def test_golden_rewritten_config(tmp_path, case):
    factory, ep, device, stages = CASES[case]
    plan = _plan(tmp_path, factory(), ep, device, stages)
    got = {
        "route": plan.route,
        "plan": [[s.stage, s.ep_before, s.ep_after, s.options_source] for s in plan.stages],
        "config": json.loads(plan.config.dumps()),
    }
    path = GOLDEN / f"{case}.json"
    if UPDATE:
        path.write_text(json.dumps(got, indent=2) + "\n")
    assert got == json.loads(path.read_text()), f"rewrite differs from {path} (WINML_PERF_UPDATE_GOLDEN=1 to accept)"


def test_forcing_cpu_empties_every_stage_and_the_decoder_level(tmp_path):
    raw = pipeline_config()
    raw["model"]["decoder"]["session_options"]["provider_options"] = [{"QNN": {}}]
    plan = _plan(tmp_path, raw, "cpu")
    assert plan.route == "ep=cpu" and plan.decoder_options_rewritten
    assert all(s.provider_options_after == () and s.ep_after == "CPUExecutionProvider" for s in plan.stages)
    assert plan.config.decoder_provider_options == ()
    assert all(s.provider_options == () for s in plan.config.stages)


def test_forcing_a_hardware_ep_keeps_the_pipeline_primary_device_on_the_host(tmp_path):
    # genai keeps managed inputs (input_ids) on the decoder-level device; a GPU EP there breaks the
    # embeddings stage (measured with WebGPU on an H200), so every stage names its EP and the
    # decoder level stays [] (host).
    raw = pipeline_config()
    raw["model"]["decoder"]["session_options"]["provider_options"] = [{"QNN": {}}]
    plan = _plan(tmp_path, raw, "qnn")
    assert plan.config.decoder_provider_options == ()
    assert all(s.ep_after == "QNNExecutionProvider" and s.provider_options_after for s in plan.stages)


def test_flat_decoder_is_rewritten_too(tmp_path):
    plan = _plan(tmp_path, FLAT_QNN, "cpu")
    assert plan.config.raw["model"]["decoder"]["session_options"]["provider_options"] == []
    assert plan.config.raw["model"]["decoder"]["session_options"]["log_id"] == "og"


def test_hardware_ep_keeps_own_then_borrows_then_defaults(tmp_path):
    plan = _plan(tmp_path, pipeline_config(), "qnn")
    by = {s.stage: s for s in plan.stages}
    assert by["context"].options_source == "own"
    assert by["embeddings"].options_source == "borrowed:context"
    assert by["embeddings"].provider_options_after == ({"QNN": {"backend_path": "libQnnHtp.so"}},)
    # defaults: QNN gets backend_type=htp (without it the EP cannot be created), never beside a backend_path
    assert _plan(tmp_path / "f", FLAT_CPU, "qnn").stages[0].provider_options_after == (
        {"QNN": {"backend_type": "htp"}},
    )


def test_openvino_device_type_follows_the_resolved_device(tmp_path):
    raw = pipeline_config()
    raw["model"]["decoder"]["pipeline"][0]["context"]["session_options"]["provider_options"] = [
        {"OpenVINO": {"device_type": "GPU", "x": "1"}}
    ]
    plan = _plan(tmp_path, raw, "openvino", "npu")
    by = {s.stage: s for s in plan.stages}
    assert by["context"].provider_options_after == ({"OpenVINO": {"device_type": "NPU", "x": "1"}},)
    assert by["lm_head"].provider_options_after == ({"OpenVINO": {"device_type": "NPU", "x": "1"}},)


def test_stages_limits_the_override(tmp_path):
    plan = _plan(tmp_path, pipeline_config(), "cpu", stages=["context"])
    by = {s.stage: s for s in plan.stages}
    assert by["context"].forced and by["context"].ep_after == "CPUExecutionProvider"
    assert not by["iterator"].forced and by["iterator"].ep_after == "QNNExecutionProvider"
    assert not plan.decoder_options_rewritten


def test_noop_forcing_reports_config_with_a_warning(tmp_path):
    plan = _plan(tmp_path, FLAT_CPU, "cpu")
    assert plan.requested == "ep=cpu" and plan.route == "config" and not plan.changed
    assert plan.warnings and "changes nothing" in plan.warnings[0]


def test_unknown_stage_ep_errors_at_config_route_and_is_rewritten_when_forced(tmp_path):
    raw = pipeline_config()
    raw["model"]["decoder"]["pipeline"][0]["context"]["session_options"]["provider_options"] = [{"warpdrive": {}}]
    with pytest.raises(BundleError, match=r"stage `context` names EP 'warpdrive'"):
        _plan(tmp_path, raw)
    plan = _plan(tmp_path / "x", raw, "cpu")
    assert {s.stage: s.ep_before for s in plan.stages}["context"] == "warpdrive"
    assert all(s.ep_after == "CPUExecutionProvider" for s in plan.stages)


def test_stage_ep_not_available_here(tmp_path):
    plan = _plan(tmp_path, pipeline_config())
    with pytest.raises(
        EPUnavailableError,
        match=r"stage `context` wants QNN, which is not available here; to get it: qnn: pip install -e '\.\[qnn\]' \(onnxruntime-qnn\); .*; or try --ep cpu or --device",
    ):
        check_available(plan, {"CPUExecutionProvider"})
    check_available(plan, {"QNNExecutionProvider"})


def test_bad_stages_and_stages_without_a_forced_route(tmp_path):
    with pytest.raises(UsageError, match="nope"):
        _plan(tmp_path, pipeline_config(), "cpu", stages=["nope"])
    with pytest.raises(UsageError, match="--stages"):
        _plan(tmp_path / "x", pipeline_config(), None, stages=["context"])


def test_plan_is_pure(tmp_path):
    cfg = load_config(make_bundle(tmp_path, pipeline_config()))
    before = json.dumps(cfg.raw, sort_keys=True)
    a = plan_route(cfg, ep_target("qnn"))
    b = plan_route(cfg, ep_target("qnn"))
    assert json.dumps(cfg.raw, sort_keys=True) == before
    assert a.config.dumps() == b.config.dumps() and a.to_dict() == b.to_dict()


def test_ep_options_go_over_the_stage_options_and_into_the_rewritten_config(tmp_path):
    config = load_config(make_bundle(tmp_path, FLAT_CPU))
    plan = plan_route(config, ep_target("qnn"), None, {"soc_model": "60", "htp_arch": "73"})
    (stage,) = plan.stages
    assert stage.provider_options_after == ({"QNN": {"soc_model": "60", "htp_arch": "73", "backend_type": "htp"}},)
    other = plan_route(config, ep_target("qnn"), None, {"soc_model": "88"})
    assert plan.config.raw != other.config.raw  # so the derived bundles' keys differ


@pytest.mark.parametrize(
    "ep, options, match",
    [
        ("qnn", {"bogus_key": "1"}, "QNNExecutionProvider has no provider option 'bogus_key'"),
        (
            "cpu",
            {"soc_model": "60"},
            r"route ep=cpu: EP options \(--ep-option, or ';options=' in --route\) do not apply to the CPU EP.*soc_model",
        ),
    ],
)
def test_bad_ep_options_are_usage_errors(tmp_path, ep, options, match):
    config = load_config(make_bundle(tmp_path, FLAT_CPU))
    with pytest.raises(UsageError, match=match) as info:
        plan_route(config, ep_target(ep), None, options, flags=ROUTE_SPEC)
    assert info.value.exit_code == 2


def test_cpu_options_asked_by_flags_name_only_ep_option(tmp_path):
    """`winml bundle prepare` has no --route: its refusal names --ep-option alone."""
    config = load_config(make_bundle(tmp_path, FLAT_CPU))
    with pytest.raises(UsageError) as info:
        plan_route(config, ep_target("cpu"), None, {"soc_model": "60"})
    assert "route ep=cpu: EP options (--ep-option) do not apply to the CPU EP" in str(info.value)
    assert "--route" not in str(info.value) + info.value.remedy


def test_an_unknown_stage_names_both_places_stages_come_from(tmp_path):
    """A forced route's stages come from --stages or ';stages=' in --route: naming only --stages
    misled a --route user, who had not given it."""
    config = load_config(make_bundle(tmp_path, FLAT_CPU))
    with pytest.raises(UsageError) as info:
        plan_route(config, ep_target("cpu"), ["decoderx"], flags=ROUTE_SPEC)
    assert "route ep=cpu: stages (--stages, or ';stages=' in --route) name decoderx" in str(info.value)
    assert info.value.remedy == "stages here: decoder"


def test_an_unknown_stage_asked_by_flags_names_only_stages(tmp_path):
    """A route asked with --stages (`winml bundle prepare` has no --route) names --stages alone."""
    config = load_config(make_bundle(tmp_path, FLAT_CPU))
    with pytest.raises(UsageError) as info:
        plan_route(config, ep_target("cpu"), ["decoderx"])
    assert "route ep=cpu: stages (--stages) name decoderx" in str(info.value)
    assert "--route" not in str(info.value) + info.value.remedy


def test_ep_options_on_the_config_route_are_refused(tmp_path):
    config = load_config(make_bundle(tmp_path, FLAT_CPU))
    with pytest.raises(UsageError, match="--ep-option sets options of a forced route"):
        plan_route(config, CONFIG_TARGET, None, {"soc_model": "60"})
