"""`winml perf` as a subprocess, for the benchmarks that time whole invocations (one fresh process each)."""

from __future__ import annotations

import json
import subprocess
import sys
import time


def run_perf_json(bundle: str, flags: list[str]) -> tuple[dict, float]:
    """Run `winml perf BUNDLE --format json --no-store -q FLAGS...`; (the run document, wall seconds).
    A failed run stops the benchmark with the command and the tail of its stderr."""
    cmd = [sys.executable, "-m", "winml_perf", "perf", str(bundle), "--format", "json", "--no-store", "-q", *flags]
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return json.loads(done.stdout), wall


def flags_after_dashes(argv: list[str]) -> tuple[list[str], list[str]]:
    """(the benchmark's own arguments, the `winml perf` flags after ``--``)."""
    if "--" not in argv:
        return argv, []
    cut = argv.index("--")
    return argv[:cut], argv[cut + 1 :]
