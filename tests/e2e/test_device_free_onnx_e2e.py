"""Issue 26, plain .onnx models: the device-free compile child with a lowered size limit (large models
get external data), the perf record's `prepared` provenance, and export/import of a prepared model."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest

from tests.conftest import BUNDLES, run_winml

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.qnn,
    pytest.mark.skipif(importlib.util.find_spec("onnxruntime_qnn") is None, reason="needs onnxruntime-qnn"),
]

QNN = "QNNExecutionProvider"
SOC60 = {"backend_type": "htp", "soc_model": "60"}

# The device-free child as device_free.py starts it, with protobuf's limit lowered to 100 kB (the tiny
# model and its external data weigh 640 kB), so the compile and the re-save take the large-model path.
_CHILD = """
import json, sys
import onnxruntime_qnn
from winml_perf.bundle.epcontext import device_free_child as c
c.INLINE_LIMIT_BYTES = 100_000
lib = onnxruntime_qnn.get_library_path()
sys.exit(c.main([sys.argv[1], sys.argv[2], "QNNExecutionProvider", lib, sys.argv[3], "all", "0", "{}"]))
"""
_LOAD = """
import json, sys
from pathlib import Path
from winml_perf.ep.plugins import registered_plugins
from winml_perf.bundle.epcontext.compat import load_error
registered_plugins()
print(json.dumps(load_error(Path(sys.argv[1]), "QNNExecutionProvider", json.loads(sys.argv[2]), "all")))
"""


def _python(script: str, *args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", script, *map(str, args)], capture_output=True, text=True, timeout=300)


def test_a_model_over_the_size_limit_is_compiled_device_free_with_external_data_and_loads_on_qnn(tmp_path):
    """Failed before: the child compiled and re-saved every model inline (a 2 GB model could not be written)."""
    out = tmp_path / "decoder_qnn_ctx.onnx"
    done = _python(_CHILD, BUNDLES / "tiny-qwen2" / "model.onnx", out, json.dumps(SOC60))
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["compatibility_info"].endswith(":0:60:0:0"), report
    assert out.stat().st_size < 100_000 < (tmp_path / "decoder_qnn_ctx.onnx.data").stat().st_size
    loaded = _python(_LOAD, out, json.dumps(SOC60))  # the running EP (not .virtual) takes it, weights read back
    assert loaded.returncode == 0 and loaded.stdout.strip().splitlines()[-1] == "null", loaded.stdout + loaded.stderr


# The on-device compile child of a genai route (compile.py), the same lowered limit.
_ON_DEVICE = """
import sys
from winml_perf.ep.plugins import registered_plugins
from winml_perf.bundle.epcontext import compile as c, device_free_child as d
registered_plugins()
d.INLINE_LIMIT_BYTES = 100_000
c._compile(sys.argv[1], sys.argv[2], "QNNExecutionProvider", sys.argv[3], "all")
"""


def test_a_model_over_the_size_limit_compiled_on_the_device_gets_external_data_and_loads(tmp_path):
    """Failed before: the on-device compile wrote every model inline (636 kB here)."""
    out = tmp_path / "decoder_qnn_ctx.onnx"
    done = _python(_ON_DEVICE, BUNDLES / "tiny-qwen2" / "model.onnx", out, json.dumps(SOC60))
    assert done.returncode == 0, done.stderr[-3000:]
    verdict = json.loads(done.stdout.strip().splitlines()[-1])
    assert verdict["verdict"] == "verified", verdict  # a session with the options loaded it, weights read back
    assert out.stat().st_size < 100_000 < (tmp_path / "decoder_qnn_ctx.onnx.data").stat().st_size


QNN60 = ("--ep", "qnn", "--ep-option", "soc_model=60")
RUN = ("--iterations", "2", "--warmup", "1", "--invocations", "1", "--no-store", "--format", "json", "-q")


def _json(stdout: str) -> dict:
    return json.loads(stdout[stdout.index("{") :])


def _prepared_of(done) -> dict:
    assert done.returncode == 0, done.stderr[-3000:]
    (cell,) = _json(done.stdout)["cells"]
    return cell["route"]["prepared"]


@pytest.fixture
def mlp(tmp_path):
    from tests import models

    return models.mlp(tmp_path / "mlp.onnx")


def test_perf_of_a_plain_model_records_how_its_compiled_model_was_made_and_whether_it_matched(mlp):
    """Failed before: a plain model's record had no provenance (prepared held no 'compatibility'), and
    --no-recompile was refused with --prepare ('applies with --compile')."""
    done = run_winml("bundle", "prepare", mlp, *QNN60, "--compile", "--device-free", "--format", "json")
    assert done.returncode == 0, done.stderr[-3000:]
    assert _json(done.stdout)["compatibility"]["verdict"] == "unknown"  # the build server has no device to ask
    hit = _prepared_of(run_winml("perf", mlp, *QNN60, "--prepare", *RUN))  # another process
    assert hit["cache"] == "hit", hit["cache_reason"]
    compat = hit["compatibility"]
    assert compat["verdict"] == "verified" and compat["info"].endswith(":0:60:0:0"), compat  # .virtual key, read
    built = compat["prepared"]["built"]
    assert built["made"] == "device-free" and built["registered_as"] == QNN + ".virtual", built
    assert built["version"] == "2.7.0" and built["sdk_version"] and built["target_options"]["soc_model"] == "60"
    assert compat["prepared"]["matched"] == "ok", compat["prepared"]
    # soc_model changed in the running options: refused with --no-recompile (nothing compiled), else
    # recompiled here, on the device, and the reason kept
    opts88 = ("--ep", "qnn", "--ep-option", "soc_model=88", "--prepare")
    refused = run_winml("perf", mlp, *opts88, "--no-recompile", *RUN)
    assert refused.returncode == 2 and "soc_model 60 -> 88" in refused.stderr, refused.stderr[-2000:]
    assert "--no-recompile: no prepared route fits" in refused.stderr
    assert len(list(mlp.parent.glob("_compiled/mlp-qnn-*"))) == 1  # only the device-free one
    soc88 = _prepared_of(run_winml("perf", mlp, *opts88, *RUN))
    assert soc88["cache"] == "miss" and "soc_model 60 -> 88" in soc88["cache_reason"], soc88["cache_reason"]
    made = soc88["compatibility"]["prepared"]["built"]
    assert made["made"] == "on-device" and made["target_options"]["soc_model"] == "88", made
    assert (
        soc88["compatibility"]["info"].endswith(":0:88:0:0") and soc88["compatibility"]["prepared"]["matched"] == "ok"
    )


@pytest.fixture
def machines(tmp_path):
    """Machine A's and machine B's copy of one model (other folders, so other inodes: never a hit by copying)."""
    from tests import models

    a = models.mlp(tmp_path / "a" / "mlp.onnx")
    (tmp_path / "b").mkdir()
    b = tmp_path / "b" / "mlp.onnx"
    b.write_bytes(a.read_bytes())
    return a, b, tmp_path / "carried"


def _last_line(done) -> str:
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip().splitlines()[-1]


def test_a_plain_model_prepared_device_free_travels_export_import_and_perf_on_b_hits_with_ok(machines):
    """Failed before: export-prepared took genai derived bundles only ('holds no compiled stage', exit 2)."""
    a, b, carried = machines
    prepared = _last_line(run_winml("bundle", "prepare", a, *QNN60, "--compile", "--device-free"))
    _last_line(run_winml("bundle", "export-prepared", prepared, carried))
    doc = json.loads((carried / "export.json").read_text())
    assert doc["model"] == "mlp.onnx" and doc["settings"]["provider_options"]["soc_model"] == "60", doc
    imported = run_winml("bundle", "import-prepared", b, carried)
    assert _last_line(imported).startswith(str(b.parent / "_compiled")), imported.stdout
    assert "matched ok" in imported.stderr, imported.stderr[-2000:]
    hit = _prepared_of(run_winml("perf", b, *QNN60, "--prepare", *RUN))
    assert hit["cache"] == "hit", hit["cache_reason"]
    compat = hit["compatibility"]
    assert compat["verdict"] == "verified" and compat["info"].endswith(":0:60:0:0"), compat
    built = compat["prepared"]["built"]
    assert built["made"] == "device-free" and built["imported_from"] == str(carried.resolve()), built
    assert compat["prepared"]["matched"] == "ok", compat["prepared"]


def test_importing_a_plain_model_export_into_a_changed_model_is_exit_2_and_writes_nothing(machines):
    a, b, carried = machines
    prepared = _last_line(run_winml("bundle", "prepare", a, *QNN60, "--compile", "--device-free"))
    _last_line(run_winml("bundle", "export-prepared", prepared, carried))
    with open(b, "ab") as f:
        f.write(b"\0")
    done = run_winml("bundle", "import-prepared", b, carried)
    assert done.returncode == 2 and "mlp.onnx" in done.stderr and "not the model" in done.stderr, done.stderr[-2000:]
    assert not list(b.parent.glob("_compiled/mlp-qnn-*"))
    wrong = run_winml("bundle", "import-prepared", BUNDLES / "tiny-qwen2", carried)  # a model's export, a bundle
    assert wrong.returncode == 2 and "import-prepared MODEL.onnx EXPORT" in wrong.stderr, wrong.stderr[-2000:]


def test_a_plain_model_compile_qnn_cannot_set_up_for_names_qnns_error(mlp):
    # on the device: onnxruntime's "Unable to compile any nodes" hid QNN's own error for soc_model=625
    done = run_winml("bundle", "prepare", mlp, "--ep", "qnn", "--compile", "--ep-option", "soc_model=625")
    assert done.returncode == 2, done.stderr[-3000:]
    assert "failed: qnn failed while choosing the nodes it takes:" in done.stderr
    assert "QNN_DEVICE_ERROR_INVALID_CONFIG" in done.stderr
