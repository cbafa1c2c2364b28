"""Apache Otava's change points for the series of a CSV; run with the interpreter of a virtualenv
that has ``apache-otava`` installed (it pins its own numpy), not the project's:

    OTAVA_PYTHON benchmarks/otava_changepoints.py SERIES.csv OUT.json [--window 50] [--pvalue 0.001]

SERIES.csv has the columns series,index,value (rows of a series in index order). OUT.json maps each
series to the indices Otava reports (the first run of each new segment), from
``otava.analysis.compute_change_points`` — the split/merge detector its ``analyze`` command runs —
with its defaults (window 50, max p-value 0.001, no minimum magnitude) unless told otherwise.
"""

from __future__ import annotations

import argparse
import csv
import json
from collections import defaultdict

from otava.analysis import compute_change_points


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("csv")
    parser.add_argument("out")
    parser.add_argument("--window", type=int, default=50)
    parser.add_argument("--pvalue", type=float, default=0.001)
    args = parser.parse_args()
    series: dict[str, list[float]] = defaultdict(list)
    with open(args.csv, newline="") as f:
        for row in csv.DictReader(f):
            series[row["series"]].append(float(row["value"]))
    found = {}
    for name, values in series.items():
        points, _ = compute_change_points(values, window_len=args.window, max_pvalue=args.pvalue)
        found[name] = sorted(int(p.index) for p in points)
    with open(args.out, "w") as f:
        json.dump(found, f)


if __name__ == "__main__":
    main()
