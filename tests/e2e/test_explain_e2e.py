"""`winml perf --explain` end to end on the committed bundles (CPU) and on synthetic ONNX models.

Tolerances, stated: the stage session times plus the host time equal the profiled wall time, and
each stage's operator times plus its time outside operators equal its session time, exactly (to
the record's rounding, 1e-6 ms): both are sums by construction, so the test checks the
construction and that every run and node landed in the right place (operator time never above
its session, every stage expected in each phase present with one run per step, none of the
measured iterations profiled, the temporary profile files gone).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.conftest import TINY_FLAT, TINY_PIPELINE, run_winml
from winml_perf.explain.difference import record_difference
from winml_perf.record.validation import validated_cell

pytestmark = pytest.mark.e2e

ROUNDING_MS = 1e-5  # three rounded figures summed
COMMON = ("--warmup", "1", "--invocations", "1", "--iterations", "2", "--format", "json", "-q", "--no-store")
SHAPE = ("--prompt-tokens", "16", "--max-new-tokens", "6")


def explained(*args, tmp_path: Path, shape=SHAPE) -> list[dict]:
    """Cells of a `perf --explain` run whose temporary files go to tmp_path/tmp (checked gone after)."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    result = run_winml("perf", *args, "--explain", *shape, *COMMON, env={"TMPDIR": str(tmp)})
    assert result.returncode == 0, result.stderr[-3000:]
    left = [p.name for p in tmp.iterdir() if p.name.startswith("winml-explain-") or p.suffix == ".json"]
    assert left == [], "profile files or profiling copies were left behind"
    cells = result.json()["cells"]
    for c in cells:
        validated_cell(c)  # the explain section matches record.schema.json
        assert c["status"] == "ok" and "error" not in c["explain"], c["explain"]
    return cells


def check_sums(cell: dict) -> None:
    for phase in cell["explain"]["phases"].values():
        assert phase["sessions_ms"] + phase["host_ms"] == pytest.approx(phase["wall_ms"], abs=ROUNDING_MS)
        assert sum(s["session_ms"] for s in phase["stages"]) == pytest.approx(phase["sessions_ms"], abs=ROUNDING_MS)
        for s in phase["stages"]:
            assert s["ops"], s["stage"]
            assert sum(o["ms"] for o in s["ops"]) == pytest.approx(s["ops_ms"], abs=ROUNDING_MS)
            assert s["ops_ms"] + s["overhead_ms"] == pytest.approx(s["session_ms"], abs=ROUNDING_MS)
            assert 0 < s["ops_ms"] <= s["session_ms"] + ROUNDING_MS  # kernels nest inside their run


def stages_of(cell: dict, phase: str) -> dict[str, dict]:
    return {s["stage"]: s for s in cell["explain"]["phases"][phase]["stages"]}


@pytest.mark.parametrize(
    "bundle, prompt_stages, decode_stages",
    [
        (TINY_FLAT, {"decoder"}, {"decoder"}),
        (TINY_PIPELINE, {"embeddings", "context", "lm_head"}, {"embeddings", "iterator", "lm_head"}),
    ],
    ids=["flat", "pipeline"],
)
def test_explain_breaks_a_prompt_pass_and_a_decode_step_into_stages_and_operators(
    bundle, prompt_stages, decode_stages, tmp_path
):
    [cell] = explained(bundle, tmp_path=tmp_path)
    ex = cell["explain"]
    assert ex["profiled"]["measured_iterations_profiled"] == 0
    assert (ex["profiled"]["generations"], ex["profiled"]["decode_steps"], ex["profiled"]["prompt_tokens"]) == (
        2,
        5,
        16,
    )
    assert (
        len(cell["samples"]["iterations"]) == 2 and len(cell["samples"]["warmup"]) == 1
    )  # measured as asked, nothing added
    assert set(ex["phases"]) == {"prompt", "decode_step"}
    assert ex["phases"]["decode_step"]["instances"] == 5
    assert set(stages_of(cell, "prompt")) == prompt_stages and set(stages_of(cell, "decode_step")) == decode_stages
    for phase in ("prompt", "decode_step"):
        assert all(s["runs"] == 1 for s in stages_of(cell, phase).values())
    decoder = stages_of(cell, "decode_step")["iterator" if "iterator" in decode_stages else "decoder"]
    ops = {o["op"]: o for o in decoder["ops"]}
    assert (
        ops["MatMulNBits"]["ep"] == "CPUExecutionProvider" and ops["MatMulNBits"]["count"] > 0
    )  # the int4 projections
    check_sums(cell)


#: Width of the difference test's MatMuls: at 256 the 8 extra MatMuls cost 0.47 ms a run, which a
#: loaded machine's scheduling noise in the "outside operators" time could outgrow; at 1024, 16x that.
WIDTH = 1024


def _model(path: Path, extra_matmuls: int) -> Path:
    """x [64, WIDTH] -> Relu -> y; with ``extra_matmuls`` chained WIDTH x WIDTH MatMuls in between (the known extra cost)."""
    rng = np.random.default_rng(3)
    nodes, inits, last = [helper.make_node("Relu", ["x"], ["h0"])], [], "h0"
    for i in range(extra_matmuls):
        inits.append(numpy_helper.from_array(rng.standard_normal((WIDTH, WIDTH)).astype(np.float32) / 32, f"w{i}"))
        nodes.append(helper.make_node("MatMul", [last, f"w{i}"], [f"m{i}"]))
        last = f"m{i}"
    nodes.append(helper.make_node("Identity", [last], ["y"]))
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [64, WIDTH])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [64, WIDTH])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def test_a_model_with_an_extra_operator_shows_it_at_the_top_of_the_difference(tmp_path):
    plain = _model(tmp_path / "plain.onnx", 0)
    heavy = _model(tmp_path / "heavy.onnx", 8)
    [a] = explained(plain, tmp_path=_tmp(tmp_path, "a"), shape=())
    [b] = explained(heavy, tmp_path=_tmp(tmp_path, "b"), shape=())
    for cell in (a, b):
        check_sums(cell)
        assert cell["explain"]["profiled"]["runs"] == 5
    [diff] = record_difference(a, b)
    top = diff.contributions[0]
    assert top.label == "model MatMul" and (top.count_a, top.count_b) == (0, 8)
    assert top.delta_ms > 0


def _tmp(tmp_path: Path, name: str) -> Path:
    (tmp_path / name).mkdir()
    return tmp_path / name
