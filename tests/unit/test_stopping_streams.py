"""The stopping rule stops at the same sample on recorded sample streams, whatever keeps the cell's
running statistics: tests/golden/stopping_decisions.json holds the decisions of the implementation
that re-read every sample after every iteration (main at 0847659, before the incremental cell
statistics), recorded with ``python -m tests.unit.test_stopping_streams --record``.

Each stream is a seeded sequence of iteration values per invocation (noise, a shift between
invocations, outliers, a slow drift); a scripted host hands them to the real CellDriver one
iteration per batch, as both schedules do, with fixed iteration and invocation costs, so every
decision is a function of the stream alone. The golden file keeps, per (stream, policy), every
decision's action and reason (as a digest and as run lengths), the invocation sizes and the stop.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.unit.fakes import fake_spec, open_fake_session
from winml_perf.measure.context import SweepContext
from winml_perf.measure.driver import CellDriver
from winml_perf.measure.hosting.replies import BatchReply, BeginReply, EndReply, LoadReply
from winml_perf.measure.progress import NullProgress
from winml_perf.model.sample import IterationSample
from winml_perf.model.spec import CellSpec, IterationPolicy, WarmupPolicy

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "stopping_decisions.json"
NEVER_S = 1e9  # --max-time far beyond any stream: real time never decides here

POLICIES: dict[str, IterationPolicy] = {
    "fixed-20": IterationPolicy(iterations=20),
    "fixed-7x3": IterationPolicy(iterations=7, invocations=3),
    "ci1-one": IterationPolicy.until_ci(1.0, min_iterations=8, max_iterations=3000, max_time_s=NEVER_S),
    "ci0.3-one-cap": IterationPolicy.until_ci(0.3, min_iterations=6, max_iterations=400, max_time_s=NEVER_S),
    "ci1-multi": IterationPolicy.until_ci(
        1.0, min_iterations=5, max_iterations=3000, max_time_s=NEVER_S, invocations=2, max_invocations=12
    ),
    "ci2-multi3": IterationPolicy.until_ci(
        2.0, min_iterations=4, max_iterations=2000, max_time_s=NEVER_S, invocations=3, max_invocations=20
    ),
}
#: (seed, noise sd, between-invocation sd, outlier rate, drift per iteration): the recorded streams
STREAMS: dict[str, tuple[int, float, float, float, float]] = {
    "quiet": (1, 0.01, 0.0, 0.0, 0.0),
    "noisy": (2, 0.08, 0.0, 0.0, 0.0),
    "between": (3, 0.02, 0.05, 0.0, 0.0),
    "outliers": (4, 0.03, 0.01, 0.05, 0.0),
    "drift": (5, 0.02, 0.02, 0.0, 2e-4),
    "wild": (6, 0.25, 0.10, 0.10, 0.0),
}


class ScriptedHost:
    """A host whose iterations take the stream's values; costs fixed by the stream, not the clock."""

    pid = 4242

    def __init__(self, stream: str) -> None:
        self.seed, self.sd, self.between, self.outliers, self.drift = STREAMS[stream]
        self.invocation = -1
        self.rng = random.Random(0)
        self.level = 1.0
        self.done = 0

    def load(self, timeout_s: float | None = None) -> LoadReply:
        return LoadReply(model_load_ms=100.0)

    def begin_cell(self, cell: CellSpec, timeout_s: float | None = None) -> BeginReply:
        self.invocation += 1
        self.rng = random.Random(self.seed * 1000 + self.invocation)
        self.level = math.exp(self.rng.gauss(0.0, self.between))
        self.done = 0
        return BeginReply({}, (), (), 0.4, None, False, LoadReply(model_load_ms=100.0))

    def _value_ms(self) -> float:
        x = self.level * math.exp(self.rng.gauss(0.0, self.sd)) * (1.0 + self.drift * self.done)
        if self.rng.random() < self.outliers:
            x *= 1.0 + 3.0 * self.rng.random()
        self.done += 1
        return 10.0 * x

    def run_batch(self, n: int, round_index: int, rewarm: int, timeout_s: float | None = None) -> BatchReply:
        samples = []
        for _ in range(n):
            step = self._value_ms()
            samples.append(
                IterationSample(
                    latency_ms=5.0 + 3 * step,
                    prompt_tokens=8,
                    new_tokens=4,
                    prompt_ms=5.0,
                    ttft_ms=5.0,
                    decode_step_ms=(step, step, step),
                    e2e_ms=5.0 + 3 * step,
                )
            )
        return BatchReply(tuple(samples), 0.02 * n)

    def end_cell(self, timeout_s: float | None = None) -> EndReply:
        return EndReply()


def drive(stream: str, policy_name: str) -> dict[str, Any]:
    """Measure one cell on the stream with the real driver, one iteration per batch; what it decided."""
    policy = POLICIES[policy_name]
    cell = CellSpec(
        "config", fake_spec(), prompt_tokens=8, max_new_tokens=4, warmup=WarmupPolicy(count=0), iterations=policy
    )
    context = SweepContext(open_fake_session, False, False, NullProgress(), random.Random(0))
    d = CellDriver(context, cell, 0, fresh_session_per_invocation=policy.multi_invocation)
    host = ScriptedHost(stream)
    load = d.load(host)
    decisions: list[tuple[str, str]] = []
    k = 0
    while not d.finished and k < 100:
        assert d.begin(host, k, load)
        decision = d.measure(host, 1, k)
        while decision is not None:
            decisions.append((decision.action, decision.reason))
            if decision.action != "iteration":
                break
            decision = d.measure(host, 1, k)
        d.end(host)
        k += 1
    digest = hashlib.sha256(json.dumps(decisions).encode()).hexdigest()
    runs: list[list[Any]] = []
    for action, _ in decisions:
        if runs and runs[-1][0] == action:
            runs[-1][1] += 1
        else:
            runs.append([action, 1])
    return {
        "stop": d.state.stop,
        "invocation_sizes": [len(inv.samples) for inv in d.state.invocations],
        "runs": runs,
        "digest": digest,
        "last_reason": decisions[-1][1],
    }


def _all() -> dict[str, Any]:
    return {f"{s}/{p}": drive(s, p) for s in STREAMS for p in POLICIES}


def _golden() -> dict[str, Any]:
    return json.loads(GOLDEN.read_text())


@pytest.mark.parametrize("case", [f"{s}/{p}" for s in STREAMS for p in POLICIES])
def test_the_stopping_rule_stops_at_the_recorded_sample(case):
    stream, policy = case.split("/")
    want = _golden()[case]
    got = drive(stream, policy)
    assert got["stop"] == want["stop"]
    assert got["invocation_sizes"] == want["invocation_sizes"]  # the same sample, invocation by invocation
    assert got["runs"] == want["runs"]
    assert got["digest"] == want["digest"]  # every decision and its reason, in order


def test_the_recorded_streams_cover_every_way_to_stop():
    stops = {v["stop"] for v in _golden().values()}
    assert {"iterations", "ci_target", "max_iterations", "max_invocations"} <= stops
    assert any(len(v["invocation_sizes"]) > 3 for v in _golden().values())  # the rule chose invocations
    assert max(sum(v["invocation_sizes"]) for v in _golden().values()) >= 300


if __name__ == "__main__" and "--record" in sys.argv:
    GOLDEN.write_text(json.dumps(_all(), indent=1, sort_keys=True) + "\n")
    print(f"wrote {GOLDEN}")


def test_the_running_figures_are_the_figures_of_every_sample_re_read():
    """After every value (NaN and infinities among them): the kept median, the interval's half-width
    and the variance components equal what the statistics compute from all the values."""
    from winml_perf.measure import stopping
    from winml_perf.measure.cell_progress import RunningValues, sorted_percentile_50
    from winml_perf.stats import median_interval, variance_components
    from winml_perf.stats import sample_stats as stats

    rng = random.Random(11)
    invocations: list[RunningValues] = []
    everything: list[float] = []
    ordered: list[float] = []
    for k in range(4):
        invocations.append(RunningValues())
        for _ in range(60 + 17 * k):
            x = rng.choice([math.nan, math.inf]) if rng.random() < 0.03 else rng.lognormvariate(k * 0.01, 0.2)
            invocations[-1].add(x)
            everything.append(x)
            if not math.isnan(x):
                ordered.append(x)
                ordered.sort()
            assert sorted_percentile_50(ordered) == stats.median(everything)
            plain = [list(v) for v in invocations]
            want = median_interval(plain).half_width_pct
            got = stopping.half_width_pct(invocations)
            assert got == want or (math.isnan(got) and math.isnan(want))
            if k >= 1 and len(invocations[-1]) > 1:
                assert stopping._components(invocations) == variance_components(plain)
