"""Issue 34 (cheap enough to leave on): the equivalence check's route passes run in a few worker
processes ("lanes", equivalence/passes/genai_passes.py) where the machine has cores. A pass in a lane must give
the arrays a pass here gives, a route must keep its lane (and the model it loaded there) over the
tune's prompts, and a lane that dies must fail only the pass it died in."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace as NS

import numpy as np
import pytest

from winml_perf.equivalence import check as eq
from winml_perf.equivalence.passes import genai_passes as gp
from winml_perf.equivalence.passes.genai_logits import TeacherForced, teacher_forced
from winml_perf.equivalence.report import cost_line
from winml_perf.support.errors import BenchmarkFailure, UsageError

PIPELINE = Path(__file__).resolve().parents[2] / "bundles" / "tiny-qwen2-pipeline"
TOKENS = [5, 17, 3, 99, 42, 8, 23, 61]


def _linked(src: Path, dest: Path, edit=None) -> Path:
    dest.mkdir()
    for f in src.iterdir():
        if f.is_file() and f.name != "genai_config.json":
            (dest / f.name).hardlink_to(f)
    cfg = json.loads((src / "genai_config.json").read_text())
    if edit is not None:
        edit(cfg)
    (dest / "genai_config.json").write_text(json.dumps(cfg))
    return dest


def _dying_pass(path, prompt_ids, steps, continuation, outputs):
    """A lane's work that ends its process on a folder named 'die', and says why it failed on 'fail'."""
    if path == "die":
        os._exit(3)
    if path == "fail":
        return None, "fail: the pass failed", "fix it", False
    return TeacherForced(path, np.full((steps, 4), len(path), np.float32), tuple(continuation)), "", None, False


@pytest.mark.parametrize(
    ("env", "cores", "lanes"),
    [
        ({"WINML_PERF_CHECK_PROCESSES": "0"}, 64, 0),
        ({"WINML_PERF_CHECK_PROCESSES": "5"}, 2, 5),
        ({}, 2, 0),
        ({}, 8, 1),
        ({}, 16, 3),
        ({}, 128, 3),
    ],
)
def test_the_number_of_lanes_comes_from_the_setting_else_the_cores(monkeypatch, env, cores, lanes):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cores)))
    assert gp.lanes_wanted(env) == lanes


def test_a_setting_that_is_no_count_is_refused_naming_it():
    with pytest.raises(UsageError, match="WINML_PERF_CHECK_PROCESSES='three'"):
        gp.lanes_wanted({"WINML_PERF_CHECK_PROCESSES": "three"})


def test_a_pass_in_a_lane_gives_the_arrays_a_pass_here_gives_and_keeps_its_model(tmp_path):
    route = _linked(PIPELINE, tmp_path / "route")
    here = teacher_forced(route, TOKENS, 4)
    outputs = ["present.0.key"]
    lanes = gp.PassLanes(2)
    try:
        lanes.submit([str(route)], TOKENS, 4, here.continuation, outputs)
        first, kept_first = lanes.result(str(route))
        lanes.submit([str(route)], TOKENS[:6], 3, here.continuation, outputs)  # the tune's next prompt
        second, kept_second = lanes.result(str(route))
    finally:
        lanes.close()
    assert np.array_equal(first.logits, here.logits) and first.continuation == here.continuation
    assert np.array_equal(second.logits, teacher_forced(route, TOKENS[:6], 3, here.continuation).logits)
    assert (kept_first, kept_second) == (False, True)  # the same lane, its model kept from the first prompt
    assert lanes.waited_ms > 0


def test_a_lane_that_dies_fails_only_the_pass_it_died_in():
    lanes = gp.PassLanes(1, work=_dying_pass)
    try:
        lanes.submit(["a", "die", "bb", "fail", "ccc"], TOKENS, 2, [1], [])
        assert lanes.result("a")[0].logits[0, 0] == 1
        with pytest.raises(BenchmarkFailure, match="die: .*ended its worker process"):
            lanes.result("die")
        assert lanes.result("bb")[0].logits[0, 0] == 2  # queued behind it: run in a fresh lane
        with pytest.raises(BenchmarkFailure, match="fail: the pass failed"):
            lanes.result("fail")
        assert lanes.result("ccc")[0].logits[0, 0] == 3
        assert lanes.restarted == 1
    finally:
        lanes.close()


def test_a_check_in_lanes_judges_every_route_as_a_check_in_turn(monkeypatch, tmp_path):
    def other_level(cfg):
        cfg["model"]["decoder"]["session_options"]["graph_optimization_level"] = "ORT_ENABLE_BASIC"

    routes = [
        NS(label="copy", session=NS(path=str(_linked(PIPELINE, tmp_path / "copy")))),
        NS(label="basic", session=NS(path=str(_linked(PIPELINE, tmp_path / "basic", other_level)))),
    ]
    monkeypatch.setenv("WINML_PERF_CHECK_PROCESSES", "0")
    in_turn = eq.judge_routes(eq.check_source(str(PIPELINE)), routes, steps=4)
    monkeypatch.setenv("WINML_PERF_CHECK_PROCESSES", "2")
    in_lanes = eq.judge_routes(eq.check_source(str(PIPELINE)), routes, steps=4)
    assert (in_turn.cost.pass_processes, in_lanes.cost.pass_processes) == (0, 2)
    assert "teacher-forced passes in 2 processes" in cost_line([in_lanes], in_lanes.cost, cached=False)
    for label in ("copy", "basic"):
        a, b = in_turn.by_label[label], in_lanes.by_label[label]
        assert (a.verdict, a.figures, a.stages) == (b.verdict, b.figures, b.stages)
        assert replace(a.layers, cost_ms=0.0) == replace(b.layers, cost_ms=0.0)  # but the time they took


def test_the_tunes_prompts_share_the_lanes_and_count_their_models(monkeypatch, tmp_path):
    from winml_perf.equivalence import pooled as check

    monkeypatch.setattr(check, "near_limit", lambda e: True)
    routes = [NS(label=n, session=NS(path=str(_linked(PIPELINE, tmp_path / n)))) for n in ("a", "b")]
    reports = {}
    for n in ("0", "2"):
        monkeypatch.setenv("WINML_PERF_CHECK_PROCESSES", n)
        judged, reports[n] = check.judge(str(PIPELINE), routes, cache=False)
        assert all("over 3 check prompts" in judged[label].line for label in ("a", "b"))
    assert reports["2"].figures["pass_processes"] == 2 and "in 2 processes" in reports["2"].line
    # each route loaded once (in its lane) and taken kept on the two later prompts, as in this process
    for count in ("models_loaded", "models_reused"):
        assert reports["0"].figures[count] == reports["2"].figures[count]
    assert reports["2"].figures["models_reused"] >= 6
