"""The README's commands on the base install (issue 38): with every module of an extra (and onnx, a
base dependency a broken install may lack) made unimportable, no command ends in "unexpected
ModuleNotFoundError"; what needs a missing module exits 2 naming the pip command, before any work."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests import models
from tests.conftest import QUICK_RUN, TINY_FLAT, run_winml

pytestmark = pytest.mark.e2e

#: modules only an extra installs (pyproject.toml), and onnx
BLOCKED = (
    "onnx",
    "onnx_ir",
    "torch",
    "transformers",
    "tokenizers",
    "safetensors",
    "psycopg",
    "pynvml",
    "onnxruntime_qnn",
    "gguf",
)

#: winml serve, as lean as a test can make it (the README's closed loop)
SERVE = ("serve", "--concurrency", "1,2", "--requests", "4", "--prompt-tokens", "8", "--max-new-tokens", "4")
SERVE += ("--invocations", "1", "-q")


BLOCKER = f"""
import sys

BLOCKED = {BLOCKED!r}


class _Blocker:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None


sys.meta_path.insert(0, _Blocker())
"""


@pytest.fixture
def base_env(tmp_path: Path) -> dict[str, str]:
    folder = tmp_path / "blocker"
    folder.mkdir()
    (folder / "sitecustomize.py").write_text(BLOCKER, encoding="utf-8")
    path = os.pathsep.join(p for p in (str(folder), os.environ.get("PYTHONPATH", "")) if p)
    return {"PYTHONPATH": path, "WINML_PERF_EP_LIBRARIES": ""}


def test_the_blocker_blocks(base_env):
    import subprocess
    import sys

    code = "import onnx"
    proc = subprocess.run([sys.executable, "-c", code], env={**os.environ, **base_env}, capture_output=True, text=True)
    assert proc.returncode == 1 and "No module named 'onnx'" in proc.stderr


def _ok(result, *args) -> None:
    assert "unexpected" not in result.stderr and "Traceback" not in result.stderr, (args, result.stderr[-2000:])
    assert result.returncode in (0, 2), (args, result.returncode, result.stderr[-2000:])


def test_readme_commands_on_the_base_install(base_env, tmp_path, bundle_copy):
    bundle = bundle_copy(TINY_FLAT)
    store = tmp_path / "store.db"
    quick = [a for a in QUICK_RUN if a not in ("--no-store",)]
    walk = [
        ("perf", str(bundle), *quick, "--store", str(store)),
        ("perf", str(bundle), "--format", "json", *quick, "--store", str(store)),
        (
            "perf",
            str(bundle),
            *quick,
            "--store",
            str(store),
            "--route",
            "config",
            "--route",
            "ep=cpu",
            "--no-equivalence",
        ),
        ("devices",),
        ("bundle", "show", str(bundle), "--ep", "cpu", "--placement"),
        ("bundle", "prepare", str(bundle), "--ep", "cpu"),
        ("bundle", "clean", str(bundle)),
        ("results", "list", "--store", str(store)),
        ("results", "export", "--format", "bmf", "--store", str(store), "-o", str(tmp_path / "bmf.json")),
        ("compare", "routes", "--store", str(store)),
        ("compare", "runs", "--store", str(store), "--baseline", "previous", "--candidate", "latest"),
        ("dashboard", "--store", str(store), "-o", str(tmp_path / "site")),
        (*SERVE, str(bundle), "-o", str(tmp_path / "serve.json"), "--store", str(store)),
        ("dashboard", "--serving", str(tmp_path / "serve.json"), "-o", str(tmp_path / "serving-site")),
        ("perf", str(models.mlp(tmp_path / "mlp.onnx")), "--ep", "cpu", "--iterations", "3", "--store", str(store)),
    ]
    for args in walk:
        result = run_winml(*args, env=base_env, cwd=tmp_path)
        _ok(result, *args)
        if args[:2] == ("compare", "routes"):  # ep=cpu is config's own route on this bundle: nothing to compare
            assert result.returncode == 2 and "no run" in result.stderr, result.stderr
        else:
            assert result.returncode == 0, (args, result.stderr[-2000:])
    run_id = json.loads((tmp_path / "serve.json").read_text())["run_id"]
    shown = run_winml("results", "show", run_id[:12], "--store", str(store), env=base_env, cwd=tmp_path)
    _ok(shown, "results", "show")
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert "serving: concurrency 2, served by engine" in shown.stdout and "goodput req/s" in shown.stdout


def test_features_that_need_onnx_exit_2_naming_pip_before_any_work(base_env, tmp_path, bundle_copy):
    bundle = bundle_copy(TINY_FLAT)
    routed = ("perf", str(bundle), "--route", "config", "--route", "ep=cpu", "--check-outputs", *QUICK_RUN)
    for args in [
        routed,
        ("perf", str(bundle), "--reference-bundle", str(TINY_FLAT), *QUICK_RUN),
        ("tune", str(bundle), "--eps", "cpu", "--budget", "20s", "--no-store"),
        ("bundle", "synth", "-o", str(tmp_path / "synth"), "--preset", "qwen2.5-0.5b"),
        ("results", "list", "--store", "postgresql://nobody@127.0.0.1:1/none"),
        ("bundle", "from-gguf", str(_gguf_stand_in(tmp_path)), "-o", str(tmp_path / "from-gguf")),
    ]:
        result = run_winml(*args, env=base_env, cwd=tmp_path)
        _ok(result, *args)
        assert result.returncode == 2 and "pip install" in result.stderr, (args, result.stderr[-2000:])
    derived = [p.name for p in (bundle / "_compiled").glob("*") if p.name != ".lock"]
    assert derived == []  # refused before any route was derived
    # the same run without the equivalence check needs no onnx
    result = run_winml(*routed, "--no-equivalence", env=base_env, cwd=tmp_path)
    _ok(result, *routed)
    assert result.returncode == 0


def _gguf_stand_in(tmp_path: Path) -> Path:
    """A file named .gguf: the module check comes before the file is read."""
    path = tmp_path / "model.gguf"
    path.write_bytes(b"GGUF" + bytes(60))
    return path


def test_an_optional_module_missing_anywhere_is_exit_2_naming_pip():
    from winml_perf.support.optional import missing_module_error

    error = missing_module_error(ModuleNotFoundError("No module named 'onnx.helper'", name="onnx.helper"))
    assert error is not None and error.exit_code == 2
    assert "onnx" in str(error) and "pip install 'onnx>=1.16'" in str(error)
    assert (
        missing_module_error(ModuleNotFoundError("No module named 'nothing_of_ours'", name="nothing_of_ours")) is None
    )
