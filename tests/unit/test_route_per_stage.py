"""Per-stage routes (`--route "stages=context:qnn,iterator:webgpu"`): parsing, bad input (exit 2 naming
--route), the rewritten config of each stage, and the derived bundle's cache key over the whole mapping."""

from __future__ import annotations

import json

import pytest

from tests.conftest import TINY_PIPELINE, run_winml
from tests.unit.bundle_fakes import ep_target, make_bundle, pipeline_config
from winml_perf.bundle.config import load_config
from winml_perf.bundle.derive import derive_bundle
from winml_perf.bundle.routing import plan_assignment
from winml_perf.ep import table as eps
from winml_perf.ep.resolved import ResolvedRoute, per_stage_options
from winml_perf.measure.orchestrate import parse_route
from winml_perf.support.errors import UsageError

QNN, WEBGPU, CPU = "QNNExecutionProvider", "WebGpuExecutionProvider", "CPUExecutionProvider"


def _targets(**stage_eps):
    return {stage: ep_target(ep) for stage, ep in stage_eps.items()}


@pytest.fixture
def bundle(tmp_path):
    return make_bundle(tmp_path, pipeline_config())


def test_a_per_stage_route_parses_to_its_mapping_and_scoped_options():
    rr = parse_route(" stages=context:qnn, iterator:webgpu ; options=qnn:soc_model=60 ")
    assert rr.assign == (("context", "qnn"), ("iterator", "webgpu")) and rr.ep is None
    resolved = ResolvedRoute(rr.label, None, stage_targets=tuple(_targets(context=QNN, iterator=WEBGPU).items()))
    assert resolved.forced  # whether a route is forced: one property, of the resolved route
    assert rr.options == (("qnn:soc_model", "60"),)
    assert rr.label == "stages=context:qnn,iterator:webgpu(qnn:soc_model=60)"
    assert (
        parse_route(rr.label.replace("(qnn:soc_model=60)", ";options=qnn:soc_model=60")) == rr
    )  # the label reads back


@pytest.mark.parametrize(
    "text,says",
    [
        ("stages=context", "is not STAGE:EP"),
        ("stages=context:", "is not STAGE:EP"),
        ("stages=context:qnn,context:cpu", "given twice"),
        ("stages=context:qnn;stages=iterator:cpu", "only options=EP:KEY=VALUE"),
        ("stages=context:qnn;options=soc_model=60", "does not say which EP"),
    ],
)
def test_bad_per_stage_routes_are_usage_errors_naming_the_flag(text, says):
    with pytest.raises(UsageError, match=says) as info:
        parse_route(text)
    assert str(info.value).startswith(f"--route {text!r}") and info.value.exit_code == 2


def test_an_unscoped_ep_option_cannot_go_to_a_per_stage_route():
    rr = parse_route("stages=context:qnn,iterator:cpu")
    with pytest.raises(
        UsageError, match="--ep-option soc_model=60: route stages=context:qnn,iterator:cpu is a per-stage route"
    ):
        per_stage_options(rr, (("soc_model", "60"),), {QNN, CPU})
    # scoped ones go to their EP; those of an EP the route does not take stay with the run's other routes
    assert per_stage_options(rr, (("qnn:soc_model", "60"), ("webgpu:x", "1")), {QNN, CPU}) == {QNN: {"soc_model": "60"}}


def test_each_stage_gets_its_own_eps_provider_options(bundle):
    config = load_config(bundle)
    plan = plan_assignment(
        config,
        "stages=context:qnn,iterator:webgpu",
        _targets(context="qnn", iterator="webgpu"),
        {QNN: {"soc_model": "60"}},
    )
    by_stage = {s.stage: s for s in plan.stages}
    assert plan.forced and plan.changed and plan.ep is None
    assert plan.assignment == (("context", QNN), ("iterator", WEBGPU))
    assert [by_stage[s].ep_after for s in ("embeddings", "context", "iterator", "lm_head")] == [CPU, QNN, WEBGPU, CPU]
    assert not by_stage["embeddings"].forced and not by_stage["lm_head"].forced
    raw = plan.config.raw["model"]["decoder"]["pipeline"][0]
    (qnn_opts,) = raw["context"]["session_options"]["provider_options"]
    (gpu_opts,) = raw["iterator"]["session_options"]["provider_options"]
    assert (
        list(qnn_opts) == [eps.genai_provider_name(QNN)] and qnn_opts[eps.genai_provider_name(QNN)]["soc_model"] == "60"
    )
    assert (
        list(gpu_opts) == [eps.genai_provider_name(WEBGPU)]
        and "soc_model" not in gpu_opts[eps.genai_provider_name(WEBGPU)]
    )
    assert raw["embeddings"]["session_options"]["provider_options"] == []
    assert plan.config.raw["model"]["decoder"]["session_options"]["provider_options"] == []  # kept: not all forced


def test_bad_stage_or_stray_options_name_the_route(bundle):
    config = load_config(bundle)
    with pytest.raises(UsageError, match=r"--route r: decoder is not a stage of this bundle"):
        plan_assignment(config, "r", _targets(decoder="qnn"))
    with pytest.raises(UsageError, match=r"--route r: options for webgpu, which no stage of the route takes"):
        plan_assignment(config, "r", _targets(context="qnn"), {WEBGPU: {"x": "1"}})


def test_the_derived_bundle_key_covers_the_whole_mapping(bundle):
    config = load_config(bundle)

    def derive(**stage_eps):
        return derive_bundle(plan_assignment(config, "r", _targets(**stage_eps)))

    a = derive(context="qnn", iterator="webgpu")
    b = derive(context="webgpu", iterator="qnn")
    c = derive(context="qnn", iterator="webgpu", lm_head="webgpu")
    assert len({a.key, b.key, c.key}) == 3 and len({a.path, b.path, c.path}) == 3
    assert all(r.path.name.startswith("stages-") and r.cache == "miss" for r in (a, b, c))
    derived = json.loads((b.path / "genai_config.json").read_text())["model"]["decoder"]["pipeline"][0]
    assert list(derived["context"]["session_options"]["provider_options"][0]) == [eps.genai_provider_name(WEBGPU)]
    assert list(derived["iterator"]["session_options"]["provider_options"][0]) == [eps.genai_provider_name(QNN)]
    again = derive(context="qnn", iterator="webgpu")
    assert again.cache == "hit" and again.key == a.key


def test_perf_refuses_a_bad_per_stage_route_with_exit_2_and_writes_nothing(bundle_copy):
    bundle = bundle_copy(TINY_PIPELINE)  # no _compiled/ yet: the refused runs must not make one
    before = sorted(p.relative_to(bundle) for p in bundle.rglob("*"))
    result = run_winml("perf", bundle, "--route", "stages=context:qnn,decoder:cpu", "--no-store")
    assert result.returncode == 2
    assert "--route stages=context:qnn,decoder:cpu: decoder is not a stage of this bundle" in result.stderr
    result = run_winml("perf", bundle, "--route", "stages=context:bogus", "--no-store")
    assert result.returncode == 2
    assert "--route 'stages=context:bogus': 'bogus' (stage context) is not a known execution provider" in result.stderr
    assert sorted(p.relative_to(bundle) for p in bundle.rglob("*")) == before


def test_a_per_stage_routes_options_are_decided_before_its_stages_targets(monkeypatch):
    """resolve_route settles a per-stage route's options first (from its stages' EP names), then
    asks ep/devices.py for each stage's target: an option that cannot go to the route is exit 2
    before any EP is looked up; with good options, each stage gets its EP's target."""
    from winml_perf.ep import resolved
    from winml_perf.model.runtime import GENAI

    asked: list[tuple[str, str | None]] = []
    monkeypatch.setattr(resolved, "target_for", lambda ep, device, rt, **k: asked.append((ep, k.get("canonical"))))
    rr = parse_route("stages=context:qnn,iterator:cpu")
    with pytest.raises(UsageError, match="is a per-stage route, so an option must say its EP"):
        resolved.resolve_route(rr, GENAI, (("soc_model", "60"),))
    assert asked == []
    route = resolved.resolve_route(rr, GENAI, (("qnn:soc_model", "60"), ("webgpu:x", "1")))
    assert asked == [("qnn", QNN), ("cpu", CPU)]
    assert route.per_ep_options == {QNN: {"soc_model": "60"}} and route.per_stage
