"""Runner: warmup, fixed and adaptive iterations, metrics, sweeps and interleaving (in process)."""

from __future__ import annotations

import math

import pytest

from tests.unit.fakes import FAKE_ENV, fake_spec, open_fake_session, read_log
from winml_perf.measure import runner, stopping
from winml_perf.measure.schedule_rounds import batch_size
from winml_perf.measure.sweep import CellExtras, RunFacts, run_sweep
from winml_perf.model.metrics import metric_values
from winml_perf.model.route import CPU, Route, StageRoute
from winml_perf.model.spec import CellSpec, IterationPolicy, PromptSpec, RouteSpec, WarmupPolicy, expand_sweep
from winml_perf.record.build import cell_record
from winml_perf.record.validation import validate_record
from winml_perf.stats import sample_stats as stats
from winml_perf.support.errors import UsageError


def cell(
    prompt=16, new=8, warmup=WarmupPolicy(count=2), iterations=IterationPolicy(iterations=5), label="config", **opts
) -> CellSpec:
    return CellSpec(
        label, fake_spec(**opts), prompt_tokens=prompt, max_new_tokens=new, warmup=warmup, iterations=iterations
    )


def run(c: CellSpec):
    return runner.run_cell(c, open_fake_session, sample_memory=False)


def sweep(cells, **kw):
    kw.setdefault("isolate", False)
    return run_sweep(
        cells,
        open_fake_session,
        **kw,
        facts=RunFacts(environment=FAKE_ENV),
        extras=CellExtras(roofline=False, sample_memory=False),
    )


# -- single cells ------------------------------------------------------------------------------------
def test_fixed_iterations_measure_exact_scripted_numbers():
    r = run(cell(prompt=16, new=8, prompt_ms_per_token=0.5, decode_ms=10.0))
    assert r.ok and r.stop_reason == "iterations"
    assert len(r.warmup_samples) == 2 and len(r.samples) == 5
    s = r.samples[0]
    assert (s.prompt_tokens, s.new_tokens, len(s.decode_step_ms)) == (16, 8, 7)
    assert r.prompt_info["tokens"] == 16 and r.prompt_info["mode"] == "synthetic"
    metrics = {
        m: stats.median(metric_values(r.samples, m)) for m in ("prompt_tokens_per_s", "decode_tokens_per_s", "tpot_ms")
    }
    assert metrics["prompt_tokens_per_s"] == pytest.approx(2000.0)  # 16 tokens / 8 ms
    assert metrics["decode_tokens_per_s"] == pytest.approx(100.0)  # 7 steps / 70 ms
    assert metrics["tpot_ms"] == pytest.approx(10.0)
    assert r.load.model_load_ms is not None and r.load.first_generation_ms is not None and not r.load.session_reused


def test_warmup_runs_until_times_settle_then_stops():
    settle = WarmupPolicy(mode="settle", count=1, max_count=20, settle_window=3, settle_tolerance_pct=5.0)
    r = run(cell(warmup=settle, scales=[3.0, 2.0, 1.5] + [1.0] * 40))
    # calls 1..6 scale 3, 2, 1.5, 1, 1, 1: the last three agree at call 6
    assert len(r.warmup_samples) == 6
    never = run(cell(warmup=WarmupPolicy(mode="settle", count=1, max_count=7), scales=[1.0, 2.0]))
    assert len(never.warmup_samples) == 7  # capped at max_count


def test_adaptive_stops_when_the_median_ci_is_tight_enough_and_is_deterministic():
    policy = IterationPolicy.until_ci(1.0, min_iterations=8, max_iterations=400)
    a = run(cell(iterations=policy, jitter_pct=3.0, jitter_seed=7))
    b = run(cell(iterations=policy, jitter_pct=3.0, jitter_seed=7))
    assert a.stop_reason == "ci_target"
    values = metric_values(a.samples, "decode_tokens_per_s")
    assert 8 <= len(values) < 400
    assert stats.ci_half_width_pct(values) <= 1.0
    assert stats.ci_half_width_pct(values[:-1]) > 1.0 or len(values) == 8  # it stopped at the first chance
    assert len(b.samples) == len(a.samples)


def test_adaptive_gives_up_at_max_iterations_with_a_warning():
    c = cell(iterations=IterationPolicy.until_ci(0.01, min_iterations=6, max_iterations=12), jitter_pct=40.0)
    r = run(c)
    assert r.stop_reason == "max_iterations" and len(r.samples) == 12
    codes = [w.code for w in cell_record(r, run_id="0" * 32, environment=FAKE_ENV).warnings]
    assert "ci_target_not_reached" in codes


def test_adaptive_stops_at_max_time():
    r = run(cell(iterations=IterationPolicy.until_ci(0.01, min_iterations=6, max_iterations=100, max_time_s=1e-9)))
    assert r.stop_reason == "max_time" and len(r.samples) == 1


def test_token_count_mismatch_is_a_warning_and_throughput_uses_observed_counts():
    r = run(cell(new=8, report_new_tokens=5))
    rec = cell_record(r, run_id="0" * 32, environment=FAKE_ENV)
    mismatch = [w for w in rec.warnings if w.code == "token_count_mismatch"]
    assert mismatch and mismatch[0].remedy
    assert rec.summary["decode_tokens_per_s"] == pytest.approx(100.0)


def test_high_variation_and_slow_first_iteration_warnings():
    r = run(
        cell(
            warmup=WarmupPolicy(count=0),
            iterations=IterationPolicy(iterations=8),
            scales=[5.0, 1.0, 1.02, 0.98, 1.0, 1.01, 0.99, 1.0],
        )
    )
    codes = {w.code for w in cell_record(r, run_id="0" * 32, environment=FAKE_ENV).warnings}
    assert {"slow_first_iteration", "high_cv", "outliers"} <= codes
    calm = run(cell())
    assert cell_record(calm, run_id="0" * 32, environment=FAKE_ENV).warnings == ()


def test_a_stage_that_ran_elsewhere_than_asked_is_flagged():
    route = Route("ep=webgpu", "ep=webgpu", "ep=webgpu", (StageRoute("decoder", (), CPU, "WebGpuExecutionProvider"),))
    c = CellSpec(
        "ep=webgpu",
        fake_spec(actual_route={"decoder": "CPUExecutionProvider"}),
        prompt_tokens=4,
        max_new_tokens=2,
        route=route,
    )
    rec = cell_record(run(c), run_id="0" * 32, environment=FAKE_ENV)
    assert rec.route.actual == {"decoder": "CPUExecutionProvider"}
    (w,) = [w for w in rec.warnings if w.code == "ep_mismatch"]
    assert w.data == {"stage": "decoder", "asked": "WebGpuExecutionProvider", "ran": "CPUExecutionProvider"}
    assert not [w for w in rec.warnings if w.code == "route_no_effect"]


def test_plain_inference_session_reports_latency():
    c = CellSpec("config", fake_spec(runtime="winml", decode_ms=4.0), iterations=IterationPolicy(iterations=3))
    r = run(c)
    assert r.ok and c.primary_metric == "latency_ms"
    rec = cell_record(r, run_id="0" * 32, environment=FAKE_ENV)
    assert rec.summary["latency_ms"] == pytest.approx(4.0)
    assert rec.summary["inferences_per_s"] == pytest.approx(250.0)
    assert "decode_tokens_per_s" not in rec.metrics
    assert rec.prompt.mode == "inputs" and rec.shape.prompt_tokens is None
    validate_record(rec.to_dict())


def test_text_prompt_goes_through_the_template_and_is_tiled_to_length():
    c = CellSpec(
        "config", fake_spec(), prompt_tokens=50, max_new_tokens=4, prompt=PromptSpec(text="abc", apply_template=True)
    )
    r = run(c)
    assert r.prompt_info["tokens"] == 50 and r.prompt_info["fitted"]
    assert r.prompt_info["encoded_tokens"] == len("<user>abc</user><assistant>")
    assert all(s.prompt_tokens == 50 for s in r.samples)


def test_an_exception_fails_the_cell_with_its_reason_and_the_sweep_goes_on():
    routes = [RouteSpec("config", fake_spec(raise_on_call=4)), RouteSpec("ep=cpu", fake_spec())]
    rr = sweep(expand_sweep(routes, [8], [4], iterations=IterationPolicy(iterations=3)))
    bad, good = rr.cells
    assert bad.status == "failed" and good.status == "ok"
    assert bad.failure.kind == "error" and bad.failure.phase == "measure"
    assert "scripted failure on call 4" in bad.failure.message
    assert bad.metrics == {} and len(bad.samples.iterations) == 2  # raw samples kept, no numbers claimed
    assert rr.status == "failed"


def test_a_route_that_cannot_load_fails_all_its_cells_once():
    routes = [RouteSpec("config", fake_spec()), RouteSpec("ep=npu", fake_spec(raise_on_load="NPU not here"))]
    rr = sweep(expand_sweep(routes, [8, 16], [4], iterations=IterationPolicy(iterations=2)))
    by = {c.cell_key: c for c in rr.cells}
    for p in (8, 16):
        assert by[f"config|p{p}|n4"].status == "ok"
        f = by[f"ep=npu|p{p}|n4"].failure
        assert f.phase == "load" and "NPU not here" in f.message


# -- sweeps and interleaving -----------------------------------------------------------------------
def test_expand_sweep_is_the_cartesian_product_shape_major():
    routes = [RouteSpec("config", fake_spec()), RouteSpec("ep=cpu", fake_spec())]
    cells = expand_sweep(routes, [16, 128, 512], [32, 128])
    assert len(cells) == 12
    assert [c.key for c in cells[:4]] == ["config|p16|n32", "ep=cpu|p16|n32", "config|p16|n128", "ep=cpu|p16|n128"]
    with pytest.raises(UsageError, match="--route given twice"):
        expand_sweep(routes + routes[:1], [16], [32])
    with pytest.raises(UsageError, match="--prompt-tokens"):
        expand_sweep(routes, [0], [32])
    with pytest.raises(UsageError, match="--max-new-tokens"):
        expand_sweep(routes, [16], [])


def test_routes_run_interleaved_in_a_seeded_shuffled_order_each_round(tmp_path):
    log = tmp_path / "calls.log"
    routes = [RouteSpec(name, fake_spec(path=name, label=name, log_path=str(log))) for name in ("a", "b", "c", "d")]
    cells = expand_sweep(routes, [8], [4], warmup=WarmupPolicy(count=0), iterations=IterationPolicy(iterations=8))
    first = sweep(cells, seed=3)
    again = sweep(cells, seed=3)
    other = sweep(cells, seed=4)
    orders = [o["order"] for o in first.to_dict()["sweep"]["order"]]
    assert len(orders) == 8 and all(sorted(o) == sorted(c.key for c in cells) for o in orders)
    assert len({tuple(o) for o in orders}) > 1  # shuffled anew each round
    assert orders == [o["order"] for o in again.to_dict()["sweep"]["order"]]  # seeded: reproducible
    assert orders != [o["order"] for o in other.to_dict()["sweep"]["order"]]
    executed = [label for label, _ in read_log(log)][:32]  # the first sweep's calls, in the order they ran
    assert executed == [key.split("|")[0] for o in orders for key in o]
    assert all(c.status == "ok" and c.samples.iterations[3].round_index == 3 for c in first.cells)


def test_rounds_spread_fixed_iterations_in_batches():
    routes = [RouteSpec("a", fake_spec()), RouteSpec("b", fake_spec())]
    rr = sweep(expand_sweep(routes, [8], [4], iterations=IterationPolicy(iterations=6)), rounds=3)
    for c in rr.cells:
        assert [s.round_index for s in c.samples.iterations] == [0, 0, 1, 1, 2, 2]
    assert len(rr.sweep["order"]) == 3


def test_each_record_is_handed_over_as_soon_as_its_cell_is_done():
    seen = []
    routes = [RouteSpec("a", fake_spec()), RouteSpec("b", fake_spec())]
    rr = sweep(expand_sweep(routes, [8, 16], [4], iterations=IterationPolicy(iterations=2)), on_cell_done=seen.append)
    assert len(seen) == 4 and {r.cell_key for r in seen} == {c.cell_key for c in rr.cells}
    assert [r.shape.prompt_tokens for r in seen] == [8, 8, 16, 16]  # shape groups finish in order
    assert len({r.run_id for r in seen}) == 1 and seen[0].run_id == rr.run_id


def test_one_session_per_route_serves_every_shape():
    rr = sweep(expand_sweep([RouteSpec("a", fake_spec())], [8, 16], [4, 8], iterations=IterationPolicy(iterations=1)))
    reused = [c.load.session_reused for c in rr.cells]
    assert reused == [False, True, True, True]


def test_pure_stopping_rules():
    fixed = IterationPolicy(iterations=3)
    assert stopping.stop_reason(fixed, [1.0, 1.0], 0.0) is None
    assert stopping.stop_reason(fixed, [1.0] * 3, 0.0) == "iterations"
    adaptive = IterationPolicy.until_ci(1.0, min_iterations=6, max_iterations=10, max_time_s=5.0)
    assert stopping.stop_reason(adaptive, [1.0] * 5, 0.0) is None  # below min_iterations
    assert stopping.stop_reason(adaptive, [1.0] * 6, 0.0) == "ci_target"
    assert stopping.stop_reason(adaptive, [1.0, 2.0] * 5, 0.0) == "max_iterations"
    assert stopping.stop_reason(adaptive, [1.0, 2.0] * 3, 6.0) == "max_time"
    assert stopping.next_batch(fixed, 2, 5) == 1
    assert batch_size(IterationPolicy(iterations=10), 3, interleaved=True) == 4
    assert batch_size(IterationPolicy(iterations=10), None, interleaved=True) == 1
    assert batch_size(IterationPolicy(iterations=10), 3, interleaved=False) == 1


def test_policies_reject_bad_values():
    with pytest.raises(UsageError):
        IterationPolicy(iterations=0)
    with pytest.raises(UsageError):
        IterationPolicy.until_ci(0.0)
    with pytest.raises(UsageError):
        IterationPolicy.until_ci(1.0, min_iterations=10, max_iterations=5)
    with pytest.raises(UsageError):
        WarmupPolicy(mode="sometimes")
    with pytest.raises(UsageError):
        cell(new=0)
    assert math.isnan(stats.median([]))


def test_rich_progress_writes_cells_to_its_console_and_quiet_writes_nothing(capsys):
    import io

    from rich.console import Console

    from winml_perf.measure.progress import NullProgress, RichProgress, make_progress

    buffer = io.StringIO()
    progress = RichProgress(Console(file=buffer, force_terminal=False, width=120))
    routes = [RouteSpec("a", fake_spec()), RouteSpec("b", fake_spec(raise_on_call=2))]
    sweep(expand_sweep(routes, [8], [4], iterations=IterationPolicy(iterations=2)), progress=progress)
    text = buffer.getvalue()
    assert "ok a|p8|n4" in text and "median decode_tokens_per_s 100.0 (" in text  # four digits: 100.0, not 100.00
    assert "FAILED b|p8|n4" in text and "scripted failure" in text
    assert isinstance(make_progress(quiet=True), NullProgress)
    sweep(expand_sweep(routes[:1], [8], [4]), progress=make_progress(quiet=True))
    assert capsys.readouterr().err == ""
