"""Hand-made cell records (schema-valid, deterministic) for the results store, compare, exports
and dashboard tests. Every number is chosen here, so golden files stay stable."""

from __future__ import annotations

import hashlib
import math
import os
import random
from collections.abc import Sequence

from winml_perf.model import metrics as M
from winml_perf.stats import sample_stats as stats

ENV_BASE = {
    "hostname": "bench-01",
    "testbed_id_source": "env",
    "os": {"system": "Linux", "release": "6.1"},
    "cpu": {"model": "Test CPU", "logical_cores": 2},
    "gpu": {"gpus": []},
}


def hex_id(*parts: object) -> str:
    return hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()[:32]


def environment(testbed: str, when: str, commit: str | None, version: str) -> dict:
    return {
        **ENV_BASE,
        "timestamp_utc": when,
        "testbed_id": testbed,
        "versions": {"winml-perf": version, "onnxruntime": "1.31.1", "onnxruntime-genai": "0.18.0", "python": "3.11.2"},
        "git": {"commit": commit, "dirty": False},
    }


def token_sample(round_index: int, prompt_tokens: int, new_tokens: int, step_ms: float, prompt_ms: float) -> dict:
    steps = [round(step_ms, 6)] * (new_tokens - 1)
    ttft = prompt_ms + 0.5
    e2e = ttft + math.fsum(steps)
    return {
        "round_index": round_index,
        "latency_ms": e2e,
        "prompt_tokens": prompt_tokens,
        "new_tokens": new_tokens,
        "prompt_ms": prompt_ms,
        "ttft_ms": ttft,
        "decode_step_ms": steps,
        "e2e_ms": e2e,
    }


def _metrics(samples: Sequence[dict]) -> dict:
    def values(name: str) -> list[float]:
        out = []
        for s in samples:
            steps = s["decode_step_ms"]
            if name == "decode_tokens_per_s":
                out.append(M.decode_tokens_per_s(steps))
            elif name == "tpot_ms":
                out.append(M.tpot_ms(steps))
            elif name == "prompt_tokens_per_s":
                out.append(M.tokens_per_s(s["prompt_tokens"], s["prompt_ms"]))
            else:
                out.append(s[name])
        return out

    names = ("prompt_ms", "ttft_ms", "e2e_ms", "prompt_tokens_per_s", "decode_tokens_per_s", "tpot_ms")
    out = {n: stats.summarize(values(n)).to_dict() for n in names}
    out["itl_ms"] = stats.summarize([x for s in samples for x in s["decode_step_ms"]]).to_dict()
    return out


def make_cell(  # noqa: PLR0913
    run_id: str,
    *,
    route: str = "config",
    bundle: str = "bundles/tiny-qwen2",
    testbed: str = "tb-linux",
    prompt_tokens: int = 16,
    max_new_tokens: int = 8,
    when: str = "2025-01-01T02:00:00Z",
    step_ms: Sequence[float] | None = None,
    rounds: Sequence[int] | None = None,
    prompt_ms: float = 4.0,
    commit: str | None = "1111111aaaaaaa",
    version: str = "0.1.0",
    status: str = "ok",
    peak_rss_bytes: int = 200_000_000,
    index: int = 0,
    equivalence: dict | None = None,
) -> dict:
    """One schema-valid cell record. ``step_ms``: one decode-step time per iteration; ``rounds``:
    their round_index (default 0, 1, 2, ...)."""
    step_ms = list(step_ms if step_ms is not None else [2.0, 2.1, 1.9, 2.05, 1.95, 2.0])
    if status != "ok":
        step_ms = []
    rounds = list(rounds if rounds is not None else range(len(step_ms)))
    iterations = [
        token_sample(r, prompt_tokens, max_new_tokens, t, prompt_ms + 0.01 * k)
        for k, (r, t) in enumerate(zip(rounds, step_ms))
    ]
    warmup = [token_sample(-1, prompt_tokens, max_new_tokens, 3.0, 6.0)] if status == "ok" else []
    metrics = _metrics(iterations) if iterations else {}
    summary = {"primary_metric": "decode_tokens_per_s", "iterations": len(iterations), "warmup_iterations": len(warmup)}
    for name, s in metrics.items():
        if name != "itl_ms":
            summary[name] = s["median"]
    failure = (
        None
        if status == "ok"
        else {
            "kind": "crash",
            "message": "child exited with signal 9",
            "phase": "measure",
            "remedy": None,
            "error_type": None,
            "exit_code": None,
            "signal": 9,
            "signal_name": "SIGKILL",
            "traceback": None,
        }
    )
    cell_id = hex_id(run_id, route, prompt_tokens, max_new_tokens, testbed, index)
    return {
        "schema_version": 1,
        "kind": "cell",
        "run_id": run_id,
        "cell_id": cell_id,
        "cell_key": f"{route}|p{prompt_tokens}|n{max_new_tokens}",
        "cell_index": index,
        "status": status,
        "runtime": "winml-genai",
        "bundle": bundle,
        "route": {"label": route, **({"equivalence": equivalence} if equivalence else {})},
        "shape": {
            "prompt_tokens": prompt_tokens,
            "max_new_tokens": max_new_tokens,
            "requested_prompt_tokens": prompt_tokens,
        },
        "prompt": {"mode": "synthetic", "seed": 0},
        "policy": {
            "warmup": {"mode": "count", "count": 1},
            "iterations": {"mode": "fixed", "iterations": len(iterations), "target_ci_pct": None},
            "rounds": len(set(rounds)) or None,
            "seed": 0,
            "isolate": False,
        },
        "load": {
            "plugin_registration_ms": None,
            "prepare_ms": 1.5,
            "compile_ms": None,
            "model_load_ms": 120.0,
            "first_generation_ms": 30.0,
            "session_reused": False,
        },
        "samples": {"warmup": warmup, "iterations": iterations},
        "metrics": metrics,
        "summary": summary,
        "memory": {"peak_rss_bytes": peak_rss_bytes} if status == "ok" else {},
        "environment": environment(testbed, when, commit, version),
        "warnings": [],
        "failure": failure,
        "stop_reason": "iterations" if status == "ok" else None,
        "output": {},
        "roofline": None,
        "started_utc": when,
        "finished_utc": when,
        "wall_s": 1.0,
        "measure_s": 0.5,
    }


def logits_equivalence(
    verdict: str,
    kl_mean: float,
    top1: float,
    first_divergence: int | None = None,
    first_stage: str | None = None,
    reference: str = "config",
) -> dict:
    """A route.equivalence of the teacher-forced kind (model/equivalence.py), figures chosen here."""
    from winml_perf.model.equivalence import Equivalence, LogitFigures

    figures = LogitFigures(16, kl_mean, 3 * kl_mean, 0.1, top1, 0.9, first_divergence, kl_mean == 0)
    return Equivalence(
        reference, "bundles/tiny-qwen2", "bundles/tiny-qwen2/_compiled/x", 16, 0, figures, verdict,
        first_stage=first_stage, cost_ms=1000.0,
    ).to_dict()  # fmt: skip


def interleaved_run(
    run_id: str, route_step_ms: dict[str, Sequence[float]], *, when: str = "2025-01-01T02:00:00Z", **kw
) -> list[dict]:
    """Cells of one interleaved sweep: route -> per-round decode step times (one iteration per round)."""
    return [
        make_cell(run_id, route=route, when=when, step_ms=steps, index=i, **kw)
        for i, (route, steps) in enumerate(route_step_ms.items())
    ]


def noisy(center: float, n: int, rel_sd: float, seed: int) -> list[float]:
    rng = random.Random(seed)
    return [round(center * (1 + rng.gauss(0, rel_sd)), 6) for _ in range(n)]


def small_cell(run_id: str, index: int, worker: int = 0) -> dict:
    """A valid record with two iterations and no summaries (cheap to build and validate: for
    volume tests)."""
    cell = make_cell(run_id, index=index, testbed=f"tb-{worker}", step_ms=[2.0, 2.1])
    cell["samples"]["warmup"] = []
    cell["summary"]["warmup_iterations"] = 0
    cell["metrics"] = {}
    return cell


def concurrent_writer(url: str, worker: int, count: int, go_file: str) -> None:
    """Body of one writer process: wait for the start signal, then write ``count`` records, each
    in its own write_record call (its own transaction)."""
    import copy
    import time

    from winml_perf.results.store import open_store

    template = small_cell(hex_id("conc", worker), 0, worker)
    cells = []
    for i in range(count):
        cell = copy.deepcopy(template)
        cell["cell_id"], cell["cell_index"] = hex_id("conc", worker, i), i
        cells.append(cell)
    while not os.path.exists(go_file):
        time.sleep(0.01)
    with open_store(url) as store:
        for cell in cells:
            store.write_json_record(cell)


# -- the golden data set: hand-made records with hand-typed timings -------------------------------
GOLDEN_RUN_A = "a0000000000000000000000000000001"
GOLDEN_RUN_B = "b0000000000000000000000000000002"
#: Decode step ms per round (one iteration per round) of an interleaved sweep: webgpu ~1.84x faster
#: than config, cpu within 1 %; round 3 ran on a slow machine moment that hit every route.
GOLDEN_STEPS_A = {
    "config": [2.00, 2.02, 1.98, 2.40, 2.01, 1.99, 2.03, 2.00],
    "ep=cpu": [2.01, 2.01, 1.99, 2.41, 2.00, 2.00, 2.02, 2.01],
    "ep=webgpu": [1.09, 1.10, 1.07, 1.31, 1.09, 1.08, 1.11, 1.09],
}
#: Each route's equivalence in run A: ep=cpu bit-identical to config; ep=webgpu faster but NOT the same model.
GOLDEN_EQUIVALENCE_A = {
    "ep=cpu": logits_equivalence("equivalent", 0.0, 1.0),
    "ep=webgpu": logits_equivalence("not equivalent", 0.81, 0.44, first_divergence=1, first_stage="context"),
}
#: The next night: config decode about 10 % slower (a regression), same shape and testbed.
GOLDEN_STEPS_B = [2.21, 2.20, 2.23, 2.19, 2.22, 2.20, 2.24, 2.21]


def golden_cells() -> list[dict]:
    cells = [
        make_cell(
            GOLDEN_RUN_A,
            route=r,
            step_ms=steps,
            index=i,
            when="2025-01-01T02:00:00Z",
            commit="aaaa1111aaaa",
            version="0.1.0",
            peak_rss_bytes=300_000_000 + i,
            equivalence=GOLDEN_EQUIVALENCE_A.get(r),
        )
        for i, (r, steps) in enumerate(GOLDEN_STEPS_A.items())
    ]
    cells.append(
        make_cell(
            GOLDEN_RUN_B,
            route="config",
            step_ms=GOLDEN_STEPS_B,
            when="2025-01-02T02:00:00Z",
            commit="bbbb2222bbbb",
            version="0.1.1",
            peak_rss_bytes=310_000_000,
        )
    )
    cells.append(
        make_cell(
            GOLDEN_RUN_B,
            route="ep=webgpu",
            status="failed",
            index=1,
            when="2025-01-02T02:00:05Z",
            commit="bbbb2222bbbb",
            version="0.1.1",
        )
    )
    return cells


GOLDEN_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "golden", "results")
UPDATE_ENV = "WINML_PERF_UPDATE_GOLDEN"


def _rounded(obj, digits: int = 9):
    if isinstance(obj, float):
        return float(f"{obj:.{digits}g}")
    if isinstance(obj, dict):
        return {k: _rounded(v, digits) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_rounded(v, digits) for v in obj]
    return obj


def assert_golden(name: str, text: str) -> None:
    """``text`` equals tests/golden/results/NAME (JSON compared with floats to 9 digits).
    WINML_PERF_UPDATE_GOLDEN=1 rewrites the file instead (review the diff before committing)."""
    import json

    path = os.path.join(GOLDEN_DIR, name)
    if os.environ.get(UPDATE_ENV) == "1":
        os.makedirs(GOLDEN_DIR, exist_ok=True)
        with open(path, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
        return
    with open(path, encoding="utf-8") as fh:
        expected = fh.read()
    if name.endswith(".json"):
        assert _rounded(json.loads(text)) == _rounded(json.loads(expected)), f"{name} differs from the golden file"
    else:
        assert text == expected, f"{name} differs from the golden file"
