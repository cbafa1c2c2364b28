"""`winml compare runs` on the night a large regression lands (issue 28): eight ordinary nights of
5 invocations x 4 iterations, then a night whose decode steps take 2.7x as long. The gate must fail
that night and say why on screen; the table's verdict is over invocations; the threshold needs
its unit."""

from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import run_winml
from tests.results_fakes import hex_id, make_cell
from winml_perf.results.store import open_store

pytestmark = pytest.mark.e2e

ORDINARY, INVOCATIONS, ITERATIONS = 8, 5, 4


def _night(night: int, rng: np.random.Generator, slowdown: float) -> dict:
    steps, rounds = [], []
    for inv in range(INVOCATIONS):
        process = 2.0 * slowdown * (1 / 0.65 if rng.random() < 0.3 else 1.0) * rng.lognormal(0, 0.05)
        steps += list(process * rng.lognormal(0, 0.01, ITERATIONS))
        rounds += [inv * ITERATIONS + i for i in range(ITERATIONS)]
    cell = make_cell(
        hex_id("first-night", night),
        testbed="tb-night",
        when=f"2025-03-{1 + night:02d}T02:00:00Z",
        step_ms=[round(float(s), 6) for s in steps],
        rounds=rounds,
    )
    for k, sample in enumerate(cell["samples"]["iterations"]):
        sample["invocation"] = k // ITERATIONS
    return cell


@pytest.fixture
def first_night_store(store_url):
    rng = np.random.default_rng(28)
    with open_store(store_url) as store:
        store.write_json_records([_night(n, rng, 2.7 if n == ORDINARY else 1.0) for n in range(ORDINARY + 1)])
    return store_url


def _runs(store: str, *extra: str):
    return run_winml(
        "compare", "runs", "--store", store, "--baseline", "previous", "--candidate", "latest",
        "--metric", "decode_tokens_per_s", *extra,
    )  # fmt: skip


def test_the_gate_fails_the_first_night_and_says_why_on_screen(first_night_store):
    gate = _runs(first_night_store, "--fail-on-regression", "10%")
    assert gate.returncode == 1, gate.stdout + gate.stderr
    assert "REGRESSION" in gate.stdout and "inv base" in gate.stdout and "Δ 95% CI" in gate.stdout
    assert "gate: tiny-qwen2 config p16 n8 @tb-night decode: regression: all 5 invocations" in gate.stderr
    assert "judges each candidate series' stored history" in gate.stderr


def test_the_table_verdict_is_over_invocations(first_night_store):
    table = _runs(first_night_store)
    assert table.returncode == 0, table.stdout + table.stderr
    assert " 5 " in table.stdout and " 20 " not in table.stdout  # 5 invocations a side, not 20 iterations
    assert "slower" in table.stdout


@pytest.mark.parametrize("value", ["0.05", "5"])
def test_the_threshold_needs_its_unit(first_night_store, value):
    bare = _runs(first_night_store, "--fail-on-regression", value)
    assert bare.returncode == 2, bare.stdout + bare.stderr
    assert f"--fail-on-regression '{value}' has no unit" in bare.stderr and "--fail-on-regression 5%" in bare.stderr
