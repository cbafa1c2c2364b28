"""Human-readable rendering of a run record (a RunRecord.to_dict()): tables, routes, warnings."""

from __future__ import annotations

from tabulate import tabulate

from winml_perf.model.route import Route, StagePlacement
from winml_perf.model import metrics as M
from winml_perf.model.runtime import runtime_named


def _f(value, digits: int = 1) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _token_row(c: dict) -> list:
    s = c["summary"]
    ci = s.get("primary_ci95_half_width_pct")
    itl = [_f(s.get(f"{M.ITL.name}_{q}"), 2) for q in ("p50", "p90", "p99")]
    return [c["route"]["label"], c["shape"]["prompt_tokens"], c["shape"]["max_new_tokens"], _f(s.get(M.TTFT.name), 2),
            _f(s.get(M.PROMPT_THROUGHPUT.name)), _f(s.get(M.DECODE_THROUGHPUT.name)), *itl, _f(s.get(M.E2E.name)),
            s.get("iterations"), "-" if ci is None else f"±{ci:.1f}%",
            _f((c.get("memory") or {}).get(M.PEAK_RSS.name, 0) / 2**20, 0)]


def _latency_row(c: dict) -> list:
    s, m = c["summary"], c.get("metrics", {}).get(M.LATENCY.name, {})
    ci = s.get("primary_ci95_half_width_pct")
    return [c["route"]["label"], _f(s.get(M.LATENCY.name), 3), _f(m.get("p90"), 3), _f(m.get("p99"), 3),
            _f(s.get(M.INFERENCE_RATE.name)), s.get("iterations"), "-" if ci is None else f"±{ci:.1f}%",
            _f((c.get("load") or {}).get(M.MODEL_LOAD.name), 1)]


TOKEN_HEAD = ["route", "prompt", "new", M.TTFT.label, M.PROMPT_THROUGHPUT.label, M.DECODE_THROUGHPUT.label, "ITL p50 ms", "p90",
              "p99", M.E2E.label, "iters", "CI95", "peak RSS MiB"]
LATENCY_HEAD = ["route", "median ms", "p90 ms", "p99 ms", M.INFERENCE_RATE.label, "iters", "CI95", M.MODEL_LOAD.label]


def _placement_text(placement: StagePlacement | None) -> str:
    if placement is None:
        return ""
    from winml_perf.bundle.placement import nodes_text, ops_text

    ops = placement.cpu_fallback_ops
    return f"  [{nodes_text(placement)}" + (f"; on CPU: {ops_text(ops)}" if ops else "") + "]"


def _route_lines(cells: list[dict]) -> list[str]:
    lines, seen = [], set()
    for c in cells:
        r = Route.from_dict(c["route"])  # the record's JSON edge
        if r.label in seen:
            continue
        seen.add(r.label)
        load = c.get("load") or {}
        cache = f", cache {r.cache} ({r.cache_reason})" if r.cache else ""
        lines.append(f"route {r.label}: effective {r.effective or r.label}{cache}; prepare {_f(load.get('prepare_ms'), 1)} ms, "
                     f"compile {_f(load.get('compile_ms'), 1)} ms, load {_f(load.get('model_load_ms'), 1)} ms")
        for s in r.stages:
            lines.append(f"  {s.stage}: {s.ep_before or 'config'} -> {s.ep_after}{_placement_text(s.placement)}")
        if r.derived_path:
            lines.append(f"  derived: {r.derived_path}")
    return lines


def _warning_lines(cells: list[dict]) -> list[str]:
    lines = []
    for c in cells:
        for w in c.get("warnings") or []:
            lines.append(f"warning [{c['cell_key']}] {w['message']}; {w['remedy']}")
        if c["status"] != "ok":
            f = c.get("failure") or {}
            lines.append(f"FAILED [{c['cell_key']}] {f.get('kind')}: {f.get('message')}")
    return lines


def render_run(doc: dict, warnings_only: bool = False) -> str:
    cells = doc["cells"]
    warnings = _warning_lines(cells)
    if warnings_only:
        return "".join(line + "\n" for line in warnings)
    ok = [c for c in cells if c["status"] == "ok"]
    token = any(runtime_named(c["runtime"]).token_based for c in cells)
    rows = [(_token_row if token else _latency_row)(c) for c in ok]
    parts = [f"{cells[0]['bundle'] if cells else ''}  runtime={cells[0]['runtime'] if cells else ''}  run={doc['run_id'][:12]}"]
    parts += _route_lines(cells)
    if rows:
        parts.append(tabulate(rows, headers=TOKEN_HEAD if token else LATENCY_HEAD, tablefmt="github"))
    parts += warnings
    return "\n".join(parts)
