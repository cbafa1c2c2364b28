"""The text of a ``winml serve`` run: one row per route and load point (latency percentiles,
throughput, goodput, occupancy, queueing, saturation), then the verdicts (compare/serving.py)."""

from __future__ import annotations

from collections.abc import Sequence

from winml_perf.compare.serving import Comparison
from winml_perf.model.record import CellRecord
from winml_perf.model.route import shown_label
from winml_perf.model.serving import ServingSection
from winml_perf.support.human_numbers import human
from winml_perf.support.text_table import fill, fitted

COLUMNS = (
    ("route", None),
    ("load", None),
    ("served by", None),
    ("TTFT p50/p90/p99 ms", ("ttft_ms_p50", "ttft_ms_p90", "ttft_ms_p99")),
    ("TPOT p50/p99 ms", ("tpot_ms_p50", "tpot_ms_p99")),
    ("ITL p50/p90/p99 ms", ("itl_ms_p50", "itl_ms_p90", "itl_ms_p99")),
    ("e2e p50 ms", ("e2e_ms_p50",)),
    ("queue p50/p99 ms", ("queue_ms_p50", "queue_ms_p99")),
    ("tok/s", ("output_tokens_per_s",)),
    ("req/s", ("requests_per_s",)),
    ("goodput req/s", ("goodput_requests_per_s",)),
    ("batch mean", ("batch_occupancy_mean",)),
    ("peak RSS MiB", None),
    ("saturation", None),
)

#: The latency percentiles ``results show`` gives of a stored serving cell.
LATENCY_COLUMNS = ("TTFT p50/p90/p99 ms", "TPOT p50/p99 ms", "ITL p50/p90/p99 ms", "e2e p50 ms")
#: The columns that leave, in this order, when the table is wider than the terminal: the route, its
#: load, TTFT, TPOT, throughput and goodput stay longest (the figures the verdicts are about).
DROP_ORDER = (
    "ITL p50/p90/p99 ms",
    "peak RSS MiB",
    "batch mean",
    "queue p50/p99 ms",
    "e2e p50 ms",
    "served by",
    "req/s",
    "saturation",
    "TPOT p50/p99 ms",
    "tok/s",
)
#: Where a column that left is still to be had: serve prints no markdown or csv.
EVERY_SERVING_COLUMN = "--format json or -o FILE has every figure"


def _interval(cell: CellRecord, name: str) -> str:
    assert cell.serving is not None
    return figure_text(cell.serving, name)


def figure_text(section: ServingSection, name: str) -> str:
    """'5303 [4810, 5790]': a serving figure with its interval over invocations, '-' where absent."""
    f = section.figures.get(name) or {}
    est, low, high = f.get("estimate"), f.get("low"), f.get("high")
    if est is None:
        return "-"
    if low is None or high is None:
        return human(est)
    return f"{human(est)} [{human(low)}, {human(high)}]"


def _row(cell: CellRecord) -> list[str]:
    sec = cell.serving
    assert sec is not None
    out = []
    for title, names in COLUMNS:
        if title == "route":
            out.append(shown_label(cell.route))  # (emulated), (compiled): as every listing shows it
        elif title == "load":
            out.append(sec.load.label)
        elif title == "served by":
            out.append(sec.server)
        elif title == "peak RSS MiB":
            peak = cell.memory.peak_rss_bytes
            out.append("-" if not isinstance(peak, int) else f"{peak / 2**20:.0f}")
        elif title == "saturation":
            sat = sec.saturation
            out.append("saturated" if sat.get("saturated") else ("-" if sec.load.mode != "open" else "keeps up"))
        elif names and len(names) == 1 and title in ("tok/s", "req/s", "goodput req/s"):
            out.append(_interval(cell, names[0]))
        else:
            assert names is not None
            out.append("/".join(human(sec.figure(n)) if sec.figure(n) is not None else "-" for n in names))
    return out


def serving_summary(section: ServingSection) -> list[str]:
    """A stored serving cell in a few lines (``results show``): its load point, who served it, the
    throughput and goodput with their intervals, and the latency percentiles."""
    pct = " / ".join(
        f"{title} {'/'.join(human(v) if (v := section.figure(n)) is not None else '-' for n in names)}"
        for title, names in COLUMNS
        if title in LATENCY_COLUMNS and names is not None
    )
    return [
        f"serving: {section.load.label}, served by {section.server}; SLO {section.slo.text}",
        f"  output tok/s {figure_text(section, 'output_tokens_per_s')}  req/s {figure_text(section, 'requests_per_s')}"
        f"  goodput req/s {figure_text(section, 'goodput_requests_per_s')}",
        f"  {pct}",
    ]


def serving_table(cells: Sequence[CellRecord], width: int | None = None) -> str:
    """One row per route and load point, fitted to ``width`` (the terminal's by default) by the one
    table writer: columns leave in DROP_ORDER and a line names them."""
    heads = [t for t, _ in COLUMNS]
    rows = [_row(c) for c in cells if c.serving is not None]
    return fitted(heads, rows, width, drop=DROP_ORDER, where=EVERY_SERVING_COLUMN).rstrip("\n")


def serving_text(
    cells: Sequence[CellRecord],
    gains: Sequence[Comparison],
    verdicts: Sequence[Comparison],
    width: int | None = None,
) -> str:
    """The whole closing text: the table, what the intervals cover, notes, gains, verdicts,
    saturation; within ``width`` (the terminal's by default), prose broken between words."""
    out = [serving_table(cells, width)]
    serving = [c.serving for c in cells if c.serving is not None]
    if serving:
        k = len(serving[0].invocations)
        slo = serving[0].slo.text
        out.append(
            f"\nfigures: over {k} invocation(s) (fresh processes): the mean of the invocations' values with a Student t"
            " 95% interval below 6 invocations, their median with an order-statistic interval from 6 [low, high]; "
            f"percentiles pool each invocation's requests; goodput: requests/s meeting {slo}"
        )
    notes = {(c.route.label, c.serving.server_note) for c in cells if c.serving is not None and c.serving.server_note}
    for label, note in sorted(notes):
        out.append(f"note: {label}: {note}")
    for c in cells:
        if c.serving is not None and c.serving.load.mode == "open":
            out.append(f"{c.route.label} at {c.serving.load.label}: {c.serving.saturation.get('verdict')}")
    spec = {
        (c.route.label, str(c.serving.speculative.get("note")))
        for c in cells
        if c.serving is not None and c.serving.server == "engine"
    }
    for label, note in sorted(spec):
        if note != "None":
            out.append(f"speculative decoding, {label}: {note}")
    if gains:
        out.append("\nbatching gain (output tokens/s over sequential batch-1 generators, same invocations):")
        out += [f"  {g.sentence}" for g in gains]
    if verdicts:
        out.append("\nroutes per load point:")
        out += [f"  {v.sentence}" for v in verdicts]
    return fill("\n".join(out), width) + "\n"
