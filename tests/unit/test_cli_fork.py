"""tests/cli_fork.py: a `winml` run forked from the worker's server is the run a plain subprocess
gives (exit code, stdout, stderr, working folder, environment), and a run whose start-up variables
differ from the server's is a plain subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli_fork import RunServer
from tests.conftest import TINY_FLAT

CASES = [
    ["--version"],
    ["perf", "--iterations", "0", str(TINY_FLAT)],  # a usage error: exit 2, one line on stderr
    ["bundle", "show", str(TINY_FLAT), "--format", "json"],
    ["results", "list"],  # reads WINML_PERF_STORE from the run's environment
]


def _plain(argv, env, cwd):
    p = subprocess.run([sys.executable, "-m", "winml_perf", *argv], capture_output=True, text=True, env=env, cwd=cwd)
    return p.returncode, p.stdout, p.stderr


@pytest.fixture(scope="module")
def server():
    s = RunServer()
    yield s
    s.close()


@pytest.mark.parametrize("argv", CASES, ids=lambda a: " ".join(a[:2]))
def test_a_forked_run_is_the_plain_subprocess_run(server, tmp_path, argv):
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "WINML_PERF_STORE": str(tmp_path / "own.db")}
    out, err = tmp_path / "out", tmp_path / "err"
    code = server.run(argv, env, tmp_path, out, err, timeout=120)
    assert code is not None, "the server ran nothing"
    forked = (code, out.read_text(), err.read_text())
    plain = _plain(argv, env, tmp_path)
    if argv[0] == "bundle":  # the JSON names the bundle the same way; timings aside, compare the keys
        assert forked[0] == plain[0] == 0 and forked[1].split(":")[0] == plain[1].split(":")[0]
    else:
        assert forked == plain


def test_the_forked_run_works_in_its_own_folder_and_environment(server, tmp_path):
    out, err = tmp_path / "out", tmp_path / "err"
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "WINML_PERF_STORE": "relative/s.db"}
    assert server.run(["results", "list"], env, tmp_path, out, err, timeout=120) == 2
    assert str(tmp_path / "relative" / "s.db") in err.read_text() or "relative/s.db" in err.read_text()
    assert not Path("relative").exists()  # resolved against the run's folder, not the server's


def test_a_different_start_up_variable_is_a_plain_subprocess(server, tmp_path):
    out, err = tmp_path / "out", tmp_path / "err"
    base = {**os.environ, "PYTHONUNBUFFERED": "1"}
    assert server.run(["--version"], base, None, out, err, timeout=60) == 0
    for name, value in (("LD_LIBRARY_PATH", "/nowhere"), ("PYTHONHASHSEED", "7"), ("TERMINAL_WIDTH", "50")):
        assert not server.can_run({**base, name: value}), name
        assert server.run(["--version"], {**base, name: value}, None, out, err, timeout=60) is None


def test_a_run_past_its_timeout_is_killed_and_raises_as_subprocess_does(server, tmp_path):
    out, err = tmp_path / "out", tmp_path / "err"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    argv = ["perf", str(TINY_FLAT), "--duration", "30s", "--no-store", "-q"]
    with pytest.raises(subprocess.TimeoutExpired):
        server.run(argv, env, tmp_path, out, err, timeout=1.5)
    assert server.run(["--version"], env, None, out, err, timeout=60) == 0  # the server lives on


def test_a_server_that_died_hands_the_run_to_a_plain_subprocess(tmp_path):
    server = RunServer()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    out, err = tmp_path / "out", tmp_path / "err"
    assert server.run(["--version"], env, None, out, err, timeout=60) == 0
    assert server._proc is not None
    server._proc.kill()
    server._proc.wait()
    assert server.run(["--version"], env, None, out, err, timeout=60) is None
    server.close()
