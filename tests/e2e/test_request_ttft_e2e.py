"""Issue 23 finding 12 on bundles/tiny-qwen2: request TTFT (generator creation + prompt + first token)
is recorded beside the model TTFT, per iteration and summarised."""

from __future__ import annotations

import json

import pytest

from tests.conftest import BUNDLES, run_winml

pytestmark = [pytest.mark.e2e]


def test_request_ttft_is_recorded_and_never_below_the_model_ttft():
    """Before: no request_ttft_ms metric and no generator_ms per iteration."""
    args = ("--max-new-tokens", "4", "--warmup", "1", "--iterations", "3", "--invocations", "1", "--no-store")
    result = run_winml("perf", BUNDLES / "tiny-qwen2", *args, "--format", "json", "-q")
    assert result.returncode == 0, result.stderr[-3000:]
    (cell,) = json.loads(result.stdout)["cells"]
    for sample in cell["samples"]["iterations"]:
        assert sample["generator_ms"] > 0
    request, model = cell["metrics"]["request_ttft_ms"], cell["metrics"]["ttft_ms"]
    assert request["median"] >= model["median"] and request["min"] >= model["min"]
