"""Issue 24 end to end: `winml perf` with two routes judges each against config from teacher-forced
logits (on by default), a perturbed copy of a bundle given as --reference-bundle is judged not
equivalent with the stage named, and --no-equivalence turns the check off."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import TINY_FLAT, TINY_PIPELINE, run_winml

pytestmark = pytest.mark.e2e

LEAN = ("--invocations", "1", "--prompt-tokens", "16", "--max-new-tokens", "4", "--warmup", "1", "--iterations", "1")
RUN = (*LEAN, "--no-store", "--format", "json", "-q")


def perturbed_copy(src: Path, dst: Path, scale: float = 0.03) -> Path:
    """A copy of ``src`` whose float weights are each scaled by a factor drawn from N(1, scale)."""
    import onnx
    from onnx import numpy_helper

    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("_compiled"))
    rng = np.random.default_rng(0)
    for path in dst.glob("*.onnx"):
        model = onnx.load(str(path))
        for init in model.graph.initializer:
            a = numpy_helper.to_array(init)
            if a.dtype.kind == "f":
                init.CopyFrom(
                    numpy_helper.from_array((a * (1 + scale * rng.standard_normal(a.shape))).astype(a.dtype), init.name)
                )
        data = dst / f"{path.name}.data"
        if data.exists():
            data.unlink()
            onnx.save(model, str(path), save_as_external_data=True, location=data.name)
        else:
            onnx.save(model, str(path))
    return dst


def _equivalence(result) -> dict[str, dict]:
    assert result.returncode == 0, result.stderr[-3000:]
    return {c["route"]["label"]: c["route"].get("equivalence") for c in result.json()["cells"]}


@pytest.mark.parametrize("bundle", [TINY_FLAT, TINY_PIPELINE], ids=["flat", "pipeline"])
def test_ep_cpu_is_judged_equivalent_to_config_by_default(bundle):
    result = run_winml("perf", bundle, "--route", "config", "--route", "ep=cpu", *RUN)
    eq = _equivalence(result)
    assert eq["config"] is None  # the reference is not judged against itself
    e = eq["ep=cpu"]
    assert e["verdict"] == "equivalent" and e["reference"] == "config" and e["figures"]["steps"] == 16
    assert e["route_path"] != e["reference_path"]  # the derived bundle, not the reference again
    assert [b["name"] for b in e["bands"]] == ["noise floor", "precision"]
    assert e["bands"][1]["figures"]["kl_mean"] > 0  # the precision change really changed the reference
    assert "ep=cpu ≈ config: equivalent" in result.stderr and "outside the timed iterations" in result.stderr
    if bundle == TINY_PIPELINE:
        judged = [s["stage"] for s in e["stages"]]
        assert judged == ["embeddings", "context", "lm_head"] and e["unobserved_stages"] == ["iterator"]


@pytest.mark.parametrize("bundle", [TINY_FLAT, TINY_PIPELINE], ids=["flat", "pipeline"])
def test_a_perturbed_reference_bundle_is_not_equivalent(bundle, tmp_path):
    ref = perturbed_copy(bundle, tmp_path / "perturbed")
    result = run_winml("perf", bundle, "--route", "config", "--route", "ep=cpu", "--reference-bundle", ref, *RUN)
    eq = _equivalence(result)
    for label in ("config", "ep=cpu"):
        e = eq[label]
        assert e["verdict"] == "not equivalent", e["figures"]
        assert e["reference"] == f"bundle:{ref}" and not e["figures"]["identical"]
        if bundle == TINY_PIPELINE:
            assert e["first_stage"] == "embeddings"  # the perturbed embedding matrix departs first
    assert "NOT equivalent" in result.stderr or "≉" in result.stderr


def test_no_equivalence_turns_it_off():
    result = run_winml("perf", TINY_FLAT, "--route", "config", "--route", "ep=cpu", "--no-equivalence", *RUN)
    assert set(_equivalence(result).values()) == {None}
    assert "≈" not in result.stderr


def test_a_reference_bundle_without_a_config_is_exit_2(tmp_path):
    result = run_winml("perf", TINY_FLAT, "--reference-bundle", tmp_path, *RUN)
    assert result.returncode == 2 and "--reference-bundle" in result.stderr and "genai_config.json" in result.stderr
