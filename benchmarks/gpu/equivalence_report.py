"""Issue 24's H200 step: one run's route.equivalence figures as text, per route: the verdict, the
logit figures, the reference's bands (what a change of the reference itself produces), which
decoder layer parts first and each layer's relative error against its limit, and the precision
each side computes in.

Usage: python benchmarks/gpu/equivalence_report.py RUN.json
"""

from __future__ import annotations

import json
import sys


def report(doc: dict) -> str:
    lines = []
    for cell in doc.get("cells") or []:
        route = cell.get("route") or {}
        e = route.get("equivalence")
        if not e or any(line.startswith(f"== {route['label']} ") for line in lines):
            continue
        f = e["figures"]
        lines.append(f"== {route['label']} against {e['reference']}: {e['verdict']}")
        lines.append(
            f"   logits: KL mean {f['kl_mean']:.3g} max {f['kl_max']:.3g}, top-1 {f['top1_agreement']:.0%}, "
            f"top-5 {f['top5_overlap']:.0%}, max |dlogit|/spread {f['max_abs_delta']:.3g}, "
            f"first divergence {f['first_divergence']} over {f['steps']} steps"
        )
        for b in e.get("bands") or []:
            bf = b["figures"]
            lines.append(
                f"   band {b['name']} ({b['change']}): KL mean {bf['kl_mean']:.3g}, top-1 {bf['top1_agreement']:.0%}; "
                f"limit {b['kl_limit']:.3g} -> route at {f['kl_mean'] / b['kl_limit']:.2f}x the limit"
                if b["kl_limit"] > 0
                else f"   band {b['name']} ({b['change']}): KL 0"
            )
        layers = e.get("layers")
        if layers:
            lines.append(
                f"   layers ({layers['tokens']} tokens, limits from the {layers['band']} band): computes something "
                f"else first at layer {layers.get('first_wrong')} ({layers.get('first_wrong_stage')}); accumulated "
                f"error first beyond the band at layer {layers['first_departing']}; pattern {layers['pattern']}; "
                f"first not bit-equal {layers['first_differing']}"
            )
            lines.append(
                "     layer: accumulated rel (limit, x) cosine | own rel, fed the reference's input (limit, x)"
            )
            lines.extend(
                f"     layer {x['layer']:>2}: {x['max_rel']:.3g} ({x['limit']:.3g}, {x['max_rel'] / x['limit']:.2f}x) "
                f"{x['cosine_min']:.5f} | "
                + (
                    f"{x['local_rel']:.3g} ({x['local_limit']:.3g}, {x['local_rel'] / x['local_limit']:.2f}x)"
                    if x.get("local_rel") is not None
                    else "not measured"
                )
                for x in layers["figures"]
            )
            lines.extend(f"     unobserved: {u}" for u in layers.get("unobserved") or [])
        lines.append(f"   precision: route {e.get('precision_class')}")
        lines.append(f"              reference {e.get('reference_precision_class')}")
        lines.append(f"   cost {e['cost_ms'] / 1000:.1f} s")
    return "\n".join(lines) or "no route was judged"


if __name__ == "__main__":
    print(report(json.loads(open(sys.argv[1], encoding="utf-8").read())))
