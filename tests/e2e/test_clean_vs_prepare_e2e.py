"""`winml bundle clean` in a loop against concurrent `winml bundle prepare` processes on one bundle:
every prepare exits 0 or with a clear message (exit 2 naming the problem), never "unexpected …"."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

from tests.conftest import TINY_PIPELINE

WORKERS, PREPARES_EACH = 3, 4


def _winml(*args) -> subprocess.Popen:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "winml_perf", *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def test_clean_in_a_loop_never_breaks_concurrent_prepares(bundle_copy, unchanged):
    bundle = bundle_copy(TINY_PIPELINE)
    results: list[tuple[str, int, str]] = []
    done = threading.Event()

    def prepares():
        for _ in range(PREPARES_EACH):
            p = _winml("bundle", "prepare", bundle, "--ep", "cpu", "--format", "json")
            out, err = p.communicate(timeout=300)
            results.append(("prepare", p.returncode, err))

    def cleans():
        while not done.is_set():
            p = _winml("bundle", "clean", bundle)
            out, err = p.communicate(timeout=300)
            results.append(("clean", p.returncode, err))

    with unchanged(bundle):
        workers = [threading.Thread(target=prepares) for _ in range(WORKERS)]
        cleaner = threading.Thread(target=cleans)
        cleaner.start()
        for w in workers:
            w.start()
        for w in workers:
            w.join(600)
        done.set()
        cleaner.join(600)
    prepares_run = [r for r in results if r[0] == "prepare"]
    cleans_run = [r for r in results if r[0] == "clean"]
    assert len(prepares_run) == WORKERS * PREPARES_EACH and cleans_run
    for kind, code, err in results:
        assert "unexpected" not in err and "Traceback" not in err, f"{kind} exit {code}: {err}"
        assert code in (0, 2), f"{kind} exit {code}: {err}"
        # onnxruntime may log a line of its own first (the WebGPU plugin under CI does): the message is ours
        assert code == 0 or any(line.startswith("error: ") for line in err.splitlines()), f"{kind} exit {code}: {err}"
    assert sum(1 for _, code, _ in prepares_run if code == 0) >= 1


def test_clean_waits_for_a_run_measuring_from_the_derived_bundle(bundle_copy, tmp_path):
    bundle = bundle_copy(TINY_PIPELINE)
    compiled = bundle / "_compiled"
    perf = _winml(
        "perf",
        bundle,
        "--ep",
        "cpu",
        "--invocations",
        "1",
        "--target-ci",
        "0.001%",
        "--max-time",
        "120",
        "--prompt-tokens",
        "16",
        "--max-new-tokens",
        "8",
        "--no-store",
        "-q",
        "-o",
        tmp_path / "run.json",
    )
    try:
        deadline = time.monotonic() + 120
        while not (compiled.is_dir() and any(not p.name.startswith(".") for p in compiled.iterdir())):
            assert perf.poll() is None, perf.communicate()[1]
            assert time.monotonic() < deadline, "the forced route was never derived"
            time.sleep(0.1)
        clean = _winml("bundle", "clean", bundle)
        first = ""
        while not first.startswith(("waiting:", "removed", "nothing")):
            first = clean.stderr.readline()
            assert first, clean.communicate()
        assert first.startswith("waiting:") and str(compiled) in first, first
        assert clean.poll() is None and perf.poll() is None  # clean waits; the run goes on measuring
        assert any(not p.name.startswith(".") for p in compiled.iterdir())
    finally:
        perf.send_signal(2)  # SIGINT: the run ends, keeping what it finished
        _, perf_err = perf.communicate(timeout=120)
    _, clean_err = clean.communicate(timeout=120)
    assert perf.returncode == 130, perf_err
    assert "unexpected" not in perf_err and "Traceback" not in perf_err, perf_err
    assert clean.returncode == 0 and f"removed {compiled}" in clean_err, clean_err
    assert not compiled.exists()
