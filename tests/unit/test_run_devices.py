"""record/device_bandwidth.py run_devices: each generation route's stage devices and the bandwidths
the roofline needs, decided once per run: the energy meters read the devices, the records the bandwidths."""

from __future__ import annotations

from tests.unit.fakes import fake_spec
from winml_perf.measure import sweep
from winml_perf.model.route import CPU, Route, StageRoute
from winml_perf.model.spec import CellSpec, IterationPolicy, PromptSpec, WarmupPolicy
from winml_perf.record import device_bandwidth as B
from winml_perf.record import roofline

CUDA = "CUDAExecutionProvider"
H200 = {"ep_devices": {"devices": []}, "gpu": {"gpus": [{"vendor": "NVIDIA", "name": "NVIDIA H200"}]}}


def _cell(label: str, ep: str, prompt_tokens: int = 8, token_based: bool = True) -> CellSpec:
    route = Route(label, label, label, (StageRoute("decoder", (), CPU, ep),))
    spec = fake_spec() if token_based else fake_spec(runtime="winml")
    shape = (prompt_tokens, 4) if token_based else (None, None)
    return CellSpec(label, spec, *shape, PromptSpec(), WarmupPolicy(count=0), IterationPolicy(), route=route)


def _probes(monkeypatch) -> list[str]:
    probed: list[str] = []
    monkeypatch.setattr(roofline, "cached_bandwidth", lambda: probed.append("host") or {"bandwidth_bytes_per_s": 1e10})
    monkeypatch.setattr(B, "nvidia_bandwidth", lambda: probed.append("gpu") or {"bandwidth_bytes_per_s": 3e12})
    return probed


def test_each_route_stage_device_is_decided_once_with_the_bandwidths_it_needs(monkeypatch):
    probed = _probes(monkeypatch)
    asked: list[str | None] = []
    real = B.stage_device
    monkeypatch.setattr(B, "stage_device", lambda ep, env: asked.append(ep) or real(ep, env))
    cells = [_cell("cuda", CUDA, 8), _cell("cuda", CUDA, 16), _cell("cpu", "CPUExecutionProvider")]
    devices = B.run_devices(cells, H200)
    assert asked == [CUDA, "CPUExecutionProvider"]  # once per route, not per cell
    assert devices.routes["cuda"][0][1].device == B.NVIDIA_GPU and devices.routes["cpu"][0][1].device == B.HOST
    assert probed == ["host", "gpu"]
    assert devices.host == {"bandwidth_bytes_per_s": 1e10} and devices.gpu == {"bandwidth_bytes_per_s": 3e12}
    meters, notes = sweep._meters_of(cells, devices.routes, None)  # the meters read the same decision
    assert asked == [CUDA, "CPUExecutionProvider"] and set(notes) == {"cuda", "cpu"}


def test_without_a_roofline_or_a_gpu_stage_nothing_is_probed(monkeypatch):
    probed = _probes(monkeypatch)
    assert B.run_devices([_cell("cuda", CUDA)], H200, roofline=False).host is None
    cpu_only = B.run_devices([_cell("cpu", "CPUExecutionProvider")], H200)
    assert cpu_only.gpu is None and probed == ["host"]
    plain = B.run_devices([_cell("config", CPU, token_based=False)], H200)
    assert plain.routes == {} and plain.host is None and probed == ["host"]


def test_a_failing_probe_is_a_note_not_a_failed_run(monkeypatch):
    def broken() -> dict:
        raise OSError("no numpy child")

    monkeypatch.setattr(roofline, "cached_bandwidth", broken)
    devices = B.run_devices([_cell("cpu", "CPUExecutionProvider")], H200)
    assert devices.host == {"bandwidth_bytes_per_s": None, "method": None, "error": "OSError: no numpy child"}
