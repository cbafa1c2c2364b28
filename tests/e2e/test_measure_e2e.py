"""The measurement engine on the real GenaiSession and the committed tiny bundles."""

from __future__ import annotations

import os

import pytest

from tests.conftest import BUNDLES
from winml_perf.bundle.decode_bytes import decode_bytes
from winml_perf.bundle.prepare import prepare_route
from winml_perf.ep.devices import resolve_target
from winml_perf.measure.runner import run_cell
from winml_perf.measure.sweep import RunFacts, run_sweep
from winml_perf.model.spec import CellSpec, IterationPolicy, RouteSpec, WarmupPolicy, expand_sweep
from winml_perf.record import roofline
from winml_perf.record.build import cell_record
from winml_perf.record.environment import collect_environment
from winml_perf.record.validation import validate_record

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def env():
    return collect_environment()


@pytest.fixture
def small_bandwidth_cache(tmp_path, monkeypatch):
    monkeypatch.setenv(roofline.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setenv(roofline.ARRAY_MIB_ENV, "16")


def _route(bundle, ep=None) -> RouteSpec:
    label = "config" if ep is None else f"ep={ep}"
    return RouteSpec.from_route(
        prepare_route(bundle, resolve_target(ep, None, "winml-genai"), label=label), bundle=str(bundle)
    )


@pytest.mark.parametrize(
    "name,prompt,new",
    [
        ("tiny-qwen2", 8, 4),
        ("tiny-qwen2-pipeline", 8, 4),
        ("tiny-qwen2-pipeline-fp32", 8, 4),
        ("tiny-qwen2", 128, 32),
        ("tiny-qwen2-pipeline-fp32", 128, 32),
    ],
)
def test_run_cell_on_a_real_bundle_gives_a_valid_record(name, prompt, new, env, small_bandwidth_cache):
    bundle = BUNDLES / name
    r = _route(bundle)
    cell = CellSpec(
        r.label,
        r.session,
        prompt_tokens=prompt,
        max_new_tokens=new,
        warmup=WarmupPolicy(count=1),
        iterations=IterationPolicy(iterations=2),
        route=r.route,
        bundle=r.bundle,
        prepare_ms=r.prepare_ms,
    )
    result = run_cell(cell)
    assert result.ok, result.failure
    assert [len(s.decode_step_ms) for s in result.samples] == [new - 1, new - 1]
    assert all(s.prompt_tokens == prompt and s.new_tokens == new for s in result.samples)
    bandwidth = roofline.cached_bandwidth()  # measured in a child process
    assert bandwidth["array_bytes"] == 16 * 2**20
    record = cell_record(result, run_id="0" * 32, environment=env, bandwidth=bandwidth)
    d = record.to_dict()
    validate_record(d)
    assert d["summary"]["decode_tokens_per_s"] > 0 and d["summary"]["prompt_tokens_per_s"] > 0
    assert (
        d["load"]["model_load_ms"] > 0 and d["load"]["first_generation_ms"] > 0 and d["load"]["prepare_ms"] is not None
    )
    assert d["memory"]["peak_rss_bytes"] > 0
    assert "token_count_mismatch" not in {w["code"] for w in d["warnings"]}
    roof = d["roofline"]
    assert roof["weights_bytes_per_token"] == round(decode_bytes(bundle, prompt, new).total_bytes) > 100_000
    assert 0 < roof["fraction_of_bound"] <= 1, roof  # the physical bound, from a real measured decode rate
    assert [e["device"] for e in roof["devices"]] == ["host"] and "exceeds_bound_fraction" not in roof
    assert d["output"]["identical_across_iterations"] is True  # greedy decoding is deterministic


def test_isolated_interleaved_sweep_over_two_routes(bundle_copy, tiny_flat, env, small_bandwidth_cache):
    bundle = bundle_copy(tiny_flat)
    routes = [_route(bundle), _route(bundle, "cpu")]
    cells = expand_sweep(routes, [8], [4], warmup=WarmupPolicy(count=1), iterations=IterationPolicy(iterations=2))
    done = []
    run = run_sweep(cells, rounds=2, seed=5, isolate=True, on_cell_done=done.append, facts=RunFacts(environment=env))
    validate_record(run.to_dict())
    assert run.status == "ok" and len(done) == 2
    config, forced = run.cells
    assert config.memory.pid != os.getpid() and config.memory.pid != forced.memory.pid  # one child per route
    # the tiny bundle already runs on CPU: forcing ep=cpu changes nothing, and the record says so
    assert "route_no_effect" in {w.code for w in forced.warnings}
    assert config.output.tokens_sha256 == forced.output.tokens_sha256
    assert [o["order"] for o in run.sweep["order"]] and len(run.sweep["order"]) == 2
