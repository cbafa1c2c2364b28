"""Issue 29: energy per token (power/accounting.py) through the measurement seam with a fake meter,
the update-period rule, the intervals over invocations, idle power, the power state's warning, and
a sustained run whose injected slowdown halfway is found as a change point."""

from __future__ import annotations

import math
import statistics
import time
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import t as student_t

from tests.unit.fakes import FAKE_ENV, fake_spec
from winml_perf.measure.sweep import CellExtras, RunFacts, route_meters, run_sweep
from winml_perf.model.route import CPU, Route, StageRoute
from winml_perf.model.sample import GenerationTiming
from winml_perf.model.spec import CellSpec, IterationPolicy, PromptSpec, WarmupPolicy
from winml_perf.power import accounting as A
from winml_perf.power import meters, state
from winml_perf.publish.energy_lines import energy_lines
from winml_perf.record.validation import validate_record
from winml_perf.record.warnings import POWER_STATE_DIFFERS, check_power_state
from winml_perf.results.rows import record_rows
from winml_perf.stats.series import sustained


# -- the accounting, pure ------------------------------------------------------------------------
def _readings(invocations: int, per_inv: int, prefill_s: float, decode_s: float, prefill_w, decode_w=20.0):
    out = []
    for k in range(invocations):
        w = prefill_w(k) if callable(prefill_w) else prefill_w
        for _ in range(per_inv):
            out.append(A.PhaseReading(A.PREFILL, w * prefill_s, prefill_s, 100, k))
            out.append(A.PhaseReading(A.DECODE, decode_w * decode_s, decode_s, 50, k))
    return out


def test_phases_aggregate_energy_and_tokens_per_invocation_with_an_interval_over_invocations():
    """Prefill at 40 W (+1 W per invocation) for 0.5 s on 100 tokens; decode 20 W for 1 s on 50."""
    readings = _readings(4, 3, 0.5, 1.0, lambda k: 40.0 + k)
    pre = A.phase_energy(readings, A.PREFILL, update_period_s=0.1, idle_w=5.0)
    assert pre["status"] == A.MEASURED and pre["tokens"] == 1200 and pre["occurrences"] == 12
    assert pre["j_per_token"] == pytest.approx(41.5 * 0.5 / 100)
    assert pre["j_per_token_above_idle"] == pytest.approx((41.5 - 5.0) * 0.5 / 100)
    interval = pre["j_per_token_interval"]
    per_invocation = [(40.0 + k) * 0.5 / 100 for k in range(4)]  # one aggregated value per invocation
    half = student_t.ppf(0.975, 3) * statistics.stdev(per_invocation) / 2
    assert interval["method"] == "student_t_invocations"
    assert (interval["low"], interval["high"]) == pytest.approx((0.2075 - half, 0.2075 + half))
    assert interval["coverage"]["invocations"] == 4 and "invocations" in interval["coverage"]["levels"]
    assert pre["counter_bound_pct"] == pytest.approx(20.0)  # T / mean occurrence
    dec = A.phase_energy(readings, A.DECODE, 0.1, None)
    assert dec["j_per_token"] == pytest.approx(20.0 / 50) and "j_per_token_above_idle" not in dec


def test_the_reported_point_lies_inside_its_interval_when_occurrences_are_skewed():
    # Seen on the H200 (issue 29): one invocation whose prefills read the counter's 100 ms steps
    # unevenly; the pooled ratio of sums (0.0926 J/token) fell outside the interval of the
    # per-occurrence values ([0.0856, 0.0871]). The point must be the interval's own estimate.
    joules = [8.6] * 17 + [30.0] * 3  # three occurrences caught extra counter steps
    readings = [A.PhaseReading(A.PREFILL, j, 0.33, 100, 0) for j in joules]
    pre = A.phase_energy(readings, A.PREFILL, 0.1, None)
    interval = pre["j_per_token_interval"]
    assert interval["low"] <= pre["j_per_token"] <= interval["high"]
    assert pre["j_per_token_pooled"] == pytest.approx(sum(joules) / (100 * len(joules)))
    assert not interval["low"] <= pre["j_per_token_pooled"] <= interval["high"]  # the case that misled


def test_one_invocation_gives_the_within_process_interval_over_its_occurrences():
    readings = [A.PhaseReading(A.DECODE, 20.0 + i % 3, 1.0, 50, 0) for i in range(12)]
    dec = A.phase_energy(readings, A.DECODE, 0.1, None)
    assert dec["j_per_token_interval"]["coverage"]["levels"] == ["iterations"]
    assert dec["j_per_token_interval"]["low"] <= dec["j_per_token"] <= dec["j_per_token_interval"]["high"]


def test_a_phase_shorter_than_twice_the_update_period_is_too_short_and_has_no_number():
    readings = _readings(2, 20, 0.15, 1.0, 40.0)  # prefill 150 ms under 2 x 100 ms
    pre = A.phase_energy(readings, A.PREFILL, 0.1, None)
    assert pre["status"] == A.TOO_SHORT and "j_per_token" not in pre and "150.0 ms" in pre["reason"]
    assert A.phase_energy(readings, A.DECODE, 0.1, None)["status"] == A.MEASURED  # the same counter, a long phase
    assert A.phase_energy(readings, A.PREFILL, 0.001, None)["status"] == A.MEASURED  # a fast counter (RAPL)


def test_an_invocation_whose_phases_total_under_ten_update_periods_is_too_short():
    readings = _readings(2, 2, 0.25, 1.0, 40.0)  # 2 x 250 ms = 0.5 s < 10 x 100 ms
    pre = A.phase_energy(readings, A.PREFILL, 0.1, None)
    assert pre["status"] == A.TOO_SHORT and "in all" in pre["reason"]


def test_no_meter_means_not_measured_with_the_reason_and_no_number():
    section = A.cell_energy({"why_not": "no RAPL zone under /sys/class/powercap"}, _readings(2, 5, 1, 1, 40.0), None)
    assert section == {"status": A.NOT_MEASURED, "reason": "no RAPL zone under /sys/class/powercap"}
    assert A.cell_energy(None, [], None)["status"] == A.NOT_MEASURED
    meter = {"covers": "GPU 0 board", "resolution_j": 0.001, "update_period_s": 0.1}
    failed = A.cell_energy(meter, [], None)  # a meter, but the cell read no generation (it failed at load)
    assert failed["status"] == A.NOT_MEASURED and "prefill_j_per_token" not in failed


class _Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_the_fake_meter_steps_at_its_update_period_and_idle_power_reads_it_back():
    clock = _Clock()
    meter = meters.FakeMeter(80.0, update_period_s=0.1, resolution_j=0.001, clock=clock)
    marks = []
    for _ in range(2001):  # 2 s polled every millisecond
        marks.append((clock.t, meter.read()))
        clock.t += 0.001
    assert len({e for _, e in marks[:99]}) == 1  # the counter does not move within an update period
    idle = A.idle_power(marks)
    assert idle["observed_update_period_s"] == pytest.approx(0.1, abs=0.002)
    assert idle["idle_w"] == pytest.approx(80.0, rel=0.06)  # the window's ends are up to one update stale
    assert idle["observed_smallest_step_j"] == pytest.approx(8.0, abs=0.1)


def test_rapl_unwraps_the_counter_at_max_energy_range(tmp_path: Path):
    zone = tmp_path / "intel-rapl:0"
    zone.mkdir()
    (zone / "name").write_text("package-0\n")
    (zone / "max_energy_range_uj").write_text("1000000\n")
    (zone / "energy_uj").write_text("900000\n")
    (meter,) = meters.rapl_packages(tmp_path)
    assert meter.covers == "CPU package 0" and meter.available() is None
    first = meter.read()
    (zone / "energy_uj").write_text("100000\n")  # wrapped past 1 J
    assert meter.read() - first == pytest.approx(0.2)
    (zone / "energy_uj").unlink()  # as a kernel that hides it from non-root users
    assert "energy_uj is not readable" in meter.available()
    assert meters.meters_for("cpu", powercap=tmp_path)[0] == []
    assert meters.meters_for("cpu", powercap=tmp_path / "none")[1][0].startswith("no RAPL zone")


def test_nvml_without_its_library_or_gpu_says_why_not():
    meter = meters.NvmlMeter(0)
    reason = meter.available()
    if reason is None:
        pytest.skip("NVML reads a GPU's energy counter on this machine")
    assert "GPU 0" in reason or "pynvml" in reason
    assert meters.meters_for("gpu")[0] == []


# -- through the measurement seam: a session that takes its time and drives the meter's power ----
PREFILL_W, DECODE_W, IDLE_W = 30.0, 10.0, 2.0


class SleepySession:
    """A generation session that sleeps its phases and sets the fake meter's power for each;
    ``slow_after_s``: from then on (since load) every phase takes ``slowdown`` times longer."""

    def __init__(self, meter=None, prefill_s=0.05, decode_step_s=0.01, slow_after_s=None, slowdown=3.0) -> None:
        self.meter, self.prefill_s, self.step_s = meter, prefill_s, decode_step_s
        self.slow_after_s, self.slowdown = slow_after_s, slowdown
        self.t_load = 0.0

    def load(self):
        self.t_load = time.perf_counter()
        return self

    def unload(self) -> None:
        pass

    def synthetic_prompt(self, n_tokens: int, seed: int = 0) -> list[int]:
        return list(range(1, n_tokens + 1))

    def _power(self, watts: float) -> None:
        if self.meter is not None:
            self.meter.read()  # integrate up to now at the old power
            self.meter.power_w = watts

    def generate_timed(self, prompt_ids, max_new_tokens: int, mark=None) -> GenerationTiming:
        scale = 1.0
        if self.slow_after_s is not None and time.perf_counter() - self.t_load > self.slow_after_s:
            scale = self.slowdown
        if mark:
            mark()
        self._power(PREFILL_W)
        t0 = time.perf_counter()
        time.sleep(self.prefill_s * scale)
        t2 = time.perf_counter()
        self._power(DECODE_W)
        if mark:
            mark()
        steps = []
        for _ in range(max_new_tokens - 1):
            a = time.perf_counter()
            time.sleep(self.step_s * scale)
            steps.append((time.perf_counter() - a) * 1000.0)
        self._power(IDLE_W)
        if mark:
            mark()
        ms = (t2 - t0) * 1000.0
        return GenerationTiming(len(prompt_ids), max_new_tokens, ms, ms, tuple(steps), ms + sum(steps))


def _cell(label: str, policy: IterationPolicy, new_tokens: int = 11) -> CellSpec:
    return CellSpec(
        label, fake_spec(label=label), 20, new_tokens, PromptSpec(), WarmupPolicy(count=0), policy, bundle="fake"
    )


def test_energy_per_token_through_the_seam_matches_the_powers_the_session_drew(monkeypatch):
    """Before issue 29: no energy section. A fake meter (2 ms updates) whose power the session sets
    per phase: the record's J/token per phase and its idle power come back from the counter."""
    monkeypatch.setattr(meters, "IDLE_WINDOW_S", 0.2)
    meter = meters.FakeMeter(IDLE_W, update_period_s=0.002, resolution_j=1e-6, covers="fake board")
    run = run_sweep(
        [_cell("config", IterationPolicy(iterations=3, invocations=2))],
        lambda spec: SleepySession(meter),
        isolate=False,
        facts=RunFacts(environment=FAKE_ENV, argv=["perf"]),
        extras=CellExtras(roofline=False, energy_meters={"config": meter}),
    )
    (rec,) = run.cells
    e = rec.energy
    assert e.status == A.MEASURED and e.meter is not None and e.meter["covers"] == "fake board"
    pre, dec = e.prefill, e.decode
    assert pre is not None and dec is not None
    assert pre["occurrences"] == dec["occurrences"] == 6 and dec["tokens"] == 6 * 10
    assert pre["mean_w"] == pytest.approx(PREFILL_W, rel=0.15) and dec["mean_w"] == pytest.approx(DECODE_W, rel=0.15)
    assert e.prefill_j_per_token == pre["j_per_token"] == pytest.approx(pre["joules"] / (6 * 20))
    assert e.idle_w == pytest.approx(IDLE_W, rel=0.15)
    assert dec["j_per_token_above_idle"] < dec["j_per_token"]
    assert dec["j_per_token_interval"]["coverage"]["invocations"] == 2
    doc = rec.to_dict()
    validate_record(doc)
    stored = {row["name"]: row["median"] for row in record_rows(rec).metrics}
    assert stored["decode_j_per_token"] == pytest.approx(dec["j_per_token"])
    assert stored["idle_w"] == pytest.approx(e.idle_w)
    (line,) = energy_lines([rec])  # the run's text output
    assert "fake board" in line and "decode" in line and "J/token" in line and "idle" in line


def test_a_route_without_a_meter_records_not_measured_and_why():
    run = run_sweep(
        [_cell("config", IterationPolicy(iterations=2))],
        lambda spec: SleepySession(None, prefill_s=0.0, decode_step_s=0.0),
        isolate=False,
        facts=RunFacts(environment=FAKE_ENV, argv=["perf"]),
        extras=CellExtras(roofline=False),
    )
    e = run.cells[0].energy
    assert e.status == A.NOT_MEASURED and e.reason and "prefill_j_per_token" not in e.to_dict()
    assert "power_state" in e.to_dict()


def test_routes_in_different_power_states_warn():
    a = {"cpu": {"governor": "performance"}, "power_source": "AC"}
    b = {"cpu": {"governor": "powersave"}, "power_source": "AC"}
    assert state.differences(a, b) == {"cpu.governor": ("performance", "powersave")}
    (w,) = check_power_state("ep=webgpu", {"config": {k: list(v) for k, v in state.differences(a, b).items()}})
    assert w.code == POWER_STATE_DIFFERS and "cpu.governor" in w.message
    assert state.ep_performance_modes([{"qnn": {"htp_performance_mode": "burst"}}]) == {"htp_performance_mode": "burst"}


def test_a_sustained_run_finds_a_slowdown_injected_halfway():
    """6 s of generation; from 3 s on every phase takes 3x longer: a change point of generated
    tokens/s near the middle, a regression, and no change point in an even run."""
    run = run_sweep(
        [_cell("config", IterationPolicy(iterations=1, duration_s=6.0), new_tokens=5)],
        lambda spec: SleepySession(None, prefill_s=0.01, decode_step_s=0.005, slow_after_s=3.0),
        isolate=False,
        facts=RunFacts(environment=FAKE_ENV, argv=["perf"]),
        extras=CellExtras(roofline=False),
    )
    (rec,) = run.cells
    assert rec.stop_reason == "duration" and rec.measure_s >= 6.0
    s = rec.sustained
    assert s is not None and s.windows is not None and len(s.windows) >= 10
    assert s.change_points is not None and s.rss_slope_bytes_per_min is not None
    (cp,) = [c for c in s.change_points if c["direction"] == "regression"]
    assert 1.5 <= cp["t_s"] <= 4.5 and cp["shift"] < -0.4
    assert s.rss_slope_bytes_per_min["low"] <= s.rss_slope_bytes_per_min["slope"]
    validate_record(rec.to_dict())
    assert s.tokens_per_s_slope_per_min is not None and not math.isnan(s.tokens_per_s_slope_per_min["slope"])
    lines = energy_lines([rec])
    (line,) = [x for x in lines if "sustained 6 s" in x]
    assert any("of --duration 6 s" in x for x in lines)  # where the time went (issue 38)
    assert "sustained 6 s" in line and f"{cp['shift']:+.1%}" in line


def test_windows_of_an_even_run_have_no_change_point_and_a_memory_leak_has_its_slope():
    """Pure: 60 s of batches at 100 tokens/s with 3 % noise and RSS growing 1 MiB a minute."""
    rng = np.random.default_rng(7)
    points = [
        {"t_s": i * 0.5, "wall_s": 0.5, "tokens": int(50 * (1 + rng.normal(0, 0.03))), "rss_bytes": 10**8 + i * 8738}
        for i in range(120)
    ]
    s = sustained.analyse(points, 60.0)
    assert s["window_s"] == 0.5 and len(s["windows"]) == 120
    assert s["change_points"] == []
    rss = s["rss_slope_bytes_per_min"]
    assert rss["low"] <= rss["slope"] <= rss["high"] and rss["slope"] == pytest.approx(8738 * 120, rel=0.01)
    short = sustained.analyse(points[:8], 60.0)
    assert short["change_points"] is None and "need at least" in short["change_points_note"]


def test_each_route_gets_the_meters_of_the_devices_its_stages_ran_on(tmp_path: Path, monkeypatch):
    """The CPU EP's route: the CPU packages' RAPL (here: none, and why); a WebGPU stage the EP
    devices do not place: the GPU's NVML (here: not available, and why); a plain session: none."""

    def route_cell(label: str, ep: str) -> CellSpec:
        route = Route(label, label, label, (StageRoute("decoder", (), CPU, ep),))
        return CellSpec(label, fake_spec(), 8, 4, PromptSpec(), WarmupPolicy(count=0), IterationPolicy(), route=route)

    cells = [route_cell("config", "CPUExecutionProvider"), route_cell("ep=webgpu", "WebGpuExecutionProvider")]
    monkeypatch.setattr(meters, "POWERCAP", tmp_path / "no-powercap")
    monkeypatch.setattr(meters, "nvidia_gpus", lambda: [meters.FakeMeter(covers="GPU 0 board", why_not="no NVML here")])
    found, notes = route_meters(cells, FAKE_ENV)
    assert found == {}
    assert notes["config"]["why_not"].startswith("no RAPL zone under")
    assert notes["ep=webgpu"]["why_not"] == "GPU 0 board: no NVML here"
    monkeypatch.setattr(meters, "nvidia_gpus", lambda: [meters.FakeMeter(covers="GPU 0 board")])
    found, notes = route_meters(cells, FAKE_ENV)
    assert list(found) == ["ep=webgpu"] and notes["ep=webgpu"]["devices"] == ["gpu"]
    plain = CellSpec(
        "config", fake_spec(runtime="winml"), None, None, PromptSpec(), WarmupPolicy(count=0), IterationPolicy()
    )
    assert "generation sessions only" in route_meters([plain], FAKE_ENV)[1]["config"]["why_not"]
