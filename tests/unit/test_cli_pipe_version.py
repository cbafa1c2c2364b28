"""`winml ... | head` ends quietly, and `winml --version` answers (issue 28)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from winml_perf import __version__


def _winml_into_a_closed_pipe(*args: str) -> subprocess.CompletedProcess:
    """Run winml with its stdout a pipe whose reader has already gone (what `| head` leaves)."""
    read, write = os.pipe()
    os.close(read)
    try:
        return subprocess.run(
            [sys.executable, "-m", "winml_perf", *args], stdout=write, stderr=subprocess.PIPE, text=True, timeout=120
        )
    finally:
        os.close(write)


@pytest.mark.parametrize("args", [("devices",), ("bundle", "prepare", "--help"), ("--version",)])
def test_a_reader_that_left_gets_no_traceback(args):
    r = _winml_into_a_closed_pipe(*args)
    assert "Traceback" not in r.stderr and "BrokenPipeError" not in r.stderr, r.stderr
    assert r.returncode in (0, 1)


def test_version():
    r = subprocess.run([sys.executable, "-m", "winml_perf", "--version"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout == f"winml-perf {__version__}\n"
