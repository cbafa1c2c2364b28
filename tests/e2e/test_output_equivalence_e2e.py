"""Issue 24 for plain ONNX models (`--runtime winml`), against the real onnxruntime: every output of
every route against the reference route's (config, i.e. the CPU EP) on the same seeded inputs,
before the timed iterations; one line per route, the verdict in the record, the closing summary,
the store and `compare routes`. A model whose weights moved a few per cent is not equivalent."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from tests import models
from tests.e2e.test_webgpu_e2e import webgpu_env  # noqa: F401  (the session fixture: lavapipe's env)
from winml_perf.equivalence.onnx_outputs import OutputsTarget, judge_outputs
from winml_perf.model.equivalence import EQUIVALENT, NOT_EQUIVALENT
from winml_perf.session.onnx_options import options_from_flags

pytestmark = pytest.mark.e2e

LEAN = ("--invocations", "1", "--warmup", "0", "--iterations", "2")


def _perturbed(src, dst, seed: int = 0):
    """``src`` with each float weight multiplied by N(1, 0.03): a model changed by a few per cent."""
    m = onnx.load(str(src))
    rng = np.random.default_rng(seed)
    for init in m.graph.initializer:
        a = numpy_helper.to_array(init)
        if np.issubdtype(a.dtype, np.floating):
            init.CopyFrom(numpy_helper.from_array((a * rng.normal(1.0, 0.03, a.shape)).astype(a.dtype), init.name))
    onnx.save(m, str(dst))
    return dst


def _equivalence(doc: dict) -> dict[str, dict | None]:
    return {c["route"]["label"]: c["route"].get("equivalence") for c in doc["cells"]}


@pytest.fixture(scope="module")
def webgpu_run(tmp_path_factory, webgpu_env):  # noqa: F811
    """One run of the three-output model: config (CPU) and WebGPU, stored."""
    from tests.conftest import run_winml

    root = tmp_path_factory.mktemp("outeq")
    model = models.multi_io(root / "multi.onnx")
    store = root / "s.db"
    out = run_winml(
        "perf", model, "--route", "config", "--route", "ep=webgpu", "--shape", "seq=3", *LEAN,
        "--store", store, "--format", "json", env=webgpu_env, timeout=600,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    return out, store


def test_every_output_of_every_route_is_judged_against_config(webgpu_run):
    out, _ = webgpu_run
    eq = _equivalence(out.json())
    assert eq["config"] is None  # the reference is never judged against itself
    webgpu = eq["ep=webgpu"]
    assert webgpu["kind"] == "outputs" and webgpu["reference"] == "config" and webgpu["verdict"] == EQUIVALENT
    assert [o["name"] for o in webgpu["outputs"]] == ["scaled", "total", "ids_next"]  # none skipped
    assert sorted(webgpu["inputs"]) == ["features", "ids", "scale"]
    assert all(o["max_abs"] is not None and o["cosine"] is not None for o in webgpu["outputs"])
    lines = [x for x in out.stderr.splitlines() if x.startswith("ep=webgpu ≈ config: equivalent, 3 output(s)")]
    assert len(lines) == 1, out.stderr
    assert "equivalence: 1 route(s) against config by every output in" in out.stderr
    assert "outside the timed iterations" in out.stderr
    summary = [x for x in out.stderr.splitlines() if x.strip().startswith("ep=webgpu latency")]
    assert summary and all(x.endswith(", equivalent") for x in summary), out.stderr


def test_the_store_and_compare_routes_show_the_outputs_verdict(webgpu_run, winml):
    _, store = webgpu_run
    listed = winml("results", "list", "--store", store, "--verdict", "equivalent")
    assert listed.returncode == 0 and "ep=webgpu" in listed.stdout and " config " not in listed.stdout
    rows = json.loads(winml("results", "list", "--store", store, "--format", "json").stdout)
    by_route = {r["route"]: r for r in rows}
    assert by_route["ep=webgpu"]["equivalence_kind"] == "outputs"
    assert by_route["ep=webgpu"]["equivalence_max_rel_error"] is not None
    assert by_route["config"]["equivalence_verdict"] == "not checked"
    compared = winml("compare", "routes", "--store", store)
    assert compared.returncode == 0, compared.stderr
    assert "numerically equivalent to config" in compared.stdout


def test_no_equivalence_and_a_single_route(tmp_path, winml):
    model = models.mlp(tmp_path / "mlp.onnx")
    off = winml("perf", model, "--route", "config", "--route", "ep=qnn", *LEAN, "--no-store", "--no-equivalence",
                "--format", "json")  # fmt: skip
    assert off.returncode == 0, off.stderr
    assert all(e is None for e in _equivalence(off.json()).values()) and "equivalence:" not in off.stderr
    single = winml("perf", model, "--ep", "qnn", *LEAN, "--no-store", "--equivalence", "--format", "json")
    assert single.returncode == 0, single.stderr
    (e,) = _equivalence(single.json()).values()
    # judged against the CPU EP on the same model, run for the check only
    assert e["reference"] == "ep=cpu" and e["route_path"].endswith("mlp.onnx") and e["outputs"][0]["name"] == "y"
    assert e["verdict"] == EQUIVALENT, e


def test_a_model_with_weights_changed_a_few_percent_is_not_equivalent(tmp_path):
    """The judge itself on the real runtime: the same MLP on the CPU EP, weights x N(1, 0.03)."""
    model = models.mlp(tmp_path / "mlp.onnx")
    moved = _perturbed(model, tmp_path / "moved.onnx")
    options = {**options_from_flags(seed=0), "ep": "cpu"}
    run = judge_outputs(
        OutputsTarget("config", str(model), options),
        [OutputsTarget("config", str(model), options), OutputsTarget("moved", str(moved), options),
         OutputsTarget("again", str(model), options)],
    )  # fmt: skip
    assert set(run.by_label) == {"moved", "again"}  # the reference is not compared with itself
    assert run.by_label["moved"].verdict == NOT_EQUIVALENT
    (y,) = run.by_label["moved"].outputs
    assert y.max_rel is not None and y.max_rel > 0.01
    assert run.by_label["again"].verdict == EQUIVALENT and run.by_label["again"].outputs[0].identical
