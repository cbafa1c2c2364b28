"""The closing summary of a multi-route `winml perf`: each route against the config route, per
metric, with the same ratio as `winml compare routes` (compare/routes.py): over paired invocations
when the routes ran several, else the paired-rounds bootstrap.

The run is compared in memory (compare/cells.py reads its cells as a store would keep them),
whether or not it is stored."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from winml_perf.compare.cells import cells_of_run
from winml_perf.compare.routes import INVOCATIONS, RoutesReport, compare_routes
from winml_perf.model.equivalence_view import view_of
from winml_perf.model.metrics import sort_key
from winml_perf.model.route import shown_label
from winml_perf.stats import significance as sig

BASELINE = "config"


def summarize_routes(doc: Mapping[str, Any], baseline_route: str = BASELINE) -> RoutesReport | None:
    """Routes of the run record ``doc`` against ``baseline_route``; None when the run has no ok
    cell of it, or no ok cell of another route."""
    ok_routes = {c["route"]["label"] for c in doc.get("cells") or () if c.get("status") == "ok"}
    if baseline_route not in ok_routes or len(ok_routes) < 2:
        return None
    report = compare_routes(cells_of_run(doc), doc["run_id"], baseline_route=baseline_route)
    rows = sorted(report.rows, key=lambda r: (sort_key(r.metric), r.prompt_tokens or 0, r.max_new_tokens or 0, r.route))
    return RoutesReport(report.run_id, report.baseline_route, tuple(rows), report.notes)


def route_verdicts(doc: Mapping[str, Any]) -> dict[str, str]:
    """{route label: its equivalence verdict, with the figures when not equivalent} from the run's
    cells (either shape of route.equivalence: logits of a bundle, outputs of a plain ONNX model)."""
    out: dict[str, str] = {}
    for c in doc.get("cells") or ():
        e = (c.get("route") or {}).get("equivalence")
        label = shown_label(c["route"])  # as the comparison's rows name it: (compiled), (emulated)
        if not e or label in out:
            continue
        v = view_of(e)
        text = v.verdict
        if v.not_equivalent:
            figures = ([f"top-1 {v.top1_agreement:.0%}"] if v.top1_agreement is not None else []) + [
                p for p in v.figures_text().split(", ") if p and not p.startswith(("KL ", "top-1 "))
            ]
            text = "NOT equivalent" + (f": {', '.join(figures)}" if figures else "")
        if v.reference != BASELINE:  # judged against another bundle than the speed's baseline
            text += f" (against {v.reference})"
        out[label] = text
    return out


def summary_lines(report: RoutesReport, verdicts: Mapping[str, str] | None = None) -> list[str]:
    """'summary: routes against config ...' then, per metric, one sentence per route and shape:
    with its interval and verdict where the rounds support one, else the point ratio alone and
    one closing line on how many rounds an interval needs."""
    paired = bool(report.rows) and all(r.pairing == INVOCATIONS for r in report.rows)
    how = "over paired invocations" if paired else "bootstrap over paired rounds"
    lines = [f"summary: routes against {report.baseline_route} (95% CI, {how})"]
    metric, short = None, False
    for row in report.rows:
        if row.metric != metric:
            metric = row.metric
            lines.append(f"  {metric}:")
        short = short or not row.enough
        verdict = (verdicts or {}).get(row.route)
        sentence = row.speed_sentence(marked=False) if row.enough else row.point_sentence(equivalence=False)
        lines.append(f"    {sentence}, {verdict}" if verdict else f"    {sentence}")
        note = row.pooled_note()
        if note:
            lines.append(f"      {note}")
    if short:
        lines.append(
            "  no interval or verdict below 2 paired invocations: raise --invocations"
            if paired
            else f"  no interval or verdict below {sig.MIN_PAIRED_ROUNDS} paired rounds: raise --iterations"
        )
    return lines
