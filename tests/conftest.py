"""Shared fixtures: the committed tiny bundles and a helper that runs the real `winml` CLI."""

from __future__ import annotations

import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.cli_fork import RunServer

#: fixtures shared by the store's tests (store_url runs each on SQLite and, where offered, PostgreSQL)
pytest_plugins = ["tests.results_fixtures"]

if os.environ.get("PYTEST_XDIST_WORKER"):
    # a pytest-xdist worker starts with COLUMNS=80 and LINES=24, and `winml` sizes its tables to
    # $COLUMNS: the subprocesses of a worker see the environment of a plain pytest run instead
    for _name in ("COLUMNS", "LINES"):
        os.environ.pop(_name, None)

if "WINML_PERF_TEST_PYCACHE" not in os.environ:
    # Each `winml` a test starts compiles ~150 of our modules when bytecode is not cached
    # (PYTHONDONTWRITEBYTECODE=1, as on this machine): ~0.35 CPU s a process, hundreds of them.
    # The session's processes share one bytecode cache in a temporary folder instead (workers and
    # their subprocesses inherit it); nothing is written into the source tree.
    _PYCACHE = tempfile.mkdtemp(prefix="winml-perf-pycache-")
    atexit.register(shutil.rmtree, _PYCACHE, True)
    os.environ.update(WINML_PERF_TEST_PYCACHE=_PYCACHE, PYTHONPYCACHEPREFIX=_PYCACHE)
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

# The equivalence check's route passes run in this process, in turn, whatever the machine's cores
# (equivalence/passes/genai_passes.py): many tests stand in for the pass here, which a lane process would not see.
# tests/unit/test_genai_passes.py runs the lanes themselves.
os.environ.setdefault("WINML_PERF_CHECK_PROCESSES", "0")

REPO = Path(__file__).resolve().parents[1]
BUNDLES = REPO / "bundles"
#: The cheapest real measurement of a tiny bundle, for tests that assert what ran, not how fast.
QUICK_RUN = (
    *("--prompt-tokens", "16", "--max-new-tokens", "4"),
    *("--warmup", "1", "--iterations", "2", "--invocations", "1"),
    *("--no-store", "-q"),
)
#: One cheap real measurement as a JSON run record on stdout.
LEAN_JSON = (
    *("--format", "json", "--iterations", "1", "--invocations", "1", "--warmup", "0"),
    *("--prompt-tokens", "8", "--max-new-tokens", "4"),
)
TINY_FLAT = BUNDLES / "tiny-qwen2"
TINY_PIPELINE = BUNDLES / "tiny-qwen2-pipeline"


@dataclass
class CliResult:
    returncode: int
    stdout: str
    stderr: str

    def json(self):
        return json.loads(self.stdout)


#: This worker's fork server (tests/cli_fork.py): `winml` runs without re-importing the package.
_RUN_SERVER = RunServer()
atexit.register(_RUN_SERVER.close)


def run_winml(*args: str, cwd: Path | None = None, env: dict | None = None, timeout: float = 300) -> CliResult:
    """Run `python -m winml_perf ARGS` in a process of its own, the way a user runs `winml`: a fork
    of this worker's server that already imported the package, or a plain subprocess where a fork
    could not reproduce the run (tests/cli_fork.py)."""
    full_env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    argv = [str(a) for a in args]
    with tempfile.TemporaryDirectory(prefix="winml-run-") as folder:
        out, err = Path(folder) / "stdout", Path(folder) / "stderr"
        code = _RUN_SERVER.run(argv, full_env, cwd, out, err, timeout)
        if code is not None:
            return CliResult(code, out.read_text(errors="replace"), err.read_text(errors="replace"))
    proc = subprocess.run(
        [sys.executable, "-m", "winml_perf", *argv],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=full_env,
        timeout=timeout,
    )
    return CliResult(proc.returncode, proc.stdout, proc.stderr)


@pytest.fixture
def winml():
    return run_winml


@pytest.fixture
def tiny_flat() -> Path:
    return TINY_FLAT


@pytest.fixture
def tiny_pipeline() -> Path:
    return TINY_PIPELINE


@pytest.fixture
def bundle_copy(tmp_path):
    """Copy a committed bundle into tmp_path (tests that mutate a bundle never touch bundles/)."""
    import shutil

    def _copy(src: Path, name: str | None = None) -> Path:
        dst = tmp_path / (name or src.name)
        shutil.copytree(src, dst, ignore=shutil.ignore_patterns("_compiled"))
        return dst

    return _copy


@pytest.fixture(scope="session", autouse=True)
def _committed_bundles_unchanged():
    """No command of the suite writes into a committed bundle (its ``_compiled/`` aside)."""
    from tests.bundle_bytes import assert_unchanged, tree_state

    before = {b: tree_state(b) for b in sorted(BUNDLES.iterdir()) if b.is_dir()}
    yield
    for bundle, state in before.items():
        assert_unchanged(state, bundle)


@pytest.fixture
def unchanged():
    """``with unchanged(folder): ...`` asserts the folder's bytes, mtimes and links are as before (``_compiled/`` aside)."""
    import contextlib

    from tests.bundle_bytes import assert_unchanged, tree_state

    @contextlib.contextmanager
    def _check(*folders: Path):
        before = {Path(f): tree_state(Path(f)) for f in folders}
        yield
        for folder, state in before.items():
            assert_unchanged(state, folder)

    return _check


@pytest.fixture(scope="session")
def _host_probes(tmp_path_factory) -> Path:
    """This machine's DRAM bandwidth (the 512 MiB probe), probed for real once per session in a child
    process. Each test's cache starts with it, so `winml perf` does not re-probe it in every test; the
    probe itself is tested in tests/unit/test_environment.py and tests/e2e/test_measure_e2e.py. The
    working-set probe that bounds the cache-resident tiny bundles is left to each run: its figure must
    come from the load of the moment the run is measured, or a quieter minute decodes past a bound
    probed under heavier load."""
    folder = tmp_path_factory.mktemp("host-probes")
    code = "from winml_perf.record import roofline\nroofline.cached_bandwidth()"
    env = {**os.environ, "WINML_PERF_CACHE_DIR": str(folder)}
    subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=600)
    return folder


@pytest.fixture(autouse=True)
def _isolated_store(tmp_path_factory, monkeypatch, _host_probes):
    """Every test (and every `winml` subprocess it starts) writes results to a private store, and
    has a private cache that starts with the session's host probes."""
    import shutil

    store = tmp_path_factory.mktemp("store") / "winml-perf.db"
    monkeypatch.setenv("WINML_PERF_STORE", str(store))
    cache = tmp_path_factory.mktemp("cache")
    for probe in _host_probes.iterdir():
        shutil.copy2(probe, cache / probe.name)
    monkeypatch.setenv("WINML_PERF_CACHE_DIR", str(cache))
    return store


def openvino_offers_a_device() -> bool:
    """The OpenVINO plugin is installed and offers a device here (an Intel host with `.[openvino]`):
    tests of an EP missing here that use OpenVINO as the missing one cannot run then. Asked in a child
    process, so that this one registers no plugin EP before its tests do."""
    import importlib.util

    if importlib.util.find_spec("onnxruntime_ep_openvino") is None:
        return False
    probe = (
        "from winml_perf.ep.plugins import register_plugin_eps; from winml_perf.ep.devices import list_ep_devices; "
        "register_plugin_eps(); "
        "print(any(d.ep_name.startswith('OpenVINOExecutionProvider') for d in list_ep_devices()))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    return out.stdout.strip().endswith("True")


#: For tests that take OpenVINO as the EP missing here.
needs_openvino_absent = pytest.mark.skipif(
    openvino_offers_a_device(), reason="OpenVINO offers a device here (plugin installed on an Intel host)"
)
