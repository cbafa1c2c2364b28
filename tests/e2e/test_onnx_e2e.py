"""End to end for `--runtime winml`: OnnxSession built from a SessionSpec in the runner's child process,
a prepared model measured through the runner, and (once the lead wires the flags) the `winml` CLI.

The CLI tests skip, naming the missing flag, until `winml perf` has --io-binding and `winml bundle
prepare` has --graph-optimization-level; they then check the real commands and exit codes.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests import models
from winml_perf.bundle.onnx_prepare import prepare_onnx
from winml_perf.ep.devices import resolve_target
from winml_perf.measure.runner import run_cell
from winml_perf.model.spec import CellSpec, IterationPolicy, SessionSpec, WarmupPolicy
from winml_perf.session.onnx_options import options_from_flags

pytestmark = pytest.mark.e2e


def _cell(path: Path, options: dict, label: str = "ep=cpu") -> CellSpec:
    return CellSpec(
        route_label=label,
        session=SessionSpec("winml", str(path), options=options),
        warmup=WarmupPolicy(count=1),
        iterations=IterationPolicy.fixed(2),
    )


@pytest.mark.parametrize("io_binding", [False, True])
def test_runner_measures_onnx_session_in_a_child(tmp_path, io_binding):
    model = models.multi_io(tmp_path / "multi.onnx")
    options = options_from_flags(ep="cpu", shape=["seq=3"], io_binding=io_binding, intra_op_threads=1)
    result = run_cell(_cell(model, options), isolate=True)
    assert result.ok, result.failure
    assert len(result.samples) == 2 and all(s.latency_ms > 0 and s.new_tokens is None for s in result.samples)
    session = result.route_actual["session"]
    assert result.route_actual["model"] == "CPUExecutionProvider"
    assert session["io_binding"]["enabled"] is io_binding and session["io_binding"]["input_device"] == "cpu"
    assert [i["shape"] for i in session["inputs"]] == [[1, 3, 4], [1], [1, 3]]
    assert session["session_create_ms"] > 0


def test_runner_reports_bad_input_from_the_child(tmp_path):
    model = models.multi_io(tmp_path / "multi.onnx")
    result = run_cell(_cell(model, options_from_flags(ep="cpu")), isolate=True)
    assert not result.ok and result.failure.error_type == "UsageError" and "'seq'" in result.failure.message


def test_prepared_model_measured_with_both_creation_times(tmp_path):
    model = models.mlp(tmp_path / "mlp.onnx")
    prepared = prepare_onnx(model, resolve_target("cpu", None, "winml"), "all")
    options = {**options_from_flags(ep="cpu"), **prepared.session_options()}
    result = run_cell(_cell(prepared.path, options), isolate=True)
    assert result.ok, result.failure
    session = result.route_actual["session"]
    assert session["prepared"] and session["options"]["graph_optimization_level"] == "disable"
    assert session["session_create_ms"] > 0 and session["unprepared_session_create_ms"] > 0


# -- the CLI ---------------------------------------------------------------------------------------
def _find(obj, key):
    if isinstance(obj, dict):
        if key in obj:
            yield obj[key]
        for v in obj.values():
            yield from _find(v, key)
    elif isinstance(obj, list):
        for v in obj:
            yield from _find(v, key)


def test_cli_perf_onnx_with_io_binding(tmp_path, winml):
    model = models.multi_io(tmp_path / "multi.onnx")
    out = winml(
        "perf",
        "--invocations",
        "1",
        model,
        "--ep",
        "cpu",
        "--shape",
        "seq=3",
        "--io-binding",
        "--warmup",
        "1",
        "--iterations",
        "2",
        "--format",
        "json",
    )
    assert out.returncode == 0, out.stderr
    bindings = list(_find(out.json(), "io_binding"))
    assert bindings and bindings[0]["enabled"] is True


def test_cli_perf_bad_inputs_exit_2(tmp_path, winml):
    model = models.mlp(tmp_path / "mlp.onnx")
    not_onnx = tmp_path / "notes.onnx"
    not_onnx.write_text("hello")
    np.save(tmp_path / "x64.npy", np.zeros((1, 8), np.float64))
    cases = [
        ((not_onnx, "--ep", "cpu"), "notes.onnx"),
        ((model, "--ep", "cpu", "--input", f"nope={tmp_path / 'x64.npy'}"), "nope"),
        ((model, "--ep", "cpu", "--shape", "x=1x9"), "axis 1"),
        ((model, "--ep", "cpu", "--input", f"x={tmp_path / 'x64.npy'}"), "float64"),
    ]
    for args, word in cases:
        out = winml("perf", "--invocations", "1", *args, "--iterations", "1", "--warmup", "0", "--format", "json")
        assert out.returncode == 2 and word in out.stderr, (args, out.returncode, out.stderr)


def test_cli_perf_onnx_refuses_token_flags_naming_what_was_given(tmp_path, winml):
    """A plain model measures no tokens: --max-new-tokens was silently dropped (a sweep asked, one cell
    measured) while --prompt-tokens was refused naming --runtime winml, which the user had not given,
    with a remedy (--runtime winml-genai) that fails on an .onnx file. Both are refused, naming the
    model's runtime and a remedy that works."""
    model = models.mlp(tmp_path / "mlp.onnx")
    for flag in ("--max-new-tokens", "--prompt-tokens"):
        out = winml("perf", model, flag, "16,32", "--invocations", "1", "--iterations", "1", "--no-store")
        assert out.returncode == 2, (flag, out.stderr)
        assert f"error: {flag} do not apply to plain .onnx models (runtime winml)" in out.stderr
        assert "drop them; they belong to onnxruntime-genai bundles (runtime winml-genai)" in out.stderr
        assert "--runtime" not in out.stderr


def test_cli_bundle_prepare_onnx(tmp_path, winml):
    model = models.mlp(tmp_path / "mlp.onnx")
    first = winml("bundle", "prepare", model, "--ep", "cpu", "--graph-optimization-level", "all", "--format", "json")
    assert first.returncode == 0, first.stderr
    second = winml("bundle", "prepare", model, "--ep", "cpu", "--graph-optimization-level", "all", "--format", "json")
    assert second.returncode == 0 and json.loads(second.stdout)["cache"] == "hit"
    assert (tmp_path / "_compiled").is_dir()
    prepared = winml(
        "perf",
        "--invocations",
        "1",
        model,
        "--ep",
        "cpu",
        "--prepare",
        "--warmup",
        "0",
        "--iterations",
        "2",
        "--format",
        "json",
    )
    assert prepared.returncode == 0, prepared.stderr
    session = list(_find(prepared.json(), "unprepared_session_create_ms"))
    assert session and session[0] > 0  # prepared vs unprepared session creation, both recorded
    assert "|p" not in prepared.json()["cells"][0]["cell_key"]  # no token shape for a plain model
    cleaned = winml("bundle", "clean", model)
    assert cleaned.returncode == 0 and not any((tmp_path / "_compiled").iterdir())


# -- WebGPU: a real non-CPU EP (software Vulkan on a CPU-only box, the GPU elsewhere) ------------------
_WEBGPU_CHILD = r"""
import json, sys
import numpy as np
from tests import models
from winml_perf.ep import plugins
from winml_perf.bundle.onnx_prepare import prepare_onnx
from winml_perf.ep.devices import resolve_target
from winml_perf.session.onnx_session import OnnxSession

plugins.register_plugin_eps()
model = models.multi_io(sys.argv[1])
opts = dict(shapes={"seq": [3]}, seed=1)
with OnnxSession.from_options(model, ep="cpu", **opts) as s:
    expected = s.run()
out = {}
for io in (False, True):
    with OnnxSession.from_options(model, ep="webgpu", io_binding=io, **opts) as s:
        got, t, again = s.run(), s.run_timed(), s.run()
        out[f"io_{io}"] = {"describe": s.describe(), "equal": [bool(np.allclose(a, b)) for a, b in zip(expected, got)],
                           "repeat_equal": [bool(np.array_equal(a, b)) for a, b in zip(got, again)], "ms": t}
prepared = prepare_onnx(model, resolve_target("webgpu", None, "winml"), "all")
with OnnxSession.from_options(prepared.path, ep="webgpu", io_binding=True, **opts, **prepared.session_options()) as s:
    out["prepared"] = {"kind": prepared.kind, "equal": [bool(np.allclose(a, b)) for a, b in zip(expected, s.run())],
                       "describe": s.describe()}
print(json.dumps(out))
"""


@pytest.mark.webgpu
def test_webgpu_session_io_binding_on_device_and_prepare(tmp_path):
    import os
    import subprocess
    import sys

    from tests.conftest import REPO

    pytest.importorskip("onnxruntime_ep_webgpu")
    setup = subprocess.run(
        ["bash", str(REPO / "scripts" / "setup-webgpu-software.sh"), "--offline"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if setup.returncode != 0:
        pytest.skip(setup.stderr.strip().splitlines()[-1] if setup.stderr.strip() else "no software Vulkan driver")
    env = dict(os.environ)
    for line in setup.stdout.splitlines():
        if line.startswith("export "):
            name, _, value = line[len("export ") :].partition("=")
            env[name] = value.strip("'")
    proc = subprocess.run(
        [sys.executable, "-c", _WEBGPU_CHILD, str(tmp_path / "multi.onnx")],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    for io in (False, True):
        run = out[f"io_{io}"]
        d = run["describe"]
        assert d["providers"][0] == "WebGpuExecutionProvider" and d["node_assignment"].get("WebGpuExecutionProvider")
        assert all(run["equal"]) and all(run["repeat_equal"]) and run["ms"] > 0
    assert out["io_True"]["describe"]["io_binding"]["input_device"] == "webgpu"
    assert out["io_True"]["describe"]["io_binding"]["output_device"] == "webgpu"
    prepared = out["prepared"]
    assert prepared["kind"] == "optimized" and all(prepared["equal"])
    assert prepared["describe"]["options"]["graph_optimization_level"] == "disable"
