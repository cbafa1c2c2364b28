"""`winml tune --objective goodput` at the serving seam: the race's rounds serve a closed loop per
route through a fake engine on a fake clock (tests/unit/test_serving.py's), so the goodput race must
pick the route that serves most requests within the SLO, drop one that meets it with none, say so
in a verdict naming the objective and the load, store one serving run per round and count its
tokens; routes og.Engine refuses are pruned with why (config refused: exit 2), and tune's flags that
a serving race does not read exit 2 naming the flag."""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import pytest

from tests.unit.test_serving import Clock, FakeEngine
from winml_perf.measure.serving.child import WARMUP_REQUESTS, WARMUP_TOKENS, ServingReply
from winml_perf.measure.serving.loop import run_load
from winml_perf.model.record import CellRecord
from winml_perf.model.route import Route
from winml_perf.model.serving import ENGINE, ServedInvocation, Slo
from winml_perf.model.spec import RouteSpec, SessionSpec
from winml_perf.support.errors import UsageError
from winml_perf.tune.candidates import CONFIG_LABEL
from winml_perf.tune.goal import GOODPUT_METRIC, Budget
from winml_perf.tune.race import Race, RaceSettings
from winml_perf.tune.serving_rounds import ServingRounds, closed_loop, ranked_goodput, serving_tokens
from winml_perf.tune.standings import NO_VERDICT, WINNER, verdict

SLO = Slo(ttft_ms=200.0, tpot_ms=50.0)
#: route -> (engine slots, seconds per step): batching 4 serves 4x; 1 slot queues; 0.2 s steps miss TPOT
ENGINES = {CONFIG_LABEL: (1, 0.01), "ep=batched": (4, 0.01), "ep=slow": (4, 0.2)}


class FakeStore:
    def __init__(self) -> None:
        self.records: list[dict] = []

    def write_record(self, record: CellRecord) -> int:
        self.records.append(json.loads(record.to_json()))
        return len(self.records)


def _spec(label: str) -> RouteSpec:
    return RouteSpec(label, SessionSpec("winml-genai", "bundles/tiny-qwen2"), Route(label), "bundles/tiny-qwen2")


@pytest.fixture
def served(monkeypatch):
    """serve_invocation replaced by the fake engine on a fake clock; returns the jobs it was given."""
    jobs: list = []

    def fake_serve_invocation(route, job, timeout_s):
        jobs.append((route.label, job))
        if route.label == "ep=refused":
            raise UsageError(f"route {route.label}: og.Engine refused the model: not decoder-only", "fix")
        slots, step_s = ENGINES[route.label]
        clock = Clock()
        (load,) = job.loads
        reqs, steps, wall = run_load(
            FakeEngine(clock, slots, step_s), load, lambda p: [1] * p.prompt_tokens, clock, clock.sleep
        )
        inv = ServedInvocation(job.invocation, ENGINE, tuple(reqs), tuple(steps), wall, 1, 2**20, None)
        return ServingReply((inv,), {"configured_max_batch_size": slots}, None, 1.0)

    monkeypatch.setattr("winml_perf.measure.serving.run.serve_invocation", fake_serve_invocation)
    return jobs


def _race(labels, store=None, budget=Budget(seconds=10_000), max_rounds=4):
    load = closed_loop(4, 8, 16, 4, seed=0)
    rounds = ServingRounds({x: _spec(x) for x in labels}, load, SLO, 0, store, environment={"testbed_id": "t"})
    settings = RaceSettings(
        GOODPUT_METRIC, budget, 0, max_rounds=max_rounds, tokens_per_invocation=rounds.tokens_per_invocation
    )
    return Race(list(labels), settings, rounds).run(), rounds


def test_the_goodput_race_picks_the_route_that_serves_most_within_the_slo(served):
    race, _ = _race([CONFIG_LABEL, "ep=batched", "ep=slow"])
    assert race.leader() == "ep=batched"
    assert race.speedup("ep=batched").better  # 4 slots against config's 1: more requests meet the SLO
    assert "ep=slow" in race.dropped and race.dropped["ep=slow"].startswith("worse than ep=batched")
    v = verdict(race, {"ep=batched": "equivalent"}, "goodput", "concurrency 4")
    assert v.kind == WINNER and v.winner == "ep=batched"
    assert v.text.startswith("ep=batched serves ") and "the goodput of config at concurrency 4 [" in v.text
    assert v.text.endswith(", equivalent")
    # every round served the closed loop asked for, the same requests for every route
    assert {job.loads[0].concurrency for _, job in served} == {4}
    assert {job.loads[0].requests for _, job in served} == {8}


def test_a_route_meeting_the_slo_with_no_request_counts_half_a_request_not_zero(served):
    race, _ = _race([CONFIG_LABEL, "ep=slow"], max_rounds=2)
    (value,) = race.data["ep=slow"][0][GOODPUT_METRIC]
    assert value > 0  # finite ratio: an interval exists and says worse
    sp = race.speedup("ep=slow")
    assert sp.worse and math.isfinite(sp.low)
    assert ranked_goodput({"makespan_s": 2.0, "goodput_requests_per_s": 0.0}) == 0.25
    assert ranked_goodput({"makespan_s": 2.0, "goodput_requests_per_s": 3.0}) == 3.0
    assert ranked_goodput({"makespan_s": 0.0, "goodput_requests_per_s": None}) is None


def test_each_round_is_one_stored_serving_run_and_its_tokens_are_counted(served):
    store = FakeStore()
    race, rounds = _race([CONFIG_LABEL, "ep=batched"], store=store, max_rounds=3)
    assert len(rounds.run_ids) == race.rounds and len(set(rounds.run_ids)) == race.rounds
    assert len(store.records) == 2 * race.rounds
    for record in store.records:
        assert record["serving"]["load"]["key"] == "c4" and record["serving"]["slo"]["ttft_ms"] == 200.0
        assert record["summary"]["primary_metric"] == "serve_goodput_requests_per_s"
    by_run = {r["run_id"] for r in store.records}
    assert by_run == set(rounds.run_ids)
    per_route = 8 * (16 + 4) + WARMUP_REQUESTS * (16 + WARMUP_TOKENS)
    assert serving_tokens(closed_loop(4, 8, 16, 4, 0)) == per_route
    assert race.tokens == per_route * 2 * race.rounds


def test_rounds_where_no_request_met_the_slo_are_said_and_when_config_is_one_the_ratio_is_named(served):
    _, rounds = _race([CONFIG_LABEL, "ep=slow"], max_rounds=2)
    assert rounds.missed == {"ep=slow": 2}
    (note,) = rounds.notes()
    assert "ep=slow in 2 round(s): each such round counted half a request" in note and "makespans" not in note
    ENGINES["config-slow"] = (4, 0.2)
    try:
        rounds.missed.clear()
        rounds.specs = {CONFIG_LABEL: _spec("config-slow"), "ep=slow": _spec("ep=slow")}
        rounds(0, [CONFIG_LABEL, "ep=slow"])
    finally:
        del ENGINES["config-slow"]
    (note,) = rounds.notes()
    assert "config in 1" in note and "a ratio to config compares makespans" in note and "loosen --slo" in note


def test_a_token_budget_pays_for_whole_serving_rounds_only_and_one_round_is_no_verdict(served):
    per_route = serving_tokens(closed_loop(4, 8, 16, 4, 0))
    race, _ = _race([CONFIG_LABEL, "ep=batched"], budget=Budget(tokens=per_route * 2 * 1 + 1), max_rounds=10)
    assert race.rounds == 1 and race.tokens == per_route * 2
    assert "cannot pay for another round" in (race.stopped or "")
    v = verdict(race, {}, "goodput", "concurrency 4")
    assert v.kind == NO_VERDICT and v.text.endswith("(objective: goodput at concurrency 4)")


def test_ctrl_c_mid_round_keeps_the_invocations_that_finished(served, monkeypatch):
    import winml_perf.measure.serving.run as run

    serve = run.serve_invocation

    def interrupted(route, job, timeout_s):
        if route.label == "ep=batched":
            raise KeyboardInterrupt
        return serve(route, job, timeout_s)

    monkeypatch.setattr(run, "serve_invocation", interrupted)
    store = FakeStore()
    rounds = ServingRounds(
        {x: _spec(x) for x in (CONFIG_LABEL, "ep=batched")}, closed_loop(4, 8, 16, 4, 0), SLO, 0, store, environment={}
    )
    with pytest.raises(KeyboardInterrupt):
        rounds(0, [CONFIG_LABEL, "ep=batched"])
    assert [r["route"]["label"] for r in store.records] == [CONFIG_LABEL] and len(rounds.run_ids) == 1


def test_a_route_the_engine_refuses_in_its_child_leaves_the_race_with_why(served):
    race, _ = _race([CONFIG_LABEL, "ep=batched", "ep=refused"], max_rounds=2)
    assert "og.Engine refused the model" in race.dropped["ep=refused"]
    assert race.leader() == "ep=batched"


def _pipeline_bundle(tmp_path, name, kind):
    folder = tmp_path / name
    folder.mkdir()
    (folder / "genai_config.json").write_text(json.dumps({"model": {"type": kind}}))
    return folder


def test_prune_sets_aside_routes_the_engine_refuses_and_exits_2_when_config_is_one(tmp_path, monkeypatch):
    from winml_perf.tune import prune as P

    folders = {
        CONFIG_LABEL: _pipeline_bundle(tmp_path, "config", "qwen2"),
        "ep=webgpu": _pipeline_bundle(tmp_path, "webgpu", "decoder-pipeline"),
    }

    def prepared(settings, candidate):
        return SimpleNamespace(
            label=candidate.label,
            session=SimpleNamespace(path=str(folders[candidate.label])),
            recorded_route=SimpleNamespace(stages=(), equivalence=None),
        )

    monkeypatch.setattr(P, "prepare_one", prepared)
    candidates = [SimpleNamespace(label=x, assignment=()) for x in folders]
    settings = P.PruneSettings(tmp_path, 0.5, None, equivalence=False, serving=True)
    survivors, pruned, _ = P.prune(settings, candidates, ({}, {}), say=lambda _: None)
    assert [s.label for s in survivors] == [CONFIG_LABEL]
    (p,) = pruned
    assert p.label == "ep=webgpu" and p.check == P.ENGINE and "decoder-pipeline" in p.reason
    # a single-stream tune does not ask the Engine
    survivors, pruned, _ = P.prune(P.PruneSettings(tmp_path, 0.5, None, equivalence=False), candidates, ({}, {}))
    assert len(survivors) == 2 and not pruned
    folders[CONFIG_LABEL] = folders["ep=webgpu"]
    with pytest.raises(UsageError) as refused:
        P.prune(settings, candidates, ({}, {}), say=lambda _: None)
    assert "--objective goodput" in str(refused.value) and "decoder-pipeline" in str(refused.value)


@pytest.mark.parametrize(
    "args,named",
    [
        (["--concurrency", "4"], "--concurrency is read by --objective goodput only"),
        (["--slo", "ttft=100ms"], "--slo is read by --objective goodput only"),
        (["--objective", "goodput", "--iterations", "3"], "--iterations does not apply to --objective goodput"),
        (["--objective", "goodput", "--max-ttft-ms", "100"], "--max-ttft-ms does not apply"),
        (["--objective", "goodput", "--concurrency", "8", "--requests", "4"], "--requests 4 is fewer than"),
        (["--objective", "goodput", "--concurrency", "0"], "--concurrency 0"),
        (["--objective", "goodput", "--slo", "ttft=fast"], "--slo"),
    ],
)
def test_flags_a_serving_race_does_not_read_exit_2_naming_the_flag(capsys, args, named):
    from tests.conftest import TINY_FLAT
    from winml_perf import cli

    with pytest.raises(SystemExit) as ended:
        cli.main(["tune", str(TINY_FLAT), "--no-store", *args])
    assert ended.value.code == 2
    assert named in capsys.readouterr().err
