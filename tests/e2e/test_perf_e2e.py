"""`winml perf` run as a subprocess on the committed bundles, checking the JSON it prints."""

import json

import pytest

from tests.conftest import TINY_FLAT, TINY_PIPELINE

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize("bundle", [TINY_FLAT, TINY_PIPELINE], ids=["flat", "pipeline"])
def test_perf_json_has_metrics(winml, bundle, tmp_path):
    out = tmp_path / "new" / "run.json"
    r = winml("perf", bundle, "--format", "json", "--iterations", "3", "--warmup", "1", "--max-new-tokens", "8",
              "--prompt-tokens", "24", "-o", out)
    assert r.returncode == 0, r.stderr
    doc = r.json()
    assert json.loads(out.read_text()) == doc and [p.name for p in out.parent.iterdir()] == ["run.json"]
    assert doc["kind"] == "run" and doc["status"] == "ok"
    (cell,) = doc["cells"]
    assert cell["shape"] == {"prompt_tokens": 24, "max_new_tokens": 8, "requested_prompt_tokens": 24}
    iters = cell["samples"]["iterations"]
    assert len(iters) == 3
    assert all(i["prompt_tokens"] == 24 and i["new_tokens"] == 8 and len(i["decode_step_ms"]) == 7 for i in iters)
    s = cell["summary"]
    for metric in ("ttft_ms", "prompt_tokens_per_s", "decode_tokens_per_s", "e2e_ms"):
        assert s[metric] > 0
    assert 0 < s["itl_ms_p50"] <= s["itl_ms_p90"] <= s["itl_ms_p99"]
    assert cell["load"]["model_load_ms"] > 0
    assert cell["route"]["label"] == "config" and cell["route"]["target"]["kind"] == "config"
    # decode tok/s is derived from the recorded steps, not measured apart
    med_steps = sorted(len(i["decode_step_ms"]) / (sum(i["decode_step_ms"]) / 1000) for i in iters)[1]
    assert s["decode_tokens_per_s"] == pytest.approx(med_steps, rel=1e-6)


def test_perf_text_prompt_through_template(winml):
    r = winml("perf", TINY_FLAT, "--format", "json", "--iterations", "1", "--warmup", "0", "--prompt", "hello bench",
              "--apply-template", "--max-new-tokens", "4")
    assert r.returncode == 0, r.stderr
    cell = r.json()["cells"][0]
    assert cell["prompt"]["mode"] == "text" and cell["prompt"]["apply_template"] is True
    plain = winml("perf", TINY_FLAT, "--format", "json", "--iterations", "1", "--warmup", "0", "--prompt", "hello bench",
                  "--max-new-tokens", "4").json()["cells"][0]
    assert cell["shape"]["prompt_tokens"] > plain["shape"]["prompt_tokens"]


def test_perf_table_goes_to_stdout(winml):
    r = winml("perf", TINY_FLAT, "--iterations", "1", "--prompt-tokens", "16", "--max-new-tokens", "4")
    assert r.returncode == 0, r.stderr
    assert "decode tok/s" in r.stdout and "TTFT" in r.stdout


@pytest.mark.parametrize("args,needle", [
    (["/nonexistent/bundle"], "does not exist"),
    (["--iterations", "0"], "--iterations"),
    (["--iterations", "-3"], "--iterations"),
    (["--max-new-tokens", "0"], "--max-new-tokens"),
    (["--prompt-tokens", "abc"], "--prompt-tokens"),
    (["--format", "xml"], "--format"),
    (["-o", "/dev/null/run.json"], "-o /dev/null/run.json"),  # refused before measuring, not after
])
def test_bad_flags_exit_2_with_one_line(winml, args, needle):
    path = [] if args[0].startswith("/") else [str(TINY_FLAT)]
    r = winml("perf", *path, *args)
    assert r.returncode == 2
    assert needle in r.stderr
    assert "Traceback" not in r.stderr
    assert len([l for l in r.stderr.splitlines() if l.startswith("error:")]) == 1


def test_folder_without_config(winml, tmp_path):
    r = winml("perf", tmp_path)
    assert r.returncode == 2 and "genai_config.json" in r.stderr and "Traceback" not in r.stderr


def test_malformed_config(winml, bundle_copy):
    b = bundle_copy(TINY_FLAT)
    (b / "genai_config.json").write_text('{"model": {"decoder": ')
    r = winml("perf", b)
    assert r.returncode == 2 and "genai_config.json" in r.stderr and "malformed JSON" in r.stderr


def test_missing_model_file(winml, bundle_copy):
    b = bundle_copy(TINY_PIPELINE)
    (b / "lm_head.onnx").unlink()
    r = winml("perf", b)
    assert r.returncode == 2 and "lm_head.onnx" in r.stderr and "Traceback" not in r.stderr


def test_verbose_shows_traceback(winml, tmp_path):
    r = winml("perf", tmp_path, "--verbose")
    assert r.returncode == 2 and "Traceback" in r.stderr


def test_unknown_flag_is_a_usage_error(winml):
    r = winml("perf", TINY_FLAT, "--warp-speed")
    assert r.returncode == 2 and "--warp-speed" in r.stderr and "Traceback" not in r.stderr
