"""Time outside measuring against the number of iterations: is the cell driver linear in the samples?

    python benchmarks/bench_outside_measure.py                         # N = 100, 1000, 10000, 30000
    python benchmarks/bench_outside_measure.py --n 100 1000 --bundle bundles/tiny-qwen2
    PYTHONPATH=/tmp/old/src python benchmarks/bench_outside_measure.py --n 1000   # another checkout's code
    python benchmarks/bench_outside_measure.py --n 100 3000 --trees /tmp/old . --repeat 3   # interleaved

For each N, one fresh process: `winml perf BUNDLE --invocations 1 --iterations N --format json
--no-store -q` (issue 37's command, JSON out, no store). "outside" is the process's wall time (this
script's clock around the subprocess: interpreter start, imports, bundle prepare, load, warmup, the
driver's work between iterations, summaries, output) minus the cell's ``measure_s`` (the wall time of
its measured batches, as the record gives it); "cell outside" is the cell's own ``wall_s`` minus
``measure_s`` (load, warmup, the driver between iterations, the result). Ratios are of measure_s.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

from perf_cli import run_perf_json


def measure_once(bundle: str, n: int) -> dict[str, float]:
    doc, wall = run_perf_json(bundle, ["--invocations", "1", "--iterations", str(n)])
    (cell,) = doc["cells"]
    measure, cell_wall = float(cell["measure_s"]), float(cell["wall_s"])
    return {
        "n": n,
        "process_wall_s": wall,
        "measure_s": measure,
        "outside_s": wall - measure,
        "outside_pct": (wall - measure) / measure * 100.0,
        "cell_outside_s": cell_wall - measure,
        "cell_outside_pct": (cell_wall - measure) / measure * 100.0,
    }


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _row_text(tree: str, r: dict[str, float]) -> str:
    return (
        f"{tree:>12.12} {r['n']:>7} {r['process_wall_s']:>8.2f} {r['measure_s']:>10.2f} {r['outside_s']:>10.2f} "
        f"{r['outside_pct']:>9.1f}% {r['cell_outside_s']:>10.2f} ({r['cell_outside_pct']:.1f} %)"
    )


def medians(rows: list[dict], trees: list[str]) -> list[dict]:
    """Per tree and N the median of each figure, and the excess over the smallest N's outside time."""
    out = []
    for tree in trees:
        mine = [r for r in rows if r["tree"] == tree]
        ns = sorted({r["n"] for r in mine})
        med = {n: {k: statistics.median(r[k] for r in mine if r["n"] == n) for k in mine[0] if k != "tree"} for n in ns}
        for n in ns:
            m = dict(med[n], n=n, tree=tree, repeats=sum(r["n"] == n for r in mine))
            m["excess_pct"] = (m["outside_s"] - med[ns[0]]["outside_s"]) / m["measure_s"] * 100.0
            out.append(m)
    return out


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bundle", default="bundles/tiny-qwen2")
    ap.add_argument("--n", type=int, nargs="+", default=[100, 1000, 10000, 30000])
    ap.add_argument("--trees", nargs="+", help="checkouts to compare, interleaved (their src on PYTHONPATH)")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--json", help="write the rows here too")
    args = ap.parse_args(argv)
    trees = args.trees or [""]
    rows = []
    print(f"load average {_load()}")
    print(
        f"{'tree':>12} {'N':>7} {'wall s':>8} {'measure s':>10} {'outside s':>10} {'outside %':>10} {'cell outside s':>15}"
    )
    for _ in range(args.repeat):
        for n in args.n:
            for tree in trees:
                if tree:
                    os.environ["PYTHONPATH"] = os.path.abspath(os.path.join(tree, "src"))
                r = dict(measure_once(args.bundle, n), tree=tree)
                rows.append(r)
                print(_row_text(tree, r), flush=True)
    print(f"load average {_load()}")
    if args.repeat > 1 or len(trees) > 1:
        print(f"medians; excess = (outside - outside at N={min(args.n)}) / measure")
        rows = medians(rows, trees)
        for m in rows:
            print(f"{_row_text(m['tree'], m)}  x{m['repeats']}  excess {m['excess_pct']:.1f} %")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
