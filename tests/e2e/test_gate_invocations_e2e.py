"""`winml compare runs --fail-on-regression` judging a nightly series by its runs' invocations:
a real store (SQLite, and PostgreSQL in CI) filled with schema-valid records whose samples carry
the invocation that ran them, and the real `winml` exit codes.

Each night is one cell of 5 invocations x 4 iterations; an invocation lands in a slow mode
(decode steps 1 / 0.65 longer) with some probability, as processes do on the machines measured in
issue 12. Three testbeds: one flat, one whose decode got 10 % slower in the newest 6 nights, one
whose slow mode went from 10 % to 80 % of invocations in the newest 6 nights (each mode's speed
unchanged)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import run_winml
from tests.results_fakes import hex_id, make_cell
from winml_perf.results.invocation_history import invocation_histories
from winml_perf.results.store import open_store

pytestmark = pytest.mark.e2e

NIGHTS, FRESH, INVOCATIONS, ITERATIONS = 30, 6, 5, 4


def _night(testbed: str, night: int, rng: np.random.Generator, *, slowdown: float, slow_share: float) -> dict:
    steps, rounds = [], []
    for inv in range(INVOCATIONS):
        process = 2.0 * slowdown * (1 / 0.65 if rng.random() < slow_share else 1.0) * rng.lognormal(0, 0.03)
        steps += list(process * rng.lognormal(0, 0.01, ITERATIONS))
        rounds += [inv * ITERATIONS + i for i in range(ITERATIONS)]
    when = f"2025-02-{1 + night // 24:02d}T{night % 24:02d}:00:00Z"
    cell = make_cell(
        hex_id(testbed, night),
        testbed=testbed,
        when=when,
        step_ms=[round(float(s), 6) for s in steps],
        rounds=rounds,
        commit=hex_id("commit", night)[:14],
    )
    for k, sample in enumerate(cell["samples"]["iterations"]):
        sample["invocation"] = k // ITERATIONS
    return cell


def _series(testbed: str, seed: int, fresh_slowdown: float = 1.0, fresh_share: float = 0.3) -> list[dict]:
    rng = np.random.default_rng(seed)
    return [
        _night(
            testbed,
            n,
            rng,
            slowdown=fresh_slowdown if n >= NIGHTS - FRESH else 1.0,
            slow_share=fresh_share if n >= NIGHTS - FRESH else (0.1 if fresh_share != 0.3 else 0.3),
        )
        for n in range(NIGHTS)
    ]


@pytest.fixture
def nightly_store(store_url):  # noqa: F811
    with open_store(store_url) as store:
        store.write_json_records(
            _series("tb-flat", 1)
            + _series("tb-slower", 2, fresh_slowdown=1.10)
            + _series("tb-slow-mode", 3, fresh_share=0.8)
        )
    return store_url


def _gate(store: str, testbed: str):
    return run_winml(
        "compare",
        "runs",
        "--store",
        store,
        "--baseline",
        "previous",
        "--candidate",
        "latest",
        "--testbed",
        testbed,
        "--metric",
        "decode_tokens_per_s",
        "--fail-on-regression",
        "5%",
    )


def test_the_store_gives_each_record_its_invocation_medians(nightly_store):
    with open_store(nightly_store, create=False) as store:
        key = store.records(testbed="tb-flat")[0]["series_key"]
        history = invocation_histories(store, key, ["decode_tokens_per_s", "ttft_ms"])
    rows = history["decode_tokens_per_s"]
    assert len(rows) == NIGHTS and all(len(r["invocations"]) == INVOCATIONS for r in rows)
    assert [r["created_utc"] for r in rows] == sorted(r["created_utc"] for r in rows)
    spread = [max(r["invocations"]) / min(r["invocations"]) for r in rows]
    assert max(spread) > 1.3  # some nights mix both modes
    assert all(len(r["invocations"]) == INVOCATIONS for r in history["ttft_ms"])


def test_gate_exit_codes_on_a_shift_a_mode_share_change_and_a_flat_series(nightly_store):
    flat = _gate(nightly_store, "tb-flat")
    assert flat.returncode == 0, flat.stdout + flat.stderr
    assert "REGRESSION" not in flat.stdout
    slower = _gate(nightly_store, "tb-slower")
    assert slower.returncode == 1, slower.stdout + slower.stderr
    assert "REGRESSION" in slower.stdout and "change point at index" in slower.stderr
    slow_mode = _gate(nightly_store, "tb-slow-mode")
    assert slow_mode.returncode == 1, slow_mode.stdout + slow_mode.stderr
    assert "mode share change point" in slow_mode.stderr and "in the lower mode" in slow_mode.stderr
