"""The `compare runs` table for a terminal: it fits the terminal's width as the perf table does
(publish/run_table.py), and never wraps inside a cell.

When the whole table is wider than the terminal, in this order until it fits:

1. the headers go on two lines;
2. the parts of the series label that every row shares (bundle, route, shape, testbed) leave the
   cells and are named once above the table;
3. columns leave, one at a time: ``p``, ``inv cand``, ``inv base``, ``Δ 95% CI``, ``candidate``,
   ``baseline``. ``series``, ``metric``, ``Δ %``, ``verdict`` and ``gate`` always stay.

A line under the table names what left; ``--format markdown`` or ``csv`` has every column.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from winml_perf.compare.runs import RunChange, RunsReport
from winml_perf.compare.text import metric_word, shape_label
from winml_perf.support.human_numbers import fixed, human
from winml_perf.support.text_table import fill, fit, left_out, render, text_width

HEAD = ["series", "metric", "inv base", "inv cand", "baseline", "candidate", "Δ %", "Δ 95% CI", "p", "verdict", "gate"]
#: Columns in the order they leave a narrow terminal (the others always stay).
DROP_ORDER = ("p", "inv cand", "inv base", "Δ 95% CI", "candidate", "baseline")
#: What a series label is made of, in its order ('tiny-qwen2 config p16 n8 @tb-linux').
LABEL_PARTS = ("bundle", "route", "shape", "testbed")
#: Columns of numbers: right-aligned.
NUMERIC = frozenset({"inv base", "inv cand", "baseline", "candidate", "Δ %", "p"})


def _p(p: float | None) -> str:
    """A p-value for a person: three decimals, '<0.001' below them."""
    if p is None or not math.isfinite(p):
        return ""
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def gate_cell(row: RunChange) -> str:
    """The table's gate column: REGRESSION, else the gate's verdict (empty without a gate)."""
    return "REGRESSION" if row.regression else row.gate or ""


def label_parts(key: Sequence[Any], bundle: str | None = None) -> dict[str, str]:
    """A group key (compare/cells.py KEY_FIELDS) as the parts of its label; ``bundle``: the bundle's
    label in the report (with its id where two bundles share a name)."""
    testbed, name, route, p, n = key[:5]
    return {"bundle": bundle or str(name), "route": str(route), "shape": shape_label(p, n), "testbed": f"@{testbed}"}


def human_rows(report: RunsReport) -> list[list[str]]:
    """Every column of every row as a person reads it (the table and markdown)."""
    return [
        [
            " ".join(label_parts(r.key, report.bundles.get(r.key)).values()),
            metric_word(r.metric),
            str(r.n_baseline),
            str(r.n_candidate),
            human(r.baseline_median),
            human(r.candidate_median),
            fixed(r.delta_pct, 2, signed=True),
            r.interval_text().strip(" []"),
            _p(r.p_value),
            r.verdict,
            gate_cell(r),
        ]
        for r in report.rows
    ]


def _shared_parts(report: RunsReport) -> list[str]:
    """The label parts every row has alike (none when there is a single part left to show)."""
    parts = [label_parts(r.key, report.bundles.get(r.key)) for r in report.rows]
    return [k for k in LABEL_PARTS if parts and len({p[k] for p in parts}) == 1]


def fitted_runs_table(report: RunsReport, width: int) -> str:
    """The table within ``width`` columns (the module docstring says what gives way first), with
    the series parts every row shares named above it and what left named below it: the one table
    writer's rule (support/text_table.py), with the shared series parts moved out before columns leave."""
    heads, rows = list(HEAD), human_rows(report)
    text = render(heads, rows, wrap=False, numeric=NUMERIC)
    if text_width(text) <= width:
        return text + "\n"
    above: list[str] = []
    shared = _shared_parts(report) if text_width(render(heads, rows, wrap=True, numeric=NUMERIC)) > width else []
    if shared:
        keep = [k for k in LABEL_PARTS if k not in shared]
        for row, r in zip(rows, report.rows):
            parts = label_parts(r.key, report.bundles.get(r.key))
            row[0] = " ".join(parts[k] for k in keep) or parts["bundle"]
        if not keep:  # one series: its bundle stays in the cells
            shared.remove("bundle")
        above.append(
            f"every series: {' '.join(label_parts(report.rows[0].key, report.bundles.get(report.rows[0].key))[k] for k in shared)}"
        )
    text, dropped = fit(heads, rows, width, DROP_ORDER, NUMERIC)
    prose = [fill(line, width) for line in above]
    below = left_out(dropped, width)
    return "\n".join([*prose, text, *([below] if below else [])]) + "\n"
