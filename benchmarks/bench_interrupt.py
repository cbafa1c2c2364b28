"""How long `winml perf` takes to exit after Ctrl-C (issue 28). Run on demand, not in CI.

    python benchmarks/bench_interrupt.py [--tries 3] [--after 12]

SIGINT goes to the whole process group, as a terminal's Ctrl-C does, --after seconds into a run of
bundles/tiny-qwen2 (5 invocations of 2000 iterations: the first invocation is measuring then).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time

COMMAND = ["perf", "bundles/tiny-qwen2", "--invocations", "5", "--iterations", "2000", "--no-store"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tries", type=int, default=3)
    ap.add_argument("--after", type=float, default=12.0, help="seconds into the run to press Ctrl-C")
    a = ap.parse_args()
    for _ in range(a.tries):
        p = subprocess.Popen(
            [sys.executable, "-m", "winml_perf", *COMMAND],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        time.sleep(a.after)
        start = time.perf_counter()
        os.killpg(p.pid, signal.SIGINT)
        code = p.wait()
        print(f"exit {code} after {time.perf_counter() - start:.2f} s", flush=True)


if __name__ == "__main__":
    main()
