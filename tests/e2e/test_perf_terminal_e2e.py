"""What `winml perf` shows a person on a terminal (issue 28)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import TINY_FLAT

pytestmark = pytest.mark.e2e


def test_stored_line_comes_after_the_results_on_its_own_line(tmp_path):
    """stdout and stderr into one pipe, stdout block-buffered (no PYTHONUNBUFFERED): as `2>&1 | tee`."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    proc = subprocess.run(
        [sys.executable, "-m", "winml_perf", "perf", str(TINY_FLAT), "--invocations", "1", "--iterations", "2",
         "--max-new-tokens", "4", "--prompt-tokens", "8", "--store", str(tmp_path / "s.db")],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, timeout=300, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout
    lines = proc.stdout.splitlines()
    stored = [i for i, line in enumerate(lines) if "stored 1 record(s)" in line]
    assert len(stored) == 1 and lines[stored[0]].startswith("stored 1 record(s)"), proc.stdout
    table = max(i for i, line in enumerate(lines) if line.startswith("| config"))
    assert stored[0] > table, proc.stdout


def test_a_static_bundle_without_flags_is_measured_at_its_own_prompt_length(tmp_path):
    from tests.conftest import BUNDLES, run_winml

    r = run_winml("perf", BUNDLES / "tiny-qwen2-npu", "--invocations", "1", "--iterations", "1",
                  "--max-new-tokens", "4", "--no-store", "-q", "--format", "json", cwd=tmp_path)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "static prompt length of 16 tokens: measuring at --prompt-tokens 16" in r.stderr
    (cell,) = r.json()["cells"]
    assert cell["status"] == "ok" and cell["shape"]["prompt_tokens"] == 16
