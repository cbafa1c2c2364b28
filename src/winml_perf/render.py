"""Human-readable tables of a benchmark result (stdout for tables; JSON is printed as is)."""

from __future__ import annotations

from tabulate import tabulate


def render_table(result: dict) -> str:
    rows = []
    for c in result["cells"]:
        rows.append([
            c["prompt_tokens"], c["max_new_tokens"], f"{c['ttft_ms']['median']:.2f}",
            f"{c['prompt_tokens_per_s']['median']:.1f}", f"{c['decode_tokens_per_s']['median']:.1f}",
            f"{c['token_latency_ms']['p50']:.2f}", f"{c['token_latency_ms']['p90']:.2f}", f"{c['token_latency_ms']['p99']:.2f}",
            f"{c['e2e_ms']['median']:.1f}",
        ])
    head = ["prompt", "new", "TTFT ms", "prompt tok/s", "decode tok/s", "tok p50 ms", "p90", "p99", "total ms"]
    title = f"{result['bundle']}  runtime={result['runtime']}  route={result['route']}  load={result['model_load_ms']:.0f} ms"
    return title + "\n" + tabulate(rows, headers=head, tablefmt="github")
