"""Environment, testbed id, git state, memory sampling and the roofline's inputs."""

from __future__ import annotations

import subprocess

import pytest

from winml_perf.measure.memory import MemorySampler, ru_maxrss_bytes
from winml_perf.record import environment, roofline


def test_collect_environment_has_what_records_need(monkeypatch, tmp_path):
    monkeypatch.delenv(environment.TESTBED_ENV, raising=False)
    env = environment.collect_environment(cwd=tmp_path, include_ep_devices=False)
    assert env["versions"]["onnxruntime"] and env["versions"]["onnxruntime-genai"] and env["versions"]["python"]
    assert env["versions"]["winml-perf"] is not None
    assert env["cpu"]["logical_cores"] >= 1 and env["cpu"]["model"]
    assert env["timestamp_utc"].endswith("Z") and env["testbed_id_source"] == "hash"
    assert len(env["testbed_id"]) == 12
    assert env["git"]["commit"] is None and env["git"]["note"] == "not a git working folder"
    assert "gpus" in env["gpu"]
    again = environment.collect_environment(cwd=tmp_path, include_ep_devices=False)
    assert again["testbed_id"] == env["testbed_id"]  # stable on one machine


def test_testbed_id_follows_the_hardware_and_can_be_overridden(monkeypatch):
    monkeypatch.delenv(environment.TESTBED_ENV, raising=False)
    cpu = {"model": "EPYC", "logical_cores": 2}
    a = environment.testbed_id("host", cpu, [], "Linux")
    assert a == environment.testbed_id("host", dict(cpu), [], "Linux")
    assert a != environment.testbed_id("host", {**cpu, "model": "Xeon"}, [], "Linux")
    assert a != environment.testbed_id("host", cpu, [{"name": "H200", "memory_total_bytes": 1}], "Linux")
    monkeypatch.setenv(environment.TESTBED_ENV, "lab-laptop-7")
    assert environment.testbed_id("host", cpu, [], "Linux") == "lab-laptop-7"


def test_git_state_reports_commit_and_dirty_flag(tmp_path):
    def git(*args):
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    git("init", "-q")
    (tmp_path / "f.txt").write_text("1")
    git("add", "f.txt")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    clean = environment.git_state(tmp_path)
    assert len(clean["commit"]) == 40 and clean["dirty"] is False
    (tmp_path / "f.txt").write_text("2")
    assert environment.git_state(tmp_path)["dirty"] is True


def test_memory_sampler_reports_peaks():
    with MemorySampler(interval_s=0.01, device=False) as sampler:
        block = bytearray(64 * 1024 * 1024)  # 64 MiB, touched
        block[::4096] = b"x" * len(block[::4096])
        snap = sampler.snapshot()
        del block
    assert snap["peak_rss_bytes"] >= 64 * 1024 * 1024
    assert snap["ru_maxrss_bytes"] >= snap["peak_rss_bytes"] * 0.9
    assert snap["device_memory_note"] == "device memory sampling was turned off"
    assert ru_maxrss_bytes() > 0


class _FakeNvml:
    """Just enough of pynvml (nvidia-ml-py) for the NVML code paths, without a GPU."""

    def __init__(self, used=(1000, 3000)):
        self.used = list(used)

    def nvmlInit(self):
        pass

    def nvmlDeviceGetCount(self):
        return 1

    def nvmlDeviceGetHandleByIndex(self, i):
        return f"gpu{i}"

    def nvmlDeviceGetMemoryInfo(self, h):
        value = self.used.pop(0) if len(self.used) > 1 else self.used[0]
        return type("Mem", (), {"used": value, "total": 141 * 2**30})()

    def nvmlDeviceGetComputeRunningProcesses(self, h):
        import os

        return [type("P", (), {"pid": os.getpid(), "usedGpuMemory": 500})()]

    def nvmlDeviceGetName(self, h):
        return "NVIDIA H200"

    def nvmlSystemGetDriverVersion(self):
        return "580.159.03"


def test_device_memory_and_gpu_listing_through_nvml(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "pynvml", _FakeNvml(used=(1000, 3000, 2000)))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    sampler = MemorySampler(interval_s=10.0, device=True).start()
    try:
        sampler._sample()
        snap = sampler.snapshot()
    finally:
        sampler.stop()
    assert snap["device_memory_peak_used_bytes"] == 3000 and snap["device_memory_peak_process_bytes"] == 500
    gpu = environment.gpu_info()
    assert gpu["gpus"][0]["name"] == "NVIDIA H200" and gpu["gpus"][0]["driver"] == "580.159.03"
    assert gpu["gpus"][0]["source"] == "nvml"


def test_bandwidth_is_measured_once_and_cached(tmp_path, monkeypatch):
    # the bytes per step and the fraction: tests/unit/test_decode_bytes.py, test_decode_roofline.py
    monkeypatch.setenv(roofline.CACHE_ENV, str(tmp_path / "cache"))
    calls = []

    def fake_measure():
        calls.append(1)
        return {"bandwidth_bytes_per_s": 10e9, "method": "fake"}

    first = roofline.cached_bandwidth(measure=fake_measure)
    second = roofline.cached_bandwidth(measure=fake_measure)
    assert (first["cache"], second["cache"], len(calls)) == ("miss", "hit", 1)
    assert second["bandwidth_bytes_per_s"] == 10e9 and second["method"] == "fake"
    assert roofline.cached_bandwidth(measure=fake_measure, refresh=True)["cache"] == "miss" and len(calls) == 2


def test_measure_bandwidth_gives_a_positive_rate():
    out = roofline.measure_bandwidth(array_bytes=8 * 1024 * 1024, repeats=2, threads=2)
    assert out["bandwidth_bytes_per_s"] > 0 and out["threads"] == 2


def test_environment_records_the_qnn_plugin_and_sdk_versions():
    qnn = pytest.importorskip("onnxruntime_qnn")
    from winml_perf.record.environment import collect_environment

    env = collect_environment()
    assert env["versions"]["onnxruntime-qnn"] == qnn.build_and_package_info.__version__
    (plugin,) = [p for p in env["plugin_eps"]["plugins"] if p["ep_name"] == "QNNExecutionProvider"]
    assert plugin["package"] == "onnxruntime-qnn" and plugin["sdk_version"] == qnn.build_and_package_info.qnn_version
    assert plugin["library_sha256"] and plugin["library_path"] == qnn.get_library_path()
    (device,) = [d for d in env["ep_devices"]["devices"] if d["ep_name"] == "QNNExecutionProvider"]
    assert device["emulated"] is True  # x86: the HTP emulator
