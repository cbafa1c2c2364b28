"""Issue 34 on the real model (SmolLM2-135M-Instruct from its GGUF, built by scripts/real-model.sh):
the config route's perplexity over the packaged Coriolanus text is an English-model figure, and the
route against the very same bundle as reference reads ratio 1 exactly. Without the bundle this skips,
or fails under CI=1 (as tests/e2e/test_real_model_e2e.py does)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import run_winml

pytestmark = pytest.mark.e2e

DEFAULT = (
    Path(os.environ.get("WINML_PERF_CACHE_DIR", Path.home() / ".cache" / "winml-perf"))
    / "models"
    / "smollm2-135m-instruct"
)


@pytest.fixture(scope="module")
def real_bundle() -> Path:
    folder = Path(os.environ.get("WINML_PERF_REAL_MODEL", DEFAULT))
    if not (folder / "genai_config.json").is_file():
        message = f"no real-model bundle at {folder}: run scripts/real-model.sh (or set WINML_PERF_REAL_MODEL)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return folder


def test_config_perplexity_is_an_english_figure_and_itself_as_reference_is_ratio_one(real_bundle):
    result = run_winml(
        "perf", real_bundle, "--route", "config", "--perplexity", "--reference-bundle", real_bundle,
        "--prompt-tokens", "16", "--max-new-tokens", "4", "--invocations", "1", "--iterations", "1",
        "--warmup", "1", "--no-store", "--format", "json", "-q",
        timeout=1200,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    (cell,) = result.json()["cells"]
    p = cell["route"]["perplexity"]
    assert p["text"]["name"] == "coriolanus-act1.txt" and p["text"]["chunks"] >= 8  # 4,594 tokens / 512
    assert 5 < p["perplexity"] < 200, p  # a 135M model on Shakespeare; random weights read ~vocab size (49152)
    assert p["low"] < p["perplexity"] < p["high"]
    diff = cell["route"]["equivalence"]["perplexity"]
    assert diff["identical"] and diff["ratio"] == 1.0 and (diff["low"], diff["high"]) == (1.0, 1.0)
    assert diff["kl_mean"] == 0.0 and (diff["kl_low"], diff["kl_high"]) == (0.0, 0.0)  # the same logits, compared
    assert diff["top1_agreement"] == 1.0 and diff["top1_matches"] == diff["positions"] == 255 * p["text"]["chunks"]
