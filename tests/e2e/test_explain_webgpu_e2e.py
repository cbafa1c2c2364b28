"""`winml perf --explain` with WebGPU as the second EP (software Vulkan without a GPU; see
test_webgpu_e2e.py for how the driver is provided, and why CI fails rather than skips without it)."""

from __future__ import annotations

import pytest

from tests.conftest import TINY_PIPELINE
from tests.e2e.test_explain_e2e import check_sums, stages_of
from tests.e2e.test_webgpu_e2e import webgpu, webgpu_env  # noqa: F401  (fixtures)
from winml_perf.explain.difference import record_difference
from winml_perf.record.validation import validated_cell

pytestmark = [pytest.mark.e2e, pytest.mark.webgpu]

WEBGPU = "WebGpuExecutionProvider"
LEAN = (
    "--invocations",
    "1",
    "--prompt-tokens",
    "16",
    "--max-new-tokens",
    "6",
    "--warmup",
    "1",
    "--iterations",
    "1",
    "--format",
    "json",
    "-q",
    "--no-store",
)


def test_explain_counts_the_forced_routes_copies_and_compares_it_with_config(webgpu):  # noqa: F811  (the imported fixture)
    result = webgpu("perf", TINY_PIPELINE, "--route", "config", "--route", "ep=webgpu", "--explain", *LEAN)
    assert result.returncode == 0, result.stderr[-3000:]
    cells = {c["route"]["label"]: c for c in result.json()["cells"]}
    for cell in cells.values():
        validated_cell(cell)
        assert "error" not in cell["explain"], cell["explain"]
        check_sums(cell)
    forced = cells["ep=webgpu"]
    iterator = stages_of(forced, "decode_step")["iterator"]
    eps = {o["ep"] for o in iterator["ops"]}
    assert WEBGPU in eps  # the forced stage's kernels ran on WebGPU
    copies = [o for o in iterator["ops"] if o["op"] in ("MemcpyFromHost", "MemcpyToHost")]
    assert copies and all(o["ep"] == WEBGPU and o["count"] >= 1 and o["bytes"] > 0 for o in copies)
    assert forced["explain"]["phases"]["decode_step"]["copies"]["count"] >= 1
    assert not [
        o for s in cells["config"]["explain"]["phases"]["decode_step"]["stages"] for o in s["ops"] if o["ep"] == WEBGPU
    ]
    diffs = {d.phase: d for d in record_difference(cells["config"], forced)}
    assert set(diffs) == {"prompt", "decode_step"}
    d = diffs["decode_step"]
    assert d.named_ms + d.host.delta_ms == pytest.approx(d.delta_ms, abs=1e-5)
    for diff in diffs.values():  # a partitioned route: WebGPU kernels, CPU nodes between them, copies
        layout = diff.layout()
        assert all(abs(g.delta_ms) <= 0.10 * abs(diff.delta_ms) for g in layout.groups)  # no unnamed lump
        assert len(layout.named) + sum(g.count for g in layout.groups) == len(diff.contributions)
        named = 100 * sum(c.delta_ms for c in layout.named) / diff.delta_ms
        assert f"named stages/operators/copies: {named:.0f} % of the difference" in result.stderr
    assert " smaller contributions " not in result.stderr  # small ones are grouped by kind, never in one lump
    assert (
        "difference ep=webgpu|p16|n6 vs config|p16|n6" in result.stderr
    )  # the human view goes to stderr with --format json
