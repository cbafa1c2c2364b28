"""Peak RSS of the model apart from the harness's own (issue 28): the sampler takes the process's
RSS before the session loads as its baseline and reports the peak above it."""

from __future__ import annotations

import mmap

from tests.unit.fakes import FAKE_ENV, fake_spec, open_fake_session
from winml_perf.measure.memory import MemorySampler
from winml_perf.measure.sweep import CellExtras, RunFacts, run_sweep
from winml_perf.model.route import Route
from winml_perf.model.spec import IterationPolicy, RouteSpec, expand_sweep
from winml_perf.publish.render import render_run, run_text
from winml_perf.record.validation import validate_record


def test_the_baseline_is_taken_before_the_model_and_the_model_is_the_peak_above_it():
    sampler = MemorySampler(device=False).start()
    try:
        before = sampler.snapshot()["baseline_rss_bytes"]
        # what a model load adds: a fresh mapping (freed heap a worker already holds would not grow RSS)
        ballast = mmap.mmap(-1, 64 * 2**20)
        for page in range(0, len(ballast), mmap.PAGESIZE):
            ballast[page] = 1  # touch every page
        snap = sampler.snapshot()
    finally:
        sampler.stop()
    assert snap["baseline_rss_bytes"] == before and snap["peak_rss_bytes"] >= before + 60 * 2**20
    assert snap["model_rss_bytes"] == snap["peak_rss_bytes"] - before
    ballast.close()


def test_a_cell_record_and_the_table_carry_the_models_memory():
    routes = [RouteSpec("config", fake_spec(), route=Route("config", "config", "config"))]
    cells = expand_sweep(routes, [8], [4], iterations=IterationPolicy(iterations=2, invocations=2))
    run = run_sweep(
        cells,
        open_fake_session,
        isolate=False,
        facts=RunFacts(environment=FAKE_ENV, argv=["perf"]),
        extras=CellExtras(roofline=False),
    )
    (cell,) = run.cells
    memory = cell.memory
    assert memory.model_rss_bytes is not None and memory.peak_rss_bytes is not None
    assert 0 <= memory.model_rss_bytes < memory.peak_rss_bytes
    assert memory.baseline_rss_bytes is not None and memory.baseline_rss_bytes > 0
    validate_record(cell.to_dict())
    assert "model MiB" in render_run(run, width=10_000) and "model_rss_mib" in run_text(run, "csv")
