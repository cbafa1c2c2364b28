"""The committed static NPU bundle (bundles/tiny-qwen2-npu) on the QNN plugin EP, for real.

onnxruntime-qnn runs QNN's HTP emulator on x86_64 Linux, so context and iterator really run on QNN
here. Every QNN run is a subprocess: libQnnHtp prints on stdout, and a registration is per process.
Without onnxruntime-qnn these tests skip, saying why; with ``CI`` set they fail instead.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

from tests.conftest import BUNDLES, run_winml

pytestmark = [pytest.mark.e2e, pytest.mark.qnn]

NPU = BUNDLES / "tiny-qwen2-npu"
STATIC_PROMPT = 16
QNN = "QNNExecutionProvider"

GENERATE = textwrap.dedent("""
    import json, sys, numpy as np, onnxruntime_genai as og
    bundle, qnn_library, n_new = sys.argv[1], sys.argv[2], int(sys.argv[3])
    if qnn_library:
        og.register_execution_provider_library("QNNExecutionProvider", qnn_library)
    model = og.Model(og.Config(bundle))
    prompt = (np.arange(16) * 7 % 500 + 4).astype(np.int32)
    params = og.GeneratorParams(model)
    params.set_search_options(max_length=16 + n_new, min_length=16 + n_new, do_sample=False)
    generator = og.Generator(model, params)
    generator.append_tokens(prompt)
    for _ in range(n_new):
        generator.generate_next_token()
    print("RESULT " + json.dumps([int(t) for t in generator.get_sequence(0)[16:]]))
""")

PLACE = textwrap.dedent("""
    import collections, json, sys, onnxruntime as ort
    model, qnn_library, options = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    ort.register_execution_provider_library("QNNExecutionProvider", qnn_library)
    so = ort.SessionOptions()
    so.add_session_config_entry("session.record_ep_graph_assignment_info", "1")
    so.add_provider_for_devices([d for d in ort.get_ep_devices() if d.ep_name == "QNNExecutionProvider"], options)
    session = ort.InferenceSession(model, so)
    counts = collections.Counter()
    for assignment in session.get_provider_graph_assignment_info():
        counts[assignment.ep_name] += len(assignment.get_nodes())
    print("RESULT " + json.dumps(counts))
""")


@pytest.fixture(scope="module")
def qnn_library() -> str:
    if importlib.util.find_spec("onnxruntime_qnn") is None:
        reason = "onnxruntime-qnn is not installed (pip install -e '.[qnn]')"
        if os.environ.get("CI"):
            pytest.fail(f"the qnn tests must run in CI, but: {reason}")
        pytest.skip(reason)
    import onnxruntime_qnn

    return onnxruntime_qnn.get_library_path()


def _result(script: str, *args: str, cwd) -> object:
    proc = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, cwd=cwd, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, proc.stdout[-2000:]
    return json.loads(lines[-1][len("RESULT ") :])


def _stages() -> dict:
    return json.loads((NPU / "genai_config.json").read_text())["model"]["decoder"]["pipeline"][0]


def test_committed_bundle_routes_context_and_iterator_to_qnn_and_the_rest_to_cpu():
    stages = _stages()
    for name in ("context", "iterator"):
        (entry,) = stages[name]["session_options"]["provider_options"]
        assert entry["qnn"]["backend_type"] == "htp" and entry["qnn"]["enable_htp_fp16_precision"] == "1"
    assert stages["embeddings"]["session_options"]["provider_options"] == []
    assert stages["lm_head"]["session_options"]["provider_options"] == []
    total = sum(p.stat().st_size for p in NPU.iterdir() if p.is_file())
    assert total <= 3_000_000


def test_config_route_on_qnn_generates_the_cpu_tokens_from_a_moved_bundle(qnn_library, tmp_path):
    moved = tmp_path / "elsewhere" / "npu"
    shutil.copytree(NPU, moved, ignore=shutil.ignore_patterns("_compiled"))
    cpu = tmp_path / "npu-cpu"
    shutil.copytree(moved, cpu)
    cfg = json.loads((cpu / "genai_config.json").read_text())
    for stage in cfg["model"]["decoder"]["pipeline"][0].values():
        stage["session_options"]["provider_options"] = []
    (cpu / "genai_config.json").write_text(json.dumps(cfg))

    on_qnn = _result(GENERATE, str(moved), qnn_library, "16", cwd=tmp_path)  # not the bundle's folder
    on_cpu = _result(GENERATE, str(cpu), "", "16", cwd=tmp_path)
    assert len(on_qnn) == 16 and len(set(on_qnn)) > 4
    assert on_qnn == on_cpu


@pytest.mark.parametrize("stage", ["context", "iterator"])
def test_qnn_holds_most_nodes_of_the_stage(qnn_library, stage, tmp_path):
    node = _stages()[stage]
    options = node["session_options"]["provider_options"][0]["qnn"]
    counts = _result(PLACE, str(NPU / node["filename"]), qnn_library, json.dumps(options), cwd=tmp_path)
    total = sum(counts.values())
    assert counts.get(QNN, 0) > 0.8 * total, counts  # measured: context 28 of 30, iterator 29 of 33


def test_winml_perf_runs_the_config_route_at_the_static_length(qnn_library):
    result = run_winml(
        "perf",
        NPU,
        "--ep-library",
        f"{QNN}={qnn_library}",
        "--prompt-tokens",
        str(STATIC_PROMPT),
        "--max-new-tokens",
        "4",
        "--warmup",
        "1",
        "--iterations",
        "1",
        "--invocations",
        "1",
        "--no-store",
        "-q",
    )
    assert result.returncode == 0, result.stderr
    assert f"context: {QNN} -> {QNN}" in result.stdout and f"iterator: {QNN} -> {QNN}" in result.stdout


@pytest.mark.parametrize(
    "flags, shown",
    [
        (("--prompt-tokens", "12"), "--prompt-tokens 12"),
        (("--prompt-tokens", "16,32"), "--prompt-tokens 32"),
    ],  # no --prompt-tokens: measured at the static length (tests/e2e/test_perf_terminal_e2e.py)
)
def test_a_prompt_length_the_static_shapes_cannot_take_is_exit_2_before_measuring(flags, shown):
    result = run_winml("perf", NPU, *flags, "--max-new-tokens", "4", "--iterations", "1", "--no-store", "-q")
    assert result.returncode == 2, result.stderr
    assert shown in result.stderr and f"static prompt length of {STATIC_PROMPT}" in result.stderr
    assert f"--prompt-tokens {STATIC_PROMPT}" in result.stderr.split(";")[-1]
    assert "ttft" not in result.stdout.lower()


def test_a_text_prompt_is_fitted_to_the_static_prompt_length():
    """--prompt on a bundle whose context stage takes 16 tokens: the text's own 2-3 tokens were fed as
    they were and onnxruntime-genai refused them mid-run; the text is fitted to 16, as to --prompt-tokens."""
    result = run_winml(
        "perf", NPU, "--prompt", "hello there", "--max-new-tokens", "4", "--iterations", "1", "--invocations", "1",
        "--no-store", "--format", "json", "-q",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "(the --prompt text tiled or cut to it)" in result.stderr
    (cell,) = result.json()["cells"]
    assert cell["prompt"]["tokens"] == STATIC_PROMPT and cell["prompt"]["fitted"] is True, cell["prompt"]
