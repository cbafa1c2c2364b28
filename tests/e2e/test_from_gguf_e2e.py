"""`winml bundle from-gguf` through the CLI: a bundle the rest of the tool runs, refusals with exit 2."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("gguf")
pytest.importorskip("tokenizers")

from tests.conftest import QUICK_RUN  # noqa: E402
from tests.gguf_files import write_gguf  # noqa: E402

pytestmark = pytest.mark.e2e


def test_converted_bundle_runs_under_perf_with_a_templated_prompt(winml, tmp_path):
    source = write_gguf(tmp_path / "tiny.gguf", "qwen2", "Q4_1", "Q8_0")
    out = tmp_path / "out" / "tiny"
    result = winml("bundle", "from-gguf", source, "-o", out, "--format", "json")
    assert result.returncode == 0, result.stderr
    summary = result.json()
    assert summary["path"] == str(out) and summary["files"]["model.onnx.data"] > 0
    assert "layer 2/2" in result.stderr  # progress on stderr while converting
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["tiny"]  # no temporary folder left
    perf = winml("perf", out, *QUICK_RUN, "--format", "json")
    assert perf.returncode == 0, perf.stderr
    cells = perf.json()["cells"]
    assert cells and cells[0]["summary"]["decode_tokens_per_s"] > 0
    chat = winml(
        "perf", out, "--prompt", "the 12 the", "--apply-template", "--max-new-tokens", "4",
        "--iterations", "1", "--invocations", "1", "--warmup", "0", "--no-store", "--verbose",
    )  # fmt: skip
    assert chat.returncode == 0, chat.stderr


def test_fp16_bundle_runs_under_perf(winml, tmp_path):
    source = write_gguf(tmp_path / "small.gguf", "llama", "Q4_1", "Q8_0")
    out = tmp_path / "fp16"
    result = winml("bundle", "from-gguf", source, "-o", out, "-p", "fp16")
    assert result.returncode == 0, result.stderr
    assert "(fp16 scales)" in result.stderr
    assert json.loads((out / "gguf.json").read_text())["precision"] == "fp16"
    perf = winml(
        "perf", out, "--prompt-tokens", "8", "--max-new-tokens", "4",
        "--iterations", "1", "--invocations", "1", "--warmup", "0", "--no-store",
    )  # fmt: skip
    assert perf.returncode == 0, perf.stderr


def test_unsupported_architecture_exits_2_naming_it(winml, tmp_path):
    source = write_gguf(tmp_path / "g.gguf", "gemma", "Q8_0", "Q8_0")
    result = winml("bundle", "from-gguf", source, "-o", tmp_path / "b")
    assert result.returncode == 2
    assert "architecture 'gemma'" in result.stderr and "llama, qwen2" in result.stderr
    assert not (tmp_path / "b").exists()


def test_unsupported_tensor_type_exits_2_naming_tensor_and_type(winml, tmp_path):
    source = write_gguf(tmp_path / "k.gguf", "llama", "Q5_K", "Q8_0", hidden=256, ffn=256, heads=4, kv_heads=2)
    result = winml("bundle", "from-gguf", source, "-o", tmp_path / "b")
    assert result.returncode == 2
    assert "Q5_K" in result.stderr and "blk.0.attn_q.weight" in result.stderr
    assert "F32, F16, Q8_0, Q4_0, Q4_1" in result.stderr
    assert not (tmp_path / "b").exists()


def test_existing_output_is_kept_without_force(winml, tmp_path):
    source = write_gguf(tmp_path / "m.gguf")
    out = tmp_path / "b"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    result = winml("bundle", "from-gguf", source, "-o", out)
    assert result.returncode == 2 and "--force" in result.stderr
    assert [p.name for p in out.iterdir()] == ["keep.txt"]
    missing = winml("bundle", "from-gguf", tmp_path / "nope.gguf", "-o", tmp_path / "c")
    assert missing.returncode == 2 and "nope.gguf" in missing.stderr
    bad = winml("bundle", "from-gguf", source, "-o", tmp_path / "d", "-p", "int3")
    assert bad.returncode == 2 and "--precision" in bad.stderr
    forced = winml("bundle", "from-gguf", source, "-o", out, "--force")
    assert forced.returncode == 0, forced.stderr
    assert json.loads((out / "gguf.json").read_text())["source"] == "m.gguf"
