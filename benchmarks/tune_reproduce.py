"""Does a bundle `winml tune --emit DIR` wrote reproduce the winner's ratio to config?

Runs `winml perf` of the emitted bundle and of its source bundle's config route alternately (the order
flips each pair), each run one fresh process (--invocations 1), and pairs run i of one with run i of the
other: the ratio of the objective over those pairs with its 95 % interval (stats.paired_ratio), set
beside the ratio and interval the tune reported (DIR/tune.json). Consistent when the two intervals
overlap. Usage:

    python benchmarks/tune_reproduce.py DIR --pairs 5 -- --prompt-tokens 16 --max-new-tokens 32 --iterations 3
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from winml_perf.compare.cells import cell_of_record
from winml_perf.model.metrics import bigger_is_better
from winml_perf.stats import paired_ratio
from winml_perf.tune.goal import OBJECTIVES


def _samples(bundle: Path, metric: str, flags: list[str]) -> list[float]:
    cmd = [sys.executable, "-m", "winml_perf", "perf", str(bundle), "--invocations", "1", "--no-store"]
    proc = subprocess.run([*cmd, "--format", "json", "-q", *flags], capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"winml perf {bundle} failed (exit {proc.returncode}): {proc.stderr[-2000:]}")
    [cell] = json.loads(proc.stdout)["cells"]
    return [s.values[metric] for s in cell_of_record(cell).samples if metric in s.values]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("emitted", type=Path)
    ap.add_argument("--pairs", type=int, default=5)
    argv = sys.argv[1:]
    cut = argv.index("--") if "--" in argv else len(argv)
    args = ap.parse_args(argv[:cut])
    args.perf_flags = argv[cut + 1 :]  # after --: flags for every `winml perf` run
    about = json.loads((args.emitted / "tune.json").read_text(encoding="utf-8"))
    metric = OBJECTIVES[about["objective"]]
    source = Path(about["source_bundle"])
    emitted_runs, source_runs = [], []
    for i in range(args.pairs):
        order = [(args.emitted, emitted_runs), (source, source_runs)]
        for bundle, runs in order if i % 2 == 0 else order[::-1]:
            runs.append(_samples(bundle, metric, args.perf_flags))
    r = paired_ratio(emitted_runs, source_runs, higher_is_better=bigger_is_better(metric))
    oriented = (r.estimate, r.low, r.high) if bigger_is_better(metric) else (1 / r.estimate, 1 / r.high, 1 / r.low)
    est, lo, hi = about["speedup_vs_config"]
    lo, hi = (est, est) if lo is None or hi is None else (lo, hi)
    overlap = oriented[1] <= hi and lo <= oriented[2]
    print(
        f"tune:       {about['route']} {est:.3f}x config [{lo:.3f}, {hi:.3f}] over {about['pairs']} paired invocations"
    )
    print(
        f"reproduced: emitted bundle {oriented[0]:.3f}x source config [{oriented[1]:.3f}, {oriented[2]:.3f}]"
        f" over {r.pairs} paired fresh-process runs ({metric}, {r.method})"
    )
    print(f"consistent: {'yes' if overlap else 'no'} (the intervals {'overlap' if overlap else 'do not overlap'})")


if __name__ == "__main__":
    main()
