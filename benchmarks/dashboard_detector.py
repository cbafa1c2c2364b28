"""The change point search of a cold dashboard build, alone (issue 37): every series' search input read
from a store as `winml dashboard` reads it (its pages' columns, the newest CHANGE_WINDOW ok records of
the primary metric), then the detector timed over all of them in one process, CPU seconds. Run on
demand, with the source tree to time first on PYTHONPATH:

    WINML_PERF_STORE=STORE PYTHONPATH=SRC python benchmarks/dashboard_detector.py [--pages N] [--out FILE]

``--out`` writes the change points found (JSON) so that two trees' results can be compared.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections import defaultdict


def main() -> None:
    from winml_perf.model.metrics import bigger_is_better
    from winml_perf.publish.dashboard_page import CHANGE_WINDOW, _read_page, series_primary
    from winml_perf.results import change_point_cache as cpc
    from winml_perf.results.series import series_list
    from winml_perf.results.store import open_store
    from winml_perf.stats.series.changepoint import DEFAULT_MIN_SIZE

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pages", type=int, default=None, help="the first N pages only (default: all)")
    ap.add_argument("--out", default=None, help="write the change points found here (JSON)")
    a = ap.parse_args()
    store = open_store(os.environ["WINML_PERF_STORE"], create=False)
    pages: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for row in series_list(store):
        pages[(str(row["testbed_id"]), str(row["bundle"]))].append(row)
    searches = []
    for _, rows in sorted(pages.items())[: a.pages]:
        cols = _read_page(store, rows, {})
        for row in rows:
            metric = series_primary(row)
            options = {"higher_is_better": bigger_is_better(metric)}
            search, where = cpc.search_of(row["series_key"], metric, cols[row["series_key"]], CHANGE_WINDOW, options)
            if len(where) >= 2 * DEFAULT_MIN_SIZE:  # as the page: too few records, no search
                searches.append(search)
    start = time.process_time()
    found = [search.detect() for search in searches]
    cpu = time.process_time() - start
    points = sum(len(f) for f in found)
    print(f"{len(searches)} series searched, {points} change points, {cpu:.2f} CPU s")
    if a.out:
        with open(a.out, "w") as f:
            json.dump([[s.series_key, f] for s, f in zip(searches, found)], f)


if __name__ == "__main__":
    main()
