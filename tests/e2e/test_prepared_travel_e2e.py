"""Issue 26: a route prepared device-free on machine A (one bundle folder) is exported, imported into
machine B's copy of the bundle (another folder: other inodes, so A's derived bundle would never be a
hit there) and measured by `winml perf` on B with a cache hit and "matched: ok"."""

from __future__ import annotations

import importlib.util
import json
import shutil

import pytest

from tests.conftest import BUNDLES, QUICK_RUN, run_winml

pytestmark = [pytest.mark.e2e, pytest.mark.qnn]

RUN = QUICK_RUN
SOC60 = ("--ep", "qnn", "--compile", "--ep-option", "soc_model=60")


@pytest.fixture
def machines(tmp_path):
    if importlib.util.find_spec("onnxruntime_qnn") is None:
        pytest.skip("needs onnxruntime-qnn")
    for host in ("a", "b"):
        shutil.copytree(BUNDLES / "tiny-qwen2", tmp_path / host / "tiny", ignore=shutil.ignore_patterns("_compiled"))
    return tmp_path / "a" / "tiny", tmp_path / "b" / "tiny", tmp_path / "carried"


def _ok(done):
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip().splitlines()[-1]


def test_export_then_import_gives_perf_on_b_a_hit_and_ok(machines):
    """Failed before: no export-prepared / import-prepared commands (exit 2)."""
    a, b, carried = machines
    derived = _ok(run_winml("bundle", "prepare", a, *SOC60, "--device-free"))
    _ok(run_winml("bundle", "export-prepared", derived, carried))
    assert json.loads((carried / "export.json").read_text())["files"]
    imported = _ok(run_winml("bundle", "import-prepared", b, carried))
    assert imported.startswith(str(b))
    measured = run_winml("perf", b, *SOC60, "--format", "json", *RUN)
    assert measured.returncode == 0, measured.stderr[-3000:]
    (cell,) = json.loads(measured.stdout)["cells"]
    route = cell["route"]
    assert route["cache"] == "hit", route["cache_reason"]
    (outcome,) = [c for c in route["compile"] if c["status"] == "compiled"]
    prepared = outcome["compatibility"]["prepared"]
    assert prepared["matched"] == "ok" and prepared["built"]["made"] == "device-free", prepared


def test_import_into_a_changed_bundle_is_exit_2_naming_the_model(machines):
    a, b, carried = machines
    derived = _ok(run_winml("bundle", "prepare", a, *SOC60, "--device-free"))
    _ok(run_winml("bundle", "export-prepared", derived, carried))
    with open(b / "model.onnx", "ab") as f:
        f.write(b"\0")
    done = run_winml("bundle", "import-prepared", b, carried)
    assert done.returncode == 2 and "model.onnx" in done.stderr, done.stderr[-2000:]


def test_import_into_a_bundle_with_other_weights_is_exit_2_naming_the_data_file(machines):
    # the weights live in model.onnx.data; the compiled model carries A's, so B's must be the same
    a, b, carried = machines
    derived = _ok(run_winml("bundle", "prepare", a, *SOC60, "--device-free"))
    _ok(run_winml("bundle", "export-prepared", derived, carried))
    assert set(json.loads((carried / "export.json").read_text())["sources"]) == {"model.onnx", "model.onnx.data"}
    with open(b / "model.onnx.data", "r+b") as f:
        first = f.read(1)
        f.seek(0)
        f.write(bytes([first[0] ^ 1]))
    done = run_winml("bundle", "import-prepared", b, carried)
    assert done.returncode == 2, done.stderr[-2000:]
    assert "model.onnx.data in" in done.stderr and "external data of model.onnx" in done.stderr
    assert not (b / "_compiled").exists() or not any((b / "_compiled").glob("qnn-*"))
