"""Human-readable rendering of a run record (a RunRecord.to_dict()): tables, routes, warnings,
and the run's rows in every ``--format`` (formats.py)."""

from __future__ import annotations

from collections import defaultdict

from tabulate import tabulate

from winml_perf.formats import human, json_text, table_text
from winml_perf.model import metrics as M
from winml_perf.model.route import Route, StagePlacement
from winml_perf.model.runtime import runtime_named


def _f(value, digits: int = 1) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _ci(s: dict):
    return s.get("primary_ci95_half_width_pct")


EMULATED_MARK = " (emulated)"


def _route_label(c: dict) -> str:
    """The route's label, marked when an EP of it ran on an emulator (never to be read as NPU speed)."""
    return c["route"]["label"] + (EMULATED_MARK if c["route"].get("emulated") else "")


def _token_row(c: dict) -> list:
    s = c["summary"]
    rss = (c.get("memory") or {}).get(M.PEAK_RSS.name)
    return [_route_label(c), c["shape"]["prompt_tokens"], c["shape"]["max_new_tokens"], s.get(M.TTFT.name),
            s.get(M.PROMPT_THROUGHPUT.name), s.get(M.DECODE_THROUGHPUT.name),
            *(s.get(f"{M.ITL.name}_{q}") for q in ("p50", "p90", "p99")), s.get(M.E2E.name),
            s.get("iterations"), _ci(s), None if rss is None else rss / 2**20]


def _latency_row(c: dict) -> list:
    s, m = c["summary"], c.get("metrics", {}).get(M.LATENCY.name, {})
    return [_route_label(c), s.get(M.LATENCY.name), m.get("p90"), m.get("p99"), s.get(M.INFERENCE_RATE.name),
            s.get("iterations"), _ci(s), (c.get("load") or {}).get(M.MODEL_LOAD.name)]


TOKEN_HEAD = ["route", "prompt", "new", M.TTFT.label, M.PROMPT_THROUGHPUT.label, M.DECODE_THROUGHPUT.label, "ITL p50 ms", "p90",
              "p99", M.E2E.label, "iters", "CI95 %", "peak RSS MiB"]
LATENCY_HEAD = ["route", "median ms", "p90 ms", "p99 ms", M.INFERENCE_RATE.label, "iters", "CI95 %", M.MODEL_LOAD.label]
_CI_COLUMN = "CI95 %"


def run_rows(doc: dict) -> tuple[list[str], list[list]]:
    """Headers and raw rows (numbers unrounded) of the run's ok cells."""
    ok = [c for c in doc["cells"] if c["status"] == "ok"]
    token = any(runtime_named(c["runtime"]).token_based for c in doc["cells"])
    return (TOKEN_HEAD if token else LATENCY_HEAD), [(_token_row if token else _latency_row)(c) for c in ok]


def _shown(headers: list[str], row: list) -> list[str]:
    """A raw row for a person: rounded numbers, '-' where nothing was measured, the CI as ±x%."""
    out = []
    for head, v in zip(headers, row):
        if head == _CI_COLUMN:
            out.append("-" if v is None else f"±{v:.1f}%")
        else:
            out.append("-" if v is None else human(v))
    return out


def run_text(doc: dict, fmt: str) -> str:
    """The run in a --format other than table: markdown/csv rows of the cells, json the record,
    jsonl one cell record per line."""
    if fmt == "json":
        return json_text(doc, "json")
    if fmt == "jsonl":
        return json_text(doc["cells"], "jsonl")
    headers, rows = run_rows(doc)
    if fmt == "markdown":
        return table_text(headers, [_shown(headers, r) for r in rows], "markdown")
    return table_text(headers, rows, "csv")


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
        if r.emulated:
            lines.append(f"  emulated: {', '.join(r.emulated)} ran on an emulator on the CPU here; these timings are not NPU speed")
        for s in r.stages:
            lines.append(f"  {s.stage}: {s.ep_before or 'config'} -> {s.ep_after}{_placement_text(s.placement)}")
        if r.derived_path:
            lines.append(f"  derived: {r.derived_path}")
    return lines


def warning_lines(cells: list[dict]) -> list[str]:
    """Warnings grouped by kind: one heading per kind with its remedy once, then the cells it
    concerns, each with its own detail; failed cells after them."""
    by_kind: dict[tuple[str, str], list[tuple[str, dict]]] = defaultdict(list)
    for c in cells:
        for w in c.get("warnings") or []:
            by_kind[(w["code"], w["remedy"])].append((c["cell_key"], w))
    lines = []
    for (code, remedy), hits in by_kind.items():
        keys = {k for k, _ in hits}
        lines.append(f"warning {code} ({len(keys)} cell{'s' if len(keys) != 1 else ''}): {remedy}")
        by_message: dict[str, list[str]] = defaultdict(list)
        for key, w in hits:  # one line per distinct detail, naming every cell it concerns
            if key not in by_message[w["message"]]:
                by_message[w["message"]].append(key)
        lines += [f"  {', '.join(ks)}: {message}" for message, ks in by_message.items()]
    for c in cells:
        if c["status"] != "ok":
            f = c.get("failure") or {}
            lines.append(f"FAILED [{c['cell_key']}] {f.get('kind')}: {f.get('message')}")
    return lines


def render_run(doc: dict, warnings_only: bool = False) -> str:
    cells = doc["cells"]
    warnings = warning_lines(cells)
    if warnings_only:
        return "".join(line + "\n" for line in warnings)
    headers, rows = run_rows(doc)
    parts = [f"{cells[0]['bundle'] if cells else ''}  runtime={cells[0]['runtime'] if cells else ''}  run={doc['run_id'][:12]}"]
    parts += _route_lines(cells)
    if rows:
        parts.append(tabulate([_shown(headers, r) for r in rows], headers=headers, tablefmt="github", disable_numparse=True))
    parts += warnings
    return "\n".join(parts)
