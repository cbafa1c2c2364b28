"""Run records from fake sessions with every clock-dependent field scrubbed: the golden set that pins
a record's content (tests/unit/test_record_golden.py; tests/golden/record_digests.json).

The digests file holds, beside each case's digest, the metric table's names when they were recorded
(``metrics``). A case's text is digested without the keys of the table's metrics added since (a cell's
``metrics``, ``summary`` and ``uncertainty`` entries, all named by the metric): a new metric changes no
digest, while a change to any byte that was recorded, a recorded metric's included, still does (taking a
new metric's keys out can only remove bytes that were not recorded, or the digest differs).

``python -m tests.unit.record_golden`` prints the digests file of the current code."""

from __future__ import annotations

import hashlib
import json
import sys
from typing import Any

from tests.unit.fakes import FAKE_ENV, fake_spec, open_fake_session
from winml_perf.measure.sweep import CellExtras, RunFacts, run_sweep
from winml_perf.model.metrics import METRICS
from winml_perf.model.record import RunRecord
from winml_perf.model.spec import IterationPolicy, RouteSpec, WarmupPolicy, expand_sweep
from winml_perf.publish.formats import json_text

#: Keys whose value is a clock reading, an id drawn at random or a reading of this machine (power_state:
#: its /sys): replaced by their key's name.
VOLATILE = frozenset(
    {
        "run_id",
        "cell_id",
        "started_utc",
        "finished_utc",
        "wall_s",
        "measure_s",
        "timestamp_utc",
        "model_load_ms",
        "first_generation_ms",
        "warmup_s",
        "power_state",
    }
)

#: name -> (iterations policy, fake session script, prompt tokens, new tokens)
CASES: dict[str, tuple[IterationPolicy, dict[str, Any], int, int]] = {
    "n1": (IterationPolicy(iterations=1), {"jitter_pct": 10.0, "jitter_seed": 1}, 16, 8),
    "n7": (IterationPolicy(iterations=7), {"jitter_pct": 10.0, "jitter_seed": 2}, 16, 8),
    "n200_jitter": (IterationPolicy(iterations=200), {"jitter_pct": 25.0, "jitter_seed": 3}, 32, 16),
    "n2000_drift": (
        IterationPolicy(iterations=2000),
        {"jitter_pct": 40.0, "jitter_seed": 4, "drift_pct_per_call": 0.01, "scales": [1.0, 1.0, 3.0]},
        64,
        32,
    ),
    "n300_x3": (IterationPolicy(iterations=100, invocations=3), {"jitter_pct": 15.0, "jitter_seed": 5}, 16, 8),
    "adaptive": (
        IterationPolicy(target_ci_pct=1.0, max_iterations=3000),
        {"jitter_pct": 20.0, "jitter_seed": 6},
        16,
        8,
    ),
}


def scrubbed(value: Any) -> Any:
    """``value`` with every volatile key's value replaced by the key's name."""
    if isinstance(value, dict):
        return {k: (k if k in VOLATILE else scrubbed(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [scrubbed(v) for v in value]
    return value


def case_run(name: str) -> RunRecord:
    """The run record of case ``name`` (one fake route, one cell)."""
    policy, script, prompt, new = CASES[name]
    route = RouteSpec("config", fake_spec("fake-config", label="config", **script), bundle="fake")
    cells = expand_sweep([route], [prompt], [new], warmup=WarmupPolicy(count=1), iterations=policy)
    run = run_sweep(
        cells,
        open_fake_session,
        seed=0,
        isolate=False,
        facts=RunFacts(environment=FAKE_ENV, argv=["perf", "fake"]),
        extras=CellExtras(roofline=False, sample_memory=False),
    )
    return run


def without_metrics(value: Any, names: frozenset[str]) -> Any:
    """``value`` without the keys that name a metric in ``names`` or one of its entries (``itl_ms_p90``)."""
    if isinstance(value, dict):
        return {
            k: without_metrics(v, names)
            for k, v in value.items()
            if k not in names and not any(k.startswith(f"{n}_") for n in names)
        }
    if isinstance(value, list):
        return [without_metrics(v, names) for v in value]
    return value


def case_text(name: str, recorded_metrics: list[str] | None = None) -> str:
    """Case ``name``'s run record as `perf --format json` writes it, clock readings scrubbed; given the
    metrics recorded with the digests, the table's other (newer) metrics left out."""
    doc = scrubbed(case_run(name).to_dict())
    if recorded_metrics is not None:
        doc = without_metrics(doc, frozenset(m.name for m in METRICS) - set(recorded_metrics))
    return json_text(doc, "json")


def digests() -> dict[str, Any]:
    """The digests file: the metric table's names and each case's digest."""
    cases = {name: hashlib.sha256(case_text(name).encode()).hexdigest() for name in CASES}
    return {"metrics": [m.name for m in METRICS], "cases": cases}


if __name__ == "__main__":
    if len(sys.argv) > 1:  # write each case's text into this folder (to diff two trees)
        for name in CASES:
            with open(f"{sys.argv[1]}/{name}.json", "w") as f:
                f.write(case_text(name))
    print(json.dumps(digests(), indent=2))
