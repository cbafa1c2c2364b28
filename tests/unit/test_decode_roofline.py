"""The decode roofline: which device each stage reads from, the bound summed over devices, and a
fraction above 1 refused as the bug it is."""

from __future__ import annotations

import json
import sys
from types import SimpleNamespace

import pytest

from tests.conftest import BUNDLES, TINY_FLAT
from winml_perf.bundle.decode_bytes import decode_bytes
from winml_perf.model.route import Route, StageRoute
from winml_perf.record import device_bandwidth as B
from winml_perf.record import roofline as host_probe
from winml_perf.record.decode_roofline import HOST, NVIDIA_GPU, RooflineExceeded, bound_fraction, decode_roofline

WEBGPU, CPU, QNN = "WebGpuExecutionProvider", "CPUExecutionProvider", "QNNExecutionProvider"


def _env(*rows, gpus=()):
    return {
        "ep_devices": {"devices": [dict(zip(("ep_name", "device_type", "vendor_id"), r)) for r in rows]},
        "gpu": {"gpus": [{"vendor": "NVIDIA", "name": g} for g in gpus]},
    }


def test_stage_devices_follow_the_ep_device_listing():
    lavapipe = _env((CPU, "cpu", 0x8086), (WEBGPU, "cpu", 0x10005))
    h200 = _env((CPU, "cpu", 0x8086), (WEBGPU, "gpu", 0x10DE), gpus=["NVIDIA H200"])
    assert B.stage_device(CPU, h200).device == HOST
    assert B.stage_device("webgpu", lavapipe).device == HOST  # software Vulkan reads host memory
    assert B.stage_device("webgpu", h200).device == NVIDIA_GPU
    qnn = B.stage_device(QNN, _env((QNN, "cpu", 0x1022)))
    assert (qnn.device, qnn.emulated) == (HOST, True) and "emulat" in qnn.label
    assert B.stage_device("CUDAExecutionProvider", _env(gpus=["NVIDIA H200"])).device == NVIDIA_GPU
    assert B.stage_device("CUDAExecutionProvider", _env()).device == B.UNKNOWN  # no NVIDIA GPU here
    assert B.stage_device(QNN, _env((QNN, "npu", 0x5143))).device == B.UNKNOWN
    assert B.stage_device(None, h200).device == B.UNKNOWN


def test_bound_fraction_refuses_a_step_faster_than_the_bound():
    assert bound_fraction(1e-3, 500.0) == pytest.approx(0.5)
    with pytest.raises(RooflineExceeded, match="1.200x its memory bound"):  # four digits (issue 38)
        bound_fraction(1e-3, 1200.0)
    with pytest.raises(RooflineExceeded):
        bound_fraction(1e-3, 0.0)


def _pipeline_route(eps: dict[str, str], actual: dict[str, str] | None = None) -> Route:
    return Route("r", stages=tuple(StageRoute(s, (), None, ep) for s, ep in eps.items()), actual=actual)


def test_stages_on_two_devices_are_bounded_separately_and_add_up():
    db = decode_bytes(BUNDLES / "tiny-qwen2-pipeline", 16, 8)
    by_stage = {s.stage: s.total_bytes for s in db.stages}
    route = _pipeline_route({"embeddings": CPU, "context": WEBGPU, "iterator": WEBGPU, "lm_head": CPU})
    env = _env((CPU, "cpu", 0x8086), (WEBGPU, "gpu", 0x10DE), gpus=["NVIDIA H200"])
    bw = {
        HOST: {"bandwidth_bytes_per_s": 50e9, "method": "probe"},
        NVIDIA_GPU: {"bandwidth_bytes_per_s": 4.8e12, "method": "NVML"},
    }
    r = decode_roofline(100.0, str(BUNDLES / "tiny-qwen2-pipeline"), route, 16, 8, env, bw)
    bound_s = (by_stage["embeddings"] + by_stage["lm_head"]) / 50e9 + by_stage["iterator"] / 4.8e12
    assert r["bound_tokens_per_s"] == pytest.approx(1 / bound_s)
    assert r["fraction_of_bound"] == pytest.approx(100.0 * bound_s)
    assert {e["device"]: e["stages"] for e in r["devices"]} == {
        HOST: ["embeddings", "lm_head"],
        NVIDIA_GPU: ["iterator"],
    }
    assert r["bandwidth_bytes_per_s"] is None  # two devices: no single bandwidth to name
    assert "GB/s (host)" in r["bound"] and "(nvidia-gpu)" in r["bound"]
    assert r["weights_bytes_per_token"] == round(db.total_bytes) and r["bytes_per_step"] == db.to_dict()


def test_the_session_report_of_what_ran_wins_over_what_was_asked():
    route = _pipeline_route({"decoder": WEBGPU}, actual={"decoder": CPU})
    r = decode_roofline(
        100.0, str(TINY_FLAT), route, 16, 8, _env(), {HOST: {"bandwidth_bytes_per_s": 50e9, "method": "probe"}}
    )
    assert r["devices"][0]["device"] == HOST and r["bandwidth_source"] == "probe" and 0 < r["fraction_of_bound"] <= 1


def test_no_fraction_without_a_known_device_or_bandwidth_or_bytes(tmp_path):
    route = _pipeline_route({"decoder": WEBGPU})
    unknown = decode_roofline(100.0, str(TINY_FLAT), route, 16, 8, _env(), {HOST: {"bandwidth_bytes_per_s": 50e9}})
    assert (
        unknown["fraction_of_bound"] is None
        and "decoder" in unknown["note"]
        and unknown["bytes_per_step"]["total_bytes"] > 0
    )
    h200 = _env((WEBGPU, "gpu", 0x10DE), gpus=["NVIDIA H200"])
    no_gpu_figure = decode_roofline(
        100.0, str(TINY_FLAT), route, 16, 8, h200, {HOST: {"bandwidth_bytes_per_s": 50e9}, NVIDIA_GPU: None}
    )
    assert no_gpu_figure["fraction_of_bound"] is None and "nvidia-gpu bandwidth is not known" in no_gpu_figure["note"]
    not_a_bundle = decode_roofline(100.0, str(tmp_path), route, 16, 8, h200, {})
    assert not_a_bundle["fraction_of_bound"] is None and not_a_bundle["note"].startswith("not computed:")


def test_a_fraction_above_one_is_flagged_not_recorded():
    route = _pipeline_route({"decoder": CPU})
    r = decode_roofline(
        1e9, str(TINY_FLAT), route, 16, 8, _env(), {HOST: {"bandwidth_bytes_per_s": 50e9, "method": "probe"}}
    )
    assert r["fraction_of_bound"] is None and r["exceeds_bound_fraction"] > 1 and r["note"].startswith("bug:")


class _FakeNvml:
    NVML_CLOCK_MEM = 2

    def nvmlInit(self):
        pass

    def nvmlDeviceGetHandleByIndex(self, i):
        return i

    def nvmlDeviceGetMaxClockInfo(self, h, kind):
        assert kind == self.NVML_CLOCK_MEM
        return 3201

    def nvmlDeviceGetMemoryBusWidth(self, h):
        return 6144

    def nvmlDeviceGetName(self, h):
        return "NVIDIA H200"


def test_nvidia_bandwidth_is_the_nvml_peak_with_the_copy_beside_it_and_cached(tmp_path, monkeypatch):
    monkeypatch.setenv(host_probe.CACHE_ENV, str(tmp_path))
    monkeypatch.setitem(sys.modules, "pynvml", _FakeNvml())
    assert B.nvml_peak()["peak_bytes_per_s"] == 3201e6 * 2 * 6144 / 8
    copies = []
    first = B.nvidia_bandwidth(copy=lambda: copies.append(1) or {"copy_bytes_per_s": 4.0e12, "name": "NVIDIA H200"})
    assert first["bandwidth_bytes_per_s"] == 3201e6 * 2 * 6144 / 8 and first["copy"]["copy_bytes_per_s"] == 4.0e12
    assert "3201 MHz x 6144 bit x 2" in first["method"] and first["cache"] == "miss"
    assert B.nvidia_bandwidth(copy=lambda: copies.append(1))["cache"] == "hit" and len(copies) == 1


def test_nvidia_bandwidth_falls_back_to_the_copy_and_says_so(tmp_path, monkeypatch):
    monkeypatch.setenv(host_probe.CACHE_ENV, str(tmp_path))
    out = B.nvidia_bandwidth(peak=lambda: None, copy=lambda: {"copy_bytes_per_s": 3.9e12, "name": "GPU"})
    assert out["bandwidth_bytes_per_s"] == 3.9e12 and "no NVML peak" in out["method"]
    neither = B.nvidia_bandwidth(peak=lambda: None, copy=lambda: None)  # cached figure kept from the call above
    assert neither["bandwidth_bytes_per_s"] == 3.9e12
    monkeypatch.setenv(host_probe.CACHE_ENV, str(tmp_path / "fresh"))
    assert B.nvidia_bandwidth(peak=lambda: None, copy=lambda: None)["bandwidth_bytes_per_s"] is None


def test_a_step_that_fits_in_the_caches_is_bounded_by_the_faster_working_set_probe():
    assert B.working_set_bytes(1000) == B.WORKING_SET_MIN_BYTES and B.working_set_bytes(300_000) == 512 << 10
    assert B.working_set_bytes(B.CACHE_RESIDENT_BYTES) is None  # too big for any cache: the DRAM probe bounds it
    route, dram = _pipeline_route({"decoder": CPU}), {"bandwidth_bytes_per_s": 10e9, "method": "dram"}
    sizes = []
    fast = decode_roofline(
        1000.0,
        str(TINY_FLAT),
        route,
        16,
        8,
        _env(),
        {HOST: dram},
        working_set=lambda n: sizes.append(n) or {"bandwidth_bytes_per_s": 40e9, "method": "working set"},
    )
    assert sizes == [fast["devices"][0]["bytes"]] and fast["bandwidth_source"] == "working set"
    assert fast["fraction_of_bound"] == pytest.approx(1000.0 * sizes[0] / 40e9) and "CPU caches" in fast["note"]
    slow = decode_roofline(
        1000.0,
        str(TINY_FLAT),
        route,
        16,
        8,
        _env(),
        {HOST: dram},
        working_set=lambda n: {"bandwidth_bytes_per_s": 1e9, "method": "working set"},
    )
    assert slow["bandwidth_source"] == "dram"  # the faster figure is the bound


def test_the_working_set_probe_reads_at_a_positive_rate():
    out = B.measure_working_set(B.WORKING_SET_MIN_BYTES, repeats=1, threads=2)
    assert out["bandwidth_bytes_per_s"] > 0 and out["array_bytes"] == B.WORKING_SET_MIN_BYTES and out["threads"] == 2
    in_child = B.working_set_bandwidth(1000)  # the same probe through winml_perf.ep.child, once per size per process
    assert in_child["bandwidth_bytes_per_s"] > 0 and in_child["array_bytes"] == B.WORKING_SET_MIN_BYTES
    assert B.working_set_bandwidth(2000) is in_child and B.working_set_bandwidth(B.CACHE_RESIDENT_BYTES) is None


def test_the_working_set_figure_is_measured_once_per_machine_and_size(tmp_path, monkeypatch):
    monkeypatch.setenv(host_probe.CACHE_ENV, str(tmp_path))
    monkeypatch.setattr(B, "_WORKING_SET_FIGURES", {})
    probes = []

    def probe(module, argv, context, timeout_s):
        probes.append(int(argv[1]))
        figure = {"bandwidth_bytes_per_s": 5e10 + len(probes), "array_bytes": int(argv[1]), "method": "fake"}
        return SimpleNamespace(ok=True, stdout=json.dumps(figure) + "\n", failure=lambda: "")

    monkeypatch.setattr(B.child, "run_module", probe)
    first = B.working_set_bandwidth(1000)
    assert probes == [B.WORKING_SET_MIN_BYTES] and first["cache"] == "miss"
    monkeypatch.setattr(B, "_WORKING_SET_FIGURES", {})  # a later process on the same machine
    again = B.working_set_bandwidth(2000)
    assert probes == [B.WORKING_SET_MIN_BYTES] and again["cache"] == "hit"
    assert again["bandwidth_bytes_per_s"] == first["bandwidth_bytes_per_s"]
    B.working_set_bandwidth(600_000)  # another size is measured, the first one stays cached
    monkeypatch.setattr(B, "_WORKING_SET_FIGURES", {})
    assert B.working_set_bandwidth(1000)["cache"] == "hit" and probes == [B.WORKING_SET_MIN_BYTES, 1 << 20]
    monkeypatch.setattr(B, "machine_key", lambda: "another machine")
    monkeypatch.setattr(B, "_WORKING_SET_FIGURES", {})
    assert B.working_set_bandwidth(1000)["cache"] == "miss" and len(probes) == 3
