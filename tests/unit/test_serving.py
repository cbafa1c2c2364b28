"""`winml serve` at the fake engine seam: the load loop (closed, open, sequential) against a scripted
server on a fake clock, the figures and the saturation verdict (stats/serving.py), the record's
serving section through JSON and the schema, the comparisons and the flags' errors."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from tests.results_fakes import environment
from winml_perf.compare.serving import batching_gains, route_verdicts
from winml_perf.measure.serving.loop import plan, run_load
from winml_perf.model.record import CellRecord
from winml_perf.model.route import Route
from winml_perf.model.serving import BATCH1, ENGINE, SEQUENTIAL, Lengths, LoadSpec, ServedInvocation, Slo
from winml_perf.model.spec import RouteSpec, SessionSpec
from winml_perf.record.serving import serving_record, serving_section
from winml_perf.record.validation import validate_record
from winml_perf.session.genai_engine import Token, engine_refusal
from winml_perf.stats import serving as S
from winml_perf.support.errors import UsageError


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        self.t += s


class FakeEngine:
    """Continuous batching with ``slots`` slots: each step costs ``step_s`` on the clock and gives one
    token to every admitted request; waiting requests are admitted as slots free (FIFO)."""

    kind = ENGINE

    def __init__(self, clock: Clock, slots: int, step_s: float = 0.01) -> None:
        self.clock, self.slots, self.step_s = clock, slots, step_s
        self.active: dict[int, int] = {}
        self.queue: list[tuple[int, int]] = []
        self.submitted: list[tuple[int, int, int]] = []

    def capabilities(self):
        return {"configured_max_batch_size": self.slots}

    def submit(self, rid, prompt_ids, max_new_tokens):
        self.submitted.append((rid, len(prompt_ids), max_new_tokens))
        self.queue.append((rid, max_new_tokens))

    def step(self):
        while self.queue and len(self.active) < self.slots:
            rid, n = self.queue.pop(0)
            self.active[rid] = n
        self.clock.t += self.step_s
        out = []
        for rid in list(self.active):
            self.active[rid] -= 1
            done = self.active[rid] == 0
            out.append(Token(rid, 7, done, "MAX_GENERATED_TOKENS" if done else ""))
            if done:
                del self.active[rid]
        return out

    def pending(self):
        return bool(self.active or self.queue)

    def waiting(self):
        return len(self.queue)

    def speculative(self):
        return {"rounds": 0, "draft_tokens_proposed": 0, "target_forward_passes": 1}


def _load(mode="closed", n=8, new=4, c=4, rate=None, prompt=Lengths(16, 16), seed=0):
    return LoadSpec(mode, n, prompt, Lengths(new, new), c if mode == "closed" else None, rate, seed)


def _serve(load, slots=4, step_s=0.01):
    clock = Clock()
    engine = FakeEngine(clock, slots, step_s)
    reqs, steps, wall = run_load(engine, load, lambda p: [1] * p.prompt_tokens, clock, clock.sleep)
    return engine, reqs, steps, wall


def test_closed_loop_keeps_concurrency_in_flight_and_batches_them():
    engine, reqs, steps, wall = _serve(_load(c=4, n=8, new=4), slots=4)
    assert len(reqs) == 8 and all(r.generated == 4 for r in reqs)
    assert len(steps) == 8  # two waves of 4 requests x 4 tokens, batched
    assert [s.batch for s in steps] == [4] * 8
    assert math.isclose(wall, 0.08)
    # the second wave arrives as the first ends: its TTFT counts from then, not from 0
    late = [r for r in reqs if r.arrival_s > 0]
    assert len(late) == 4 and all(math.isclose(r.ttft_ms, 10.0) for r in late)
    f = S.invocation_figures(reqs, steps, Slo(ttft_ms=200))
    assert math.isclose(f["output_tokens_per_s"], 32 / 0.08)
    assert math.isclose(f["requests_per_s"], 100.0)
    assert f["batch_occupancy_mean"] == 4.0 and f["batch_max"] == 4.0


def test_sequential_runs_one_request_at_a_time():
    _, reqs, steps, _ = _serve(_load("sequential", n=4, new=4), slots=4)
    assert len(steps) == 16 and {s.batch for s in steps} == {1}
    ends = [r.token_s[-1] for r in reqs]
    starts = [r.arrival_s for r in reqs]
    assert all(starts[i + 1] >= ends[i] for i in range(3))  # never two in flight


def test_queueing_delay_and_waiting_when_concurrency_exceeds_the_slots():
    _, reqs, steps, _ = _serve(_load(c=8, n=8, new=4), slots=4)
    queued = sorted(r.queue_ms for r in reqs)
    assert queued[:4] == [0.0] * 4 and all(math.isclose(q, 40.0) for q in queued[4:])
    assert steps[0].waiting == 4 and steps[-1].waiting == 0


def test_open_loop_arrivals_are_poisson_seeded_and_the_same_for_every_route():
    a, b, c = (plan(_load("open", n=200, rate=50.0, seed=s)) for s in (3, 3, 4))
    assert [p.due_s for p in a] == [p.due_s for p in b] != [p.due_s for p in c]
    gaps = [y.due_s - x.due_s for x, y in zip(a, a[1:], strict=False)]
    assert 0.015 < sum(gaps) / len(gaps) < 0.025  # mean gap ~ 1/50 s


def test_lengths_drawn_from_a_range_with_the_seed():
    load = LoadSpec("closed", 50, Lengths(8, 32), Lengths(4, 8), 2, seed=1)
    p = plan(load)
    assert {x.prompt_tokens for x in p} <= set(range(8, 33)) and len({x.prompt_tokens for x in p}) > 5
    assert [x.max_new_tokens for x in p] == [x.max_new_tokens for x in plan(load)]
    engine, reqs, _, _ = _serve(load, slots=2)
    assert [(r, n) for r, _, n in engine.submitted] == [(x.index, x.max_new_tokens) for x in p]
    assert [r.generated for r in reqs] == [x.max_new_tokens for x in p]


def test_an_open_loop_above_capacity_is_saturated_and_below_it_keeps_up():
    # capacity: 4 slots x (1 token / 10 ms) / 4 tokens = 100 requests/s
    _, reqs, steps, _ = _serve(_load("open", n=60, new=4, rate=1000.0), slots=4)
    verdict = S.saturation(reqs, steps, 1000.0)
    assert verdict["saturated"] and verdict["queue_growing"]
    assert verdict["queue_ms_last_third_p50"] > 2 * verdict["queue_ms_first_third_p50"]
    assert "saturated" in verdict["verdict"] and verdict["waiting_max"] > 10
    _, reqs, steps, _ = _serve(_load("open", n=60, new=4, rate=20.0), slots=4)
    calm = S.saturation(reqs, steps, 20.0)
    assert not calm["saturated"] and calm["verdict"].startswith("keeps up")


def test_goodput_counts_only_requests_meeting_every_slo():
    _, reqs, steps, _ = _serve(_load(c=8, n=8, new=4), slots=4)
    # the first four have TTFT 10 ms, the queued four 50 ms
    f = S.invocation_figures(reqs, steps, Slo(ttft_ms=20.0, tpot_ms=50.0))
    assert f["slo_met_pct"] == 50.0
    assert math.isclose(f["goodput_requests_per_s"], f["requests_per_s"] / 2)
    assert Slo(ttft_ms=5.0).met(None, None, None) is False


def test_slo_and_lengths_parse_or_exit_2_naming_the_flag():
    assert Slo.parse("ttft=200ms,tpot=50ms") == Slo(200.0, 50.0)
    assert Slo.parse("e2e=2s").e2e_ms == 2000.0
    for bad in ("ttft=fast", "latency=2ms", "ttft=1ms,ttft=2ms", ""):
        with pytest.raises(UsageError, match="--slo"):
            Slo.parse(bad)
    assert Lengths.parse("16-64", "--prompt-tokens") == Lengths(16, 64)
    for bad in ("0", "64-16", "a"):
        with pytest.raises(UsageError, match="--prompt-tokens"):
            Lengths.parse(bad, "--prompt-tokens")


def test_the_engine_refuses_decoder_pipelines():
    assert "decoder-pipeline" in (engine_refusal({"model": {"type": "decoder-pipeline"}}) or "")
    assert engine_refusal({"model": {"type": "qwen2"}}) is None


ENVIRONMENT = environment("t", "2026-12-04T00:00:00Z", "abc", "0.18.0")


def _cell(label, load, rates, server=ENGINE, index=0):
    """A serving cell whose invocations gave these output tokens/s (1 request of 10 tokens each)."""
    served = []
    for i, rate in enumerate(rates):
        span = 10 / rate
        times = tuple(span * (k + 1) / 10 for k in range(10))
        from winml_perf.model.serving import RequestTiming, StepPoint

        req = RequestTiming(0, 0.0, 0.0, times, 16, 10, "MAX_GENERATED_TOKENS")
        served.append(ServedInvocation(i, server, (req,), (StepPoint(0.0, span, 1, 0),), span, 1, 2**20, None))
    section = serving_section(load, Slo(ttft_ms=1e6), served, {"configured_max_batch_size": 4}, None)
    route = RouteSpec(label, SessionSpec("winml-genai", "bundles/tiny-qwen2"), Route(label), "bundles/tiny-qwen2")
    return serving_record(
        run_id="a" * 32,
        index=index,
        route=route,
        section=section,
        model_load_ms=5.0,
        memory={"peak_rss_bytes": 2**20},
        environment=ENVIRONMENT,
        sweep={"command": "serve"},
        started_utc="2026-12-04T00:00:00Z",
        finished_utc="2026-12-04T00:00:01Z",
    )


def test_a_serving_record_round_trips_and_matches_the_schema():
    cell = _cell("config", _load(c=4), [100.0, 110.0, 90.0])
    d = json.loads(cell.to_json())
    validate_record(d)
    back = CellRecord.from_dict(d)
    assert back.serving == cell.serving
    assert d["serving"]["figures"]["output_tokens_per_s"]["invocations"] == 3
    assert d["summary"]["primary_metric"] == "serve_goodput_requests_per_s"
    assert d["cell_key"] == "config|c4|p16|n4"


def test_single_stream_records_have_no_serving_key():
    cell = _cell("config", _load(c=4), [100.0])
    from dataclasses import replace

    assert "serving" not in replace(cell, serving=None).to_dict()


def test_batching_gain_and_route_verdicts_are_paired_by_invocation():
    seq = _cell("config", _load("sequential"), [100.0, 120.0, 80.0], SEQUENTIAL)
    c4 = _cell("config", _load(c=4), [210.0, 250.0, 170.0])
    gpu = _cell("ep=webgpu", _load(c=4), [420.0, 500.0, 340.0])
    (gain,) = batching_gains([seq, c4, gpu])
    assert gain.route == "config" and 2.0 < gain.ratio.estimate < 2.2 and gain.ratio.low > 1.0
    assert "at concurrency 4 the engine serves 2.1" in gain.sentence
    (v,) = route_verdicts([seq, c4, gpu])
    assert math.isclose(v.ratio.estimate, 2.0, rel_tol=1e-9)
    assert v.sentence.startswith("at concurrency 4, ep=webgpu serves 2.00x the goodput of config")


def test_a_fallback_cell_says_how_it_was_served():
    cell = _cell("config", _load(c=2), [100.0], BATCH1)
    assert cell.serving is not None and cell.serving.server == BATCH1


def test_the_serving_page_draws_a_curve_per_route_through_its_concurrencies():
    from winml_perf.publish.serving_chart import serving_page

    cells = [
        _cell("config", _load("sequential"), [100.0], SEQUENTIAL),
        _cell("config", _load(c=1), [100.0]),
        _cell("config", _load(c=4), [300.0]),
        _cell("ep=webgpu", _load(c=1), [50.0]),
        _cell("ep=webgpu", _load(c=4), [180.0]),
        _cell("ep=webgpu", _load("open", rate=500.0), [150.0], index=5),
    ]
    run = {"kind": "run", "cells": [json.loads(c.to_json()) for c in cells]}
    page, charts = serving_page(run)
    assert charts == 2  # TTFT and TPOT against tokens/s, for the one bundle and testbed
    assert page.count('class="route"') == 4  # a line per route per chart, through c1 and c4
    assert page.count('class="point"') == 2 * 5  # the sequential baseline is not a point
    assert "config c4: 300.0 tok/s" in page and "ep=webgpu r500/s" in page
    assert page.count('class="occupancy"') == 6  # every cell's batch over time, the baseline's too
    assert serving_page({"kind": "run", "cells": []})[1] == 0


def test_a_closed_loop_with_fewer_requests_than_its_concurrency_is_refused():
    """Four in flight over two requests never holds four: the load point would be labelled c4 wrongly."""
    with pytest.raises(UsageError) as info:
        _load(c=4, n=2)
    assert info.value.message == "--requests 2 is fewer than --concurrency 4: the loop would never hold 4 in flight"
    assert _load(c=4, n=4).concurrency == 4


def test_requests_in_flight_that_cannot_fit_memory_are_refused_naming_the_concurrency(monkeypatch):
    """`winml serve` checked neither the context nor the memory its requests in flight need."""
    from winml_perf.measure import validate

    doc = {"model": {"context_length": 4096, "decoder": {}}, "search": {"max_length": 4096}}
    monkeypatch.setattr(validate, "available_memory_bytes", lambda: 2**30)
    monkeypatch.setattr(
        "winml_perf.session.genai_session.token_facts",
        lambda doc, path: type("F", (), {"context_length": 4096, "kv_bytes_per_token": 2**16})(),
    )
    validate.check_fits(doc, Path("genai_config.json"), 1024, 1024, in_flight=4)  # 4 x 2048 x 64 KiB = 0.5 GiB
    with pytest.raises(UsageError) as info:
        validate.check_fits(doc, Path("genai_config.json"), 1024, 1024, in_flight=16)
    assert info.value.message.startswith(
        "--concurrency 16 requests in flight, each --prompt-tokens 1024 with --max-new-tokens 1024, would need about 2.0 GiB"
    )
    assert info.value.remedy == "ask for fewer tokens or a lower --concurrency"
