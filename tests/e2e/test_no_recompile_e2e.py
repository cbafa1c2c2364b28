"""Issue 26: `winml perf --compile --no-recompile` uses the prepared route or refuses (exit 2) saying why."""

from __future__ import annotations

import importlib.util
import json
import shutil

import pytest

from tests.conftest import BUNDLES, QUICK_RUN, run_winml

pytestmark = [pytest.mark.e2e, pytest.mark.qnn]

RUN = QUICK_RUN
SOC60 = ("--ep", "qnn", "--compile", "--ep-option", "soc_model=60")


@pytest.fixture
def bundle(tmp_path):
    if importlib.util.find_spec("onnxruntime_qnn") is None:
        pytest.skip("needs onnxruntime-qnn")
    dst = tmp_path / "tiny"
    shutil.copytree(BUNDLES / "tiny-qwen2", dst, ignore=shutil.ignore_patterns("_compiled"))
    return dst


def test_soc_model_changed_is_refused_with_no_recompile_and_the_prepared_one_is_used(bundle):
    """Failed before: perf had no --no-recompile (exit 2 'No such option')."""
    done = run_winml("bundle", "prepare", bundle, *SOC60, "--device-free")
    assert done.returncode == 0, done.stderr[-3000:]
    soc88 = ("--ep", "qnn", "--compile", "--ep-option", "soc_model=88")
    refused = run_winml("perf", bundle, *soc88, "--no-recompile", "--format", "json", *RUN)
    assert refused.returncode == 2, refused.stderr[-3000:]
    assert "--no-recompile: no prepared route fits" in refused.stderr, refused.stderr[-2000:]
    assert "soc_model 60 -> 88" in refused.stderr or "soc_model" in refused.stderr, refused.stderr[-2000:]
    assert not list((bundle / "_compiled").glob("qnn-*/decoder_qnn_ctx.onnx"))[1:]  # nothing compiled
    kept = run_winml("perf", bundle, *SOC60, "--no-recompile", "--format", "json", *RUN)
    assert kept.returncode == 0, kept.stderr[-3000:]
    (cell,) = json.loads(kept.stdout)["cells"]
    assert cell["route"]["cache"] == "hit", cell["route"]["cache_reason"]


def test_no_recompile_without_compile_is_a_usage_error(bundle):
    done = run_winml("perf", bundle, "--ep", "qnn", "--no-recompile", *RUN)
    assert done.returncode == 2 and "--no-recompile applies with --compile" in done.stderr, done.stderr[-2000:]
