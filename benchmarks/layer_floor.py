"""Per-layer and per-stage relative errors of bundles against a reference, for LAYER_REL_FLOOR and
STAGE_REL_TOLERANCE on the real model (issue 34, docs/equivalence.md).

For each prompt seed: the reference's teacher-forced pass (16 prompt tokens, 16 steps, as `winml perf`'s
equivalence check), its layer profiles (accumulated, and each layer fed the reference's input), then each
compared bundle's the same way, with exactly the functions the check uses (equivalence/check.py and equivalence/layers.py:
LayerBands.passes, stats/layer_equivalence.band_errors, the stage figures of compare_tensors). Prints one
markdown table: per comparison and seed, the relative error (max |delta| over the reference's max |value|,
worst position) over the decoder layers as min / median / max, accumulated and layer-own, the KL of the
logits, and each pipeline stage's relative error.

    python benchmarks/layer_floor.py REF [--noise] [--copy] [--threads N] [--compare LABEL=BUNDLE ...] [--seeds 0,1,2] [--json out.json]

``--noise``: the reference at graph_optimization_level ORT_DISABLE_ALL (the check's noise-floor variant);
``--copy``: an exact copy of the reference (every file copied); ``--threads N``: the reference with
intra_op_num_threads N (another split of the work over threads).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
from pathlib import Path

import numpy as np

from winml_perf.bundle.variants import optimization_variant, session_variant
from winml_perf.equivalence.check import EQUIVALENCE_STEPS, _stage_figures, _stage_outputs
from winml_perf.equivalence.layers import LayerBands
from winml_perf.equivalence.passes.genai_logits import teacher_forced
from winml_perf.session.genai_session import GenaiSession
from winml_perf.stats.equivalence import compare_logits, compare_tensors
from winml_perf.stats.layer_equivalence import band_errors

PROMPT_TOKENS = 16


def threads_variant(bundle: Path, threads: int) -> Path:
    """A folder loading ``bundle`` with every stage at intra_op_num_threads ``threads``."""
    return session_variant(bundle, {"intra_op_num_threads": threads})


def _spread(errors: dict[int, float]) -> dict[str, float | int | None]:
    if not errors:
        return {"n": 0, "min": None, "median": None, "max": None, "argmax": None}
    values = [errors[k] for k in sorted(errors)]
    return {
        "n": len(values),
        "min": min(values),
        "median": statistics.median(values),
        "max": max(values),
        "argmax": max(errors, key=lambda k: errors[k]),
    }


def measure(ref: str, seed: int, compared: dict[str, str]) -> list[dict]:
    prompt_ids = GenaiSession(ref).synthetic_prompt(PROMPT_TOKENS, seed=seed)
    stage_outputs = _stage_outputs(ref)
    wanted = [n for _, names, _, _ in stage_outputs for n in names]
    reference = teacher_forced(ref, prompt_ids, EQUIVALENCE_STEPS, outputs=wanted)
    tokens = [*prompt_ids, *reference.continuation[: EQUIVALENCE_STEPS - 1]]
    bands = LayerBands.of(ref, tokens)
    rows = []
    for label, path in compared.items():
        accumulated, own = bands.passes(path)
        run = teacher_forced(path, prompt_ids, EQUIVALENCE_STEPS, reference.continuation, outputs=wanted)
        stages, unobserved = _stage_figures(stage_outputs, reference, run)
        logits = compare_tensors("logits", "logits", list(reference.logits), list(run.logits))
        acc = band_errors(bands.reference.values, accumulated.values)
        loc = band_errors(bands.local.values, own.values) if bands.local is not None else {}
        rows.append(
            {
                "comparison": label,
                "seed": seed,
                "kl_mean": compare_logits(reference.logits, run.logits).kl_mean,
                "logits_rel": logits.max_rel,
                "layers": _spread(acc),
                "own": _spread(loc),
                "per_layer": {str(k): acc[k] for k in sorted(acc)},
                "per_layer_own": {str(k): loc[k] for k in sorted(loc)},
                "stages": {s.stage: s.max_rel for s in stages},
                "unobserved": [*unobserved, *accumulated.unobserved],
            }
        )
    return rows


def _g(x: float | None) -> str:
    return "-" if x is None else "0" if x == 0 else f"{x:.2g}"


def table(rows: list[dict]) -> str:
    lines = [
        "| comparison | seed | layers: rel. min / median / max (layer of max) | own: min / median / max "
        "| logits rel. | KL mean | stages: rel. |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        a, o = r["layers"], r["own"]
        stages = ", ".join(f"{k} {_g(v)}" for k, v in r["stages"].items()) or "-"
        lines.append(
            f"| {r['comparison']} | {r['seed']} | {_g(a['min'])} / {_g(a['median'])} / {_g(a['max'])} ({a['argmax']}) "
            f"| {_g(o['min'])} / {_g(o['median'])} / {_g(o['max'])} | {_g(r['logits_rel'])} | {_g(r['kl_mean'])} "
            f"| {stages} |"
        )
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("reference")
    p.add_argument("--compare", action="append", default=[], metavar="LABEL=BUNDLE")
    p.add_argument("--noise", action="store_true", help="the reference at ORT_DISABLE_ALL")
    p.add_argument("--copy", action="store_true", help="an exact copy of the reference")
    p.add_argument("--threads", type=int, help="the reference at intra_op_num_threads N")
    p.add_argument("--seeds", default="0")
    p.add_argument("--json", type=Path)
    args = p.parse_args()
    made: list[Path] = []
    compared: dict[str, str] = {}
    try:
        if args.copy:
            copy = Path(tempfile.mkdtemp(prefix="layer-floor-copy-")) / "bundle"
            shutil.copytree(args.reference, copy, ignore=shutil.ignore_patterns("_compiled*"))
            made.append(copy.parent)
            compared["exact copy"] = str(copy)
        if args.noise:
            noise = optimization_variant(Path(args.reference))
            made.append(noise)
            compared["ORT_DISABLE_ALL"] = str(noise)
        if args.threads:
            threads = threads_variant(Path(args.reference), args.threads)
            made.append(threads)
            compared[f"intra_op_num_threads {args.threads}"] = str(threads)
        compared.update(dict(c.split("=", 1) for c in args.compare))
        rows = [r for s in args.seeds.split(",") for r in measure(args.reference, int(s), compared)]
    finally:
        for m in made:
            shutil.rmtree(m, ignore_errors=True)
    print(table(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1, default=lambda x: float(np.asarray(x))), encoding="utf-8")


if __name__ == "__main__":
    main()
