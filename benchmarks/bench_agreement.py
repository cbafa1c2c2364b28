"""Do two runs of the same `winml perf` command agree within their 95 % intervals? (issue 12)

    python benchmarks/bench_agreement.py bundles/tiny-qwen2 --pairs 10
    taskset -c 0 python benchmarks/bench_agreement.py bundles/tiny-qwen2 --pairs 10 -- --invocations 5
    python benchmarks/bench_agreement.py BUNDLE --pairs 10 --json out.json -- --route config --route ep=webgpu

Runs the command (everything after ``--`` is passed to `winml perf`; nothing: default flags)
2 x ``--pairs`` times, one after the other, and compares run 2j with run 2j+1 for every cell
(route x shape) and metric (decode tok/s, TTFT), twice: with the interval the record reports
(``uncertainty.metrics``: over invocations when there are several) and with the within-process
interval of the same samples (``uncertainty.within_process_metrics``: pooled iterations as if
from one process, what v1 reported).

Agreement: |a - b| <= sqrt(ha^2 + hb^2), a and b the two estimates and ha, hb the half-widths of
their intervals on the sides that face each other. If each interval is its estimate +- 1.96
standard errors, the difference of two independent estimates has the standard error
sqrt(se_a^2 + se_b^2), so its own 95 % half-width is sqrt(ha^2 + hb^2): two runs "agree" when
they differ by no more than their intervals predict at 95 %, and a method whose intervals hold
agrees in about 95 % of pairs. (Overlapping intervals, |a - b| <= ha + hb, is laxer: it passes
differences up to sqrt(2) times larger; it is printed too.)
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

from perf_cli import flags_after_dashes, run_perf_json

METRICS = ("decode_tokens_per_s", "ttft_ms")
KINDS = {"reported": "metrics", "within_process": "within_process_metrics"}


def run_once(bundle: str, extra: list[str]) -> dict:
    return run_perf_json(bundle, extra)[0]


def warnings_of(doc: dict) -> dict[str, list[dict]]:
    """Each cell's warnings (code and message: bimodal steps, drift between invocations, ...)."""
    return {
        cell["cell_key"]: [{"code": w["code"], "message": w["message"]} for w in cell.get("warnings") or ()]
        for cell in doc["cells"]
    }


def warning_counts(docs: list[dict]) -> dict[str, dict[str, int]]:
    """{cell: {warning code: runs that carried it}}."""
    out: dict[str, dict[str, int]] = {}
    for doc in docs:
        for cell, found in warnings_of(doc).items():
            for code in {w["code"] for w in found}:
                out.setdefault(cell, {}).setdefault(code, 0)
                out[cell][code] += 1
    return out


def intervals(doc: dict, kind: str) -> dict[tuple[str, str], dict]:
    out = {}
    for cell in doc["cells"]:
        for metric, iv in ((cell.get("uncertainty") or {}).get(KINDS[kind]) or {}).items():
            if metric in METRICS:
                out[(cell["cell_key"], metric)] = iv
    return out


def agree(a: dict, b: dict) -> dict:
    """The agreement test of the module doc on two interval dicts (estimate, low, high)."""
    if any(x.get(k) is None for x in (a, b) for k in ("estimate", "low", "high")):
        return {"comparable": False}
    lo_run, hi_run = (a, b) if a["estimate"] <= b["estimate"] else (b, a)
    ha = lo_run["high"] - lo_run["estimate"]
    hb = hi_run["estimate"] - hi_run["low"]
    diff = hi_run["estimate"] - lo_run["estimate"]
    return {
        "comparable": True,
        "difference": diff,
        "combined_half_width": math.hypot(ha, hb),
        "agree": diff <= math.hypot(ha, hb),
        "overlap": lo_run["high"] >= hi_run["low"],
        "a": a["estimate"],
        "b": b["estimate"],
        "relative_difference_pct": diff / abs(lo_run["estimate"]) * 100.0 if lo_run["estimate"] else None,
    }


def summarise(pairs: list[tuple[dict, dict]]) -> dict:
    table: dict = {}
    for kind in KINDS:
        for first, second in pairs:
            ia, ib = intervals(first, kind), intervals(second, kind)
            for key in sorted(set(ia) & set(ib)):
                verdict = agree(ia[key], ib[key])
                if verdict["comparable"]:
                    table.setdefault(kind, {}).setdefault(f"{key[0]} {key[1]}", []).append(verdict)
    out = {}
    for kind, rows in table.items():
        out[kind] = {}
        for name, verdicts in rows.items():
            n = len(verdicts)
            out[kind][name] = {
                "pairs": n,
                "agree": sum(v["agree"] for v in verdicts),
                "overlap": sum(v["overlap"] for v in verdicts),
                "median_relative_difference_pct": sorted(v["relative_difference_pct"] for v in verdicts)[n // 2],
                "verdicts": verdicts,
            }
    return out


def main(argv=None) -> int:
    mine, extra = flags_after_dashes(list(sys.argv[1:] if argv is None else argv))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("bundle")
    ap.add_argument("--pairs", type=int, default=10)
    ap.add_argument("--json", help="also write every run's intervals and the verdicts here")
    args = ap.parse_args(mine)
    start = time.perf_counter()
    docs = []
    for i in range(2 * args.pairs):
        docs.append(run_once(args.bundle, extra))
        print(f"run {i + 1}/{2 * args.pairs} ({time.perf_counter() - start:.0f} s)", file=sys.stderr)
    pairs = [(docs[2 * j], docs[2 * j + 1]) for j in range(args.pairs)]
    report = summarise(pairs)
    print(f"winml perf {args.bundle} {' '.join(extra)}  ({args.pairs} pairs, {time.perf_counter() - start:.0f} s)")
    for kind, rows in report.items():
        for name, r in rows.items():
            print(
                f"{kind:15s} {name:40s} agree {r['agree']}/{r['pairs']} ({r['agree'] / r['pairs']:.0%}), "
                f"overlap {r['overlap']}/{r['pairs']}, median |a-b| {r['median_relative_difference_pct']:.1f} %"
            )
    for cell, counts in warning_counts(docs).items():
        print(
            f"warnings        {cell:40s} "
            + ", ".join(f"{code} in {n}/{len(docs)} runs" for code, n in sorted(counts.items()))
        )
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "command": ["winml", "perf", args.bundle, *extra],
                    "report": report,
                    "runs": [
                        {k: intervals(d, k) and {f"{c} {m}": v for (c, m), v in intervals(d, k).items()} for k in KINDS}
                        | {"warnings": warnings_of(d)}
                        for d in docs
                    ],
                },
                indent=2,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
