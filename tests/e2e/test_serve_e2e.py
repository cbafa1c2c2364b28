"""`winml serve` with onnxruntime-genai's real Engine on the committed tiny bundles (issue 40): the
closed loop batches requests (the Engine's 4 slots on tiny-qwen2) beside the sequential batch-1
baseline; an open loop far above capacity is called saturated with its queue growing; the Engine's
refusal of a decoder-pipeline exits 2 naming why, and --fallback batch1 serves it labelled; a second
route (the QNN emulator) gets a verdict per concurrency. Runs are short: what ran, not how fast."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import BUNDLES, TINY_FLAT, TINY_PIPELINE, run_winml
from winml_perf.record.validation import validate_record
from winml_perf.results.store import open_store

pytestmark = [pytest.mark.e2e]

LEAN = ("--requests", "8", "--prompt-tokens", "16", "--max-new-tokens", "8", "--invocations", "2", "-q")
LEAN1 = (*LEAN[:-2], "1", "-q")  # one invocation


def test_closed_loop_batches_beside_the_sequential_baseline_and_is_stored(tmp_path: Path):
    out, store = tmp_path / "run.json", tmp_path / "r.db"
    result = run_winml("serve", TINY_FLAT, "--concurrency", "1,4", *LEAN, "-o", out, "--store", store)
    assert result.returncode == 0, result.stderr[-3000:]
    run = json.loads(out.read_text())
    validate_record(run)
    cells = {c["serving"]["load"]["key"]: c for c in run["cells"]}
    assert set(cells) == {"seq", "c1", "c4"}
    seq, c4 = cells["seq"]["serving"], cells["c4"]["serving"]
    assert seq["server"] == "sequential-generators" and c4["server"] == "engine"
    assert c4["capabilities"]["configured_max_batch_size"] == 4
    for inv in c4["invocations"]:
        assert len(inv["requests"]) == 8 and all(r["generated_tokens"] == 8 for r in inv["requests"])
        assert max(s[2] for s in inv["steps"]) == 4  # four requests in one engine step: batched
        assert len(inv["steps"]) < 8 * 8  # fewer steps than tokens
    assert all(max(s[2] for s in inv["steps"]) == 1 for inv in seq["invocations"])
    assert c4["figures"]["output_tokens_per_s"]["invocations"] == 2
    assert c4["speculative"]["offered"] is False
    assert cells["c4"]["memory"]["peak_rss_bytes"] > 0
    assert "TTFT p50/p90/p99 ms" in result.stdout and "batching gain" in result.stdout
    assert "at concurrency 4 the engine serves" in result.stdout
    listed = run_winml("results", "list", "--store", store, "--format", "json")
    assert listed.returncode == 0 and len(listed.json()) == 3
    drawn = run_winml("dashboard", "--serving", out, "-o", tmp_path / "site")
    assert drawn.returncode == 0, drawn.stderr
    page = (tmp_path / "site" / "serving.html").read_text()
    assert 'data-charts="2"' in page and "config c4:" in page


def test_the_serving_page_refuses_a_run_without_serving_cells(tmp_path: Path):
    run = tmp_path / "perf.json"
    run.write_text(json.dumps({"kind": "run", "schema_version": 1, "cells": []}))
    result = run_winml("dashboard", "--serving", run, "-o", tmp_path / "site")
    assert result.returncode == 2 and "no closed- or open-loop serving cell" in result.stderr
    assert not (tmp_path / "site" / "serving.html").exists()


def test_an_open_loop_above_capacity_is_saturated(tmp_path: Path):
    out = tmp_path / "run.json"
    args = ("--request-rate", "100000/s", "--requests", "24", "--prompt-tokens", "16", "--max-new-tokens", "16")
    result = run_winml("serve", TINY_FLAT, *args, "--invocations", "1", "--no-store", "-q", "-o", out)
    assert result.returncode == 0, result.stderr[-3000:]
    (cell,) = json.loads(out.read_text())["cells"]
    sat = cell["serving"]["saturation"]
    assert sat["saturated"] and sat["per_invocation"][0]["queue_growing"]
    assert sat["per_invocation"][0]["queue_ms_last_third_p50"] > sat["per_invocation"][0]["queue_ms_first_third_p50"]
    assert "saturated: 100000 req/s offered" in result.stdout


def test_a_store_it_cannot_open_is_refused_before_serving(tmp_path: Path):
    """--store naming a folder was refused only after every invocation had served, and -o was never
    written: the whole run was lost. It is refused before anything is served, as perf refuses it."""
    out = tmp_path / "run.json"
    refused = run_winml("serve", TINY_FLAT, "--concurrency", "1", *LEAN1[:-1], "--store", tmp_path, "-o", out)
    assert refused.returncode == 2
    assert f"results store {tmp_path} is a folder, not a database file" in refused.stderr
    assert "invocation" not in refused.stderr and "served" not in refused.stderr and not out.exists()


def test_ctrl_c_mid_serve_exits_130_saying_so_once(tmp_path: Path):
    """Ctrl-C reaches the whole process group: the serving child printed its own 'interrupted by SIGINT'
    beside the parent's. The child leaves the signal to the parent, which says it once. What finished
    is kept: the finished invocation's cells were lost (no -o file, nothing stored)."""
    err, out, store = tmp_path / "stderr.txt", tmp_path / "run.json", tmp_path / "r.db"
    args = ("--concurrency", "1,2,4", "--requests", "64", "--prompt-tokens", "16", "--max-new-tokens", "64")
    kept = ("--invocations", "20", "--store", str(store), "-o", str(out))
    with err.open("w") as sink:
        proc = subprocess.Popen(
            [sys.executable, "-m", "winml_perf", "serve", str(TINY_FLAT), *args, *kept],
            stdout=subprocess.DEVNULL,
            stderr=sink,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            start_new_session=True,
        )
        deadline = time.monotonic() + 120
        while "invocation 1/20 served" not in err.read_text() and proc.poll() is None:
            assert time.monotonic() < deadline, err.read_text()
            time.sleep(0.1)
        time.sleep(0.3)  # the second invocation's child is starting or serving (an invocation takes over 1 s)
        os.killpg(proc.pid, signal.SIGINT)
        assert proc.wait(timeout=60) == 130, err.read_text()
    text = err.read_text()
    assert text.count("interrupted by SIGINT") == 1, text
    assert "Traceback" not in text and "KeyboardInterrupt" not in text
    said = " ".join(text.split())
    assert "interrupted by SIGINT: 4 cell(s) of the finished invocations (config: 1 of 20)" in said
    assert f"stored in {store} and written to {out}" in said
    run = json.loads(out.read_text())
    cells = run["cells"]
    assert sorted(c["serving"]["load"]["key"] for c in cells) == ["c1", "c2", "c4", "seq"]
    assert all(len(c["serving"]["invocations"]) == 1 for c in cells)
    # the record says it was cut short, as perf's does: no night to compare as a whole
    assert run["status"] == "failed" and run["sweep"]["interrupted"] == "SIGINT"
    assert run["sweep"]["rounds"] == 1 and run["sweep"]["invocations"] == 20
    assert [o["order"] for o in run["sweep"]["order"]] == [["config"]]  # the second round finished nothing
    with open_store(store, create=False) as s:
        assert len(s.records()) == 4


def test_the_engine_refuses_a_pipeline_exit_2_or_batch1_fallback_labelled(tmp_path: Path):
    store = tmp_path / "r.db"
    refused = run_winml("serve", TINY_PIPELINE, "--concurrency", "2", *LEAN, "--store", store)
    assert refused.returncode == 2
    assert "decoder-pipeline" in refused.stderr and "--fallback batch1" in refused.stderr
    assert not store.exists()
    out = tmp_path / "run.json"
    served = run_winml(
        "serve", TINY_PIPELINE, "--concurrency", "2", "--fallback", "batch1", *LEAN1, "--no-store", "-o", out
    )
    assert served.returncode == 0, served.stderr[-3000:]
    cells = {c["serving"]["load"]["key"]: c["serving"] for c in json.loads(out.read_text())["cells"]}
    assert cells["c2"]["server"] == "batch1-generators" and "refused" in cells["c2"]["server_note"]
    assert "batch1-generators" in served.stdout and "served by batch-1 generators" in served.stdout


def test_a_static_npu_pipeline_is_served_at_its_prompt_length_or_refuses_another(tmp_path: Path):
    npu, route = BUNDLES / "tiny-qwen2-npu", ("--ep", "cpu", "--concurrency", "2", "--fallback", "batch1")
    bad = run_winml("serve", npu, *route, *LEAN1[:2], "--prompt-tokens", "8", "--no-store", "-q")
    assert bad.returncode == 2 and "static prompt length of 16 tokens" in bad.stderr
    out = tmp_path / "run.json"
    lean = ("--requests", "4", "--max-new-tokens", "4", "--invocations", "1")
    served = run_winml("serve", npu, *route, *lean, "--no-store", "-o", out)
    assert served.returncode == 0, served.stderr[-3000:]
    assert "serving at it" in served.stderr
    cells = json.loads(out.read_text())["cells"]
    assert {c["serving"]["server"] for c in cells} == {"sequential-generators", "batch1-generators"}
    assert all(c["shape"]["prompt_tokens"] == 16 for c in cells)


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (("--concurrency", "0"), "--concurrency"),
        (("--concurrency", "2", "--slo", "ttft=soon"), "--slo"),
        (("--request-rate", "fast"), "--request-rate"),
        (("--concurrency", "2", "--prompt-tokens", "64-16"), "--prompt-tokens"),
        ((), "no load"),
        (("--concurrency", "2", "--reference", "ep=webgpu"), "--reference"),
        (("--concurrency", "2", "--fallback", "serial"), "--fallback"),
        # labelled concurrency 4 while at most 2 were ever in flight (as tune refuses it)
        (("--concurrency", "1,4", "--requests", "2"), "--requests 2 is fewer than --concurrency 4"),
        # failed in the serving child, naming no flag and pointing at the route's EPs
        (("--concurrency", "1", "--prompt-tokens", "1020", "--max-new-tokens", "8"), "exceeds the bundle's context"),
    ],
)
def test_bad_load_flags_exit_2_naming_the_flag(flags, named, tmp_path: Path):
    store = tmp_path / "r.db"
    result = run_winml("serve", TINY_FLAT, *flags, "--store", store)
    assert result.returncode == 2 and named in result.stderr
    assert not store.exists()


@pytest.mark.qnn
def test_two_routes_get_a_verdict_per_concurrency_here_and_in_compare_routes(tmp_path: Path):
    out, store = tmp_path / "run.json", tmp_path / "r.db"
    routes = ("--route", "config", "--route", "ep=qnn", "--concurrency", "2")
    result = run_winml("serve", TINY_FLAT, *routes, *LEAN, "--store", store, "-o", out)
    assert result.returncode == 0, result.stderr[-3000:]
    cells = json.loads(out.read_text())["cells"]
    assert {c["route"]["label"] for c in cells} == {"config", "ep=qnn"}
    qnn = next(c for c in cells if c["route"]["label"] == "ep=qnn" and c["serving"]["load"]["key"] == "c2")
    assert qnn["serving"]["server"] == "engine"  # the Engine serves the QNN emulator's route
    assert "at concurrency 2, ep=qnn serves" in result.stdout and "goodput of config" in result.stdout
    compared = run_winml("compare", "routes", "--store", store, "--format", "json")
    assert compared.returncode == 0, compared.stderr
    doc = compared.json()
    verdict = next(v for v in doc["serving"] if v["load"] == "c2" and v["against"] == "config")
    assert verdict["route"] == "ep=qnn" and verdict["pairs"] == 2 and verdict["ratio"] > 0


@pytest.mark.qnn
def test_a_route_on_an_emulator_with_stages_on_cpu_says_so(tmp_path: Path):
    """`winml serve --route ep=qnn` showed QNN's figures with nothing saying they were the emulator's
    and that most nodes ran on CPU (`winml perf` says both); the cells kept no warning."""
    out = tmp_path / "run.json"
    result = run_winml("serve", TINY_FLAT, "--route", "ep=qnn", "--concurrency", "1", *LEAN1, "--no-store", "-o", out)
    err = " ".join(result.stderr.split())
    assert result.returncode == 0, err
    assert "note: route ep=qnn: QNNExecutionProvider ran on an emulator on the CPU here" in err
    assert "warning: route ep=qnn: stage decoder runs" in err and "nodes on CPU" in err
    assert "--strict" not in err  # serve takes no --strict
    assert "ep=qnn (emulated)" in result.stdout  # the table's route, as every listing shows it
    cells = json.loads(out.read_text())["cells"]
    assert len(cells) == 2  # the sequential baseline and concurrency 1
    assert all([w["code"] for w in c["warnings"]] == ["partial_cpu_fallback"] for c in cells)
