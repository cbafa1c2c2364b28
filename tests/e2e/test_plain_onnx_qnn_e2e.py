"""Issue 23 finding 4 on the QNN HTP emulator: a plain .onnx model's route says where its nodes ran,
--strict holds it, QNN gets its backend_type default, and `bundle prepare` and `perf --prepare` make
one prepared model from the same --ep-option."""

from __future__ import annotations

import importlib.util
import json

import pytest

from tests import models
from tests.conftest import run_winml

pytestmark = [pytest.mark.e2e, pytest.mark.qnn]

RUN = ("--iterations", "2", "--warmup", "1", "--invocations", "1", "--no-store")
CPU = "CPUExecutionProvider"


@pytest.fixture(scope="module", autouse=True)
def qnn_installed():
    if importlib.util.find_spec("onnxruntime_qnn") is None:
        pytest.skip("onnxruntime-qnn is not installed (pip install -e '.[qnn]')")


def _doc(stdout: str) -> dict:
    return json.loads(stdout[stdout.index("{") :])  # libQnnHtp prints a LIBNATIVE line on stdout


def test_a_total_fallback_is_reported_and_strict_fails_it(tmp_path):
    """Before: exit 1 without --session-config backend_type; with it exit 0, model: QNN, no warning, --strict ignored."""
    model = models.dynamic_batch(tmp_path / "dyn.onnx")  # dynamic dims: QNN takes none of its nodes
    shown = run_winml("perf", model, "--ep", "qnn", "--shape", "x=2,8", *RUN, "--format", "json", "-q")
    assert shown.returncode == 0, shown.stderr[-3000:]
    (cell,) = _doc(shown.stdout)["cells"]
    assert cell["route"]["actual"]["model"] == CPU
    assert cell["route"]["stages"][0]["placement"]["nodes_per_ep"] == {CPU: 3}
    assert "ep_mismatch" in [w["code"] for w in cell["warnings"]]
    strict = run_winml("perf", model, "--ep", "qnn", "--shape", "x=2,8", "--strict", *RUN, "-q")
    assert strict.returncode == 1 and "stage `model`" in strict.stderr and "3 of 3 nodes" in strict.stderr


def test_prepare_and_perf_prepare_share_one_model_with_the_options_asked(tmp_path):
    """Before: prepare dropped --ep-option silently and perf refused it for plain models (exit 2)."""
    model = models.mlp(tmp_path / "mlp.onnx")
    prepared = run_winml("bundle", "prepare", model, "--ep", "qnn", "--ep-option", "soc_model=60", "--format", "json")
    assert prepared.returncode == 0, prepared.stderr[-3000:]
    first = _doc(prepared.stdout)
    measured = run_winml(
        "perf", model, "--ep", "qnn", "--ep-option", "soc_model=60", "--prepare", *RUN, "--format", "json", "-q"
    )
    assert measured.returncode == 0, measured.stderr[-3000:]
    (cell,) = _doc(measured.stdout)["cells"]
    assert cell["route"]["prepared"]["key"] == first["key"] and cell["route"]["prepared"]["cache"] == "hit"
    ran_with = cell["route"]["actual"]["session"]["options"]["provider_options"]
    assert ran_with == {"soc_model": "60", "backend_type": "htp"}
    bogus = run_winml("bundle", "prepare", model, "--ep", "qnn", "--ep-option", "bogus_key=1")
    assert bogus.returncode == 2 and "bogus_key" in bogus.stderr
