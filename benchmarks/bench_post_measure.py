"""Time a `winml perf` run spends after its last iteration (statistics, warnings, record, store, table).

    python benchmarks/bench_post_measure.py bundles/tiny-qwen2 --iterations 1000
    python benchmarks/bench_post_measure.py bundles/tiny-qwen2 --iterations 1000 --invocations 1 --no-store

Runs the command as a subprocess with ``-o run.json``; the last cell's ``finished_utc`` is stamped
when its last iteration (and the child's end-of-cell reply) came back, before any statistics, so
``process exit - finished_utc`` is what the run spent after measuring. Also prints the measuring
time, the number of samples and the ratio (issue 12: at most ~2 % of measuring time, under 1 s for
1,000 iterations of the tiny bundle).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path


def utc_seconds(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def post_measure(bundle: str, extra: list[str], store: str | None) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run.json"
        cmd = [sys.executable, "-m", "winml_perf", "perf", bundle, "-q", "-o", str(out), *extra]
        cmd += ["--store", store] if store else ([] if "--no-store" in extra else ["--store", str(Path(tmp) / "r.db")])
        start = time.time()
        done = subprocess.run(cmd, capture_output=True, text=True)
        end = time.time()
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stderr}")
        doc = json.loads(out.read_text())
    cells = doc["cells"]
    last = max(utc_seconds(c["finished_utc"]) for c in cells)
    samples = sum(len(c["samples"]["iterations"]) for c in cells)
    steps = sum(len(s["decode_step_ms"]) for c in cells for s in c["samples"]["iterations"])
    measure = sum(c["measure_s"] for c in cells)
    return {
        "command": " ".join(["winml", "perf", bundle, *extra]),
        "wall_s": end - start,
        "after_last_iteration_s": end - last,
        "measure_s": measure,
        "iterations": samples,
        "decode_steps": steps,
        "after_over_measure_pct": (end - last) / measure * 100.0 if measure else None,
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("bundle")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--store", help="results store to write to (default: a temporary SQLite file)")
    ap.add_argument("--json", help="also write the figures here")
    args, extra = ap.parse_known_args(argv)
    runs = [post_measure(args.bundle, extra, args.store) for _ in range(args.repeats)]
    for r in runs:
        print(
            f"{r['command']}: {r['iterations']:,} iterations ({r['decode_steps']:,} decode steps) measured in "
            f"{r['measure_s']:.1f} s; after the last iteration {r['after_last_iteration_s']:.2f} s "
            f"({r['after_over_measure_pct']:.1f} % of measuring); wall {r['wall_s']:.1f} s"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(runs, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
