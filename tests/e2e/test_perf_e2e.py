"""`winml perf` run as a subprocess on the committed bundles, checking the JSON it prints."""

import json
import re
from pathlib import Path

import pytest

from tests.conftest import LEAN_JSON, TINY_FLAT, TINY_PIPELINE

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize("bundle", [TINY_FLAT, TINY_PIPELINE], ids=["flat", "pipeline"])
def test_perf_json_has_metrics(winml, bundle, tmp_path):
    out = tmp_path / "new" / "run.json"
    r = winml(
        "perf",
        bundle,
        "--format",
        "json",
        "--invocations",
        "1",
        "--iterations",
        "3",
        "--warmup",
        "1",
        "--max-new-tokens",
        "8",
        "--prompt-tokens",
        "24",
        "-o",
        out,
    )
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
    r = winml(
        "perf",
        "--invocations",
        "1",
        TINY_FLAT,
        "--format",
        "json",
        "--iterations",
        "1",
        "--warmup",
        "0",
        "--prompt",
        "hello bench",
        "--apply-template",
        "--max-new-tokens",
        "4",
    )
    assert r.returncode == 0, r.stderr
    cell = r.json()["cells"][0]
    assert cell["prompt"]["mode"] == "text" and cell["prompt"]["apply_template"] is True
    plain = winml(
        "perf",
        "--invocations",
        "1",
        TINY_FLAT,
        "--format",
        "json",
        "--iterations",
        "1",
        "--warmup",
        "0",
        "--prompt",
        "hello bench",
        "--max-new-tokens",
        "4",
    ).json()["cells"][0]
    assert cell["shape"]["prompt_tokens"] > plain["shape"]["prompt_tokens"]


def test_perf_table_goes_to_stdout(winml):
    r = winml(
        "perf", "--invocations", "1", TINY_FLAT, "--iterations", "1", "--prompt-tokens", "16", "--max-new-tokens", "4"
    )
    assert r.returncode == 0, r.stderr
    assert "decode tok/s" in r.stdout and "TTFT" in r.stdout


@pytest.mark.parametrize(
    "args,needle",
    [
        (["/nonexistent/bundle"], "does not exist"),
        (["--iterations", "0"], "--iterations"),
        (["--iterations", "-3"], "--iterations"),
        (["--max-new-tokens", "0"], "--max-new-tokens"),
        (["--prompt-tokens", "abc"], "--prompt-tokens"),
        (["--format", "xml"], "--format"),
        (["-o", "/dev/null/run.json"], "-o /dev/null/run.json"),  # refused before measuring, not after
    ],
)
def test_bad_flags_exit_2_with_one_line(winml, args, needle):
    path = [] if args[0].startswith("/") else [str(TINY_FLAT)]
    r = winml("perf", *path, *args)
    assert r.returncode == 2
    assert needle in r.stderr
    assert "Traceback" not in r.stderr
    assert len([line for line in r.stderr.splitlines() if line.startswith("error:")]) == 1


@pytest.mark.parametrize(
    "args,needle",
    [
        (
            ["--target-ci", "50%", "--iterations", "3"],
            "error: --iterations sets a fixed count, which --target-ci replaces",
        ),
        (
            ["--iterations", "2", "--max-time", "10", "--max-invocations", "3"],
            "error: --max-time, --max-invocations given without --target-ci: they bound only an adaptive run",
        ),
        (["--duration", "1s", "--min-iterations", "4"], "drop them (a --duration run stops at its duration)"),
        (
            ["--duration", "1s", "--iterations", "5"],
            "error: --iterations sets a fixed count, which --duration replaces",
        ),
    ],
)
def test_a_measurement_flag_the_policy_would_not_read_is_refused(winml, args, needle):
    """--iterations beside --target-ci or --duration, or an adaptive bound (--max-time, ...) without
    --target-ci, was silently ignored: the run measured something else than asked. Each is refused, exit 2."""
    r = winml("perf", str(TINY_FLAT), *args, "--no-store", "-q")
    assert r.returncode == 2, r.stderr
    assert needle in r.stderr and "decode tok/s" not in r.stdout


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


LEAN = LEAN_JSON


@pytest.mark.parametrize("flag", [("--ep", "cpu"), ("--device", "cpu")], ids=["ep", "device"])
def test_forced_cpu_route_derives_every_stage_and_hits_the_cache(winml, bundle_copy, flag):
    import hashlib

    b = bundle_copy(TINY_PIPELINE)
    before = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in b.iterdir() if p.is_file()}
    first = winml("perf", b, *flag, *LEAN)
    assert first.returncode == 0, first.stderr
    route = first.json()["cells"][0]["route"]
    assert route["target"]["ep"] == "CPUExecutionProvider"
    assert route["target"]["kind"] == ("ep" if flag[0] == "--ep" else "device")
    assert route["cache"] == "miss"
    derived = Path(route["derived_path"])
    assert derived.parent == b / "_compiled"
    cfg = json.loads((derived / "genai_config.json").read_text())
    decoder = cfg["model"]["decoder"]
    stages = decoder["pipeline"][0]
    assert set(stages) == {"embeddings", "context", "iterator", "lm_head"}
    assert all(s["session_options"]["provider_options"] == [] for s in stages.values())
    assert [s["ep_after"] for s in route["stages"]] == ["CPUExecutionProvider"] * 4
    second = winml("perf", b, *flag, *LEAN)
    assert second.returncode == 0, second.stderr
    assert second.json()["cells"][0]["route"]["cache"] == "hit"
    after = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in b.iterdir() if p.is_file()}
    assert after == before  # the source bundle is never written


def test_device_cpu_on_the_flat_bundle_reports_what_was_asked_and_resolved(winml, bundle_copy):
    b = bundle_copy(TINY_FLAT)
    r = winml("perf", b, "--device", "cpu", *LEAN)
    assert r.returncode == 0, r.stderr
    target = r.json()["cells"][0]["route"]["target"]
    assert target == {
        **target,
        "kind": "device",
        "requested_device": "cpu",
        "device": "cpu",
        "ep": "CPUExecutionProvider",
    }


@pytest.mark.parametrize(
    "args,needle",
    [
        (("--ep", "warpdrive"), "warpdrive"),
        (("--device", "npu"), "no npu device here"),
        (("--device", "quantum"), "--device"),
    ],
)
def test_routing_errors_exit_2(winml, args, needle):
    r = winml("perf", TINY_FLAT, *args, *LEAN)
    assert r.returncode == 2 and needle in r.stderr and "Traceback" not in r.stderr


def test_device_config_is_a_usage_error_for_plain_models(winml):
    r = winml("perf", TINY_FLAT / "model.onnx", "--device", "config", "--iterations", "1")
    assert r.returncode == 2 and "--device config" in r.stderr and "Traceback" not in r.stderr


def test_perf_invocations_are_fresh_processes_with_an_interval_across_them(winml, tmp_path):
    r = winml(
        "perf",
        TINY_FLAT,
        "--format",
        "json",
        "--invocations",
        "3",
        "--iterations",
        "4",
        "--warmup",
        "1",
        "--prompt-tokens",
        "16",
        "--max-new-tokens",
        "8",
        "--no-store",
    )
    assert r.returncode == 0, r.stderr
    doc = r.json()
    (cell,) = doc["cells"]
    figures = cell["invocations"]
    assert [f["index"] for f in figures] == [0, 1, 2]
    assert len({f["pid"] for f in figures}) == 3  # a fresh process (and model load) each
    assert all(
        f["iterations"] == 4 and f["model_load_ms"] > 0 and f["medians"]["decode_tokens_per_s"] > 0 for f in figures
    )
    iters = cell["samples"]["iterations"]
    assert [i["invocation"] for i in iters] == [0] * 4 + [1] * 4 + [2] * 4
    u = cell["uncertainty"]
    assert u["coverage"] == {"levels": ["invocations", "iterations"], "invocations": 3, "iterations": 12}
    assert u["primary"]["method"] == "student_t_invocations" and u["within_process"]["coverage"]["invocations"] == 1
    assert cell["summary"]["primary_ci95_covers"] == "3 proc" and doc["sweep"]["isolate"] is True
    table = winml(
        "perf",
        TINY_FLAT,
        "--invocations",
        "3",
        "--iterations",
        "2",
        "--prompt-tokens",
        "16",
        "--max-new-tokens",
        "4",
        "--no-store",
    )
    assert table.returncode == 0, table.stderr
    assert "CI95 (3 proc)" in table.stdout and "3x2" in table.stdout
    one = winml(
        "perf",
        TINY_FLAT,
        "--invocations",
        "1",
        "--iterations",
        "6",
        "--prompt-tokens",
        "16",
        "--max-new-tokens",
        "4",
        "--no-store",
    )
    assert "CI95 in-proc" in one.stdout and "covers this process only" in one.stdout
    bad = winml("perf", TINY_FLAT, "--invocations", "3", "--no-isolate", "--no-store")
    assert bad.returncode == 2 and "--no-isolate" in bad.stderr


def test_two_routes_over_invocations_compare_over_paired_invocations(winml, bundle_copy):
    r = winml(
        "perf",
        bundle_copy(TINY_FLAT),
        "--route",
        "config",
        "--route",
        "ep=qnn",
        "--invocations",
        "3",
        "--iterations",
        "2",
        "--prompt-tokens",
        "8",
        "--max-new-tokens",
        "4",
        "--no-store",
    )
    assert r.returncode == 0, r.stderr
    tail = r.stdout[r.stdout.index("summary: routes against config (95% CI, over paired invocations)") :]
    assert re.search(r"\((95% CI \S+; )?p8 n4, 3 paired invocations\)", tail) and "paired rounds" not in tail
