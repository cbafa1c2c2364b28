"""`winml devices` end to end, as a subprocess over the real onnxruntime."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.e2e


def _winml(*args: str, env_extra: dict | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, **(env_extra or {})}
    env.pop("WINML_PERF_EP_LIBRARIES", None)
    return subprocess.run(
        [sys.executable, "-m", "winml_perf", *args], capture_output=True, text=True, timeout=120, env=env
    )


def test_devices_json_lists_cpu_ep():
    result = _winml("devices", "--format", "json")
    assert result.returncode == 0, result.stderr
    payload = json.loads(result.stdout)  # stdout is pure JSON
    cpu = [d for d in payload["devices"] if d["ep_name"] == "CPUExecutionProvider"]
    assert cpu and cpu[0]["device_type"] == "cpu" and cpu[0]["source"] == "builtin"
    assert cpu[0]["serves"] == ["cpu"]
    for plugin in payload["plugins"]:
        assert os.path.isfile(plugin["library_path"]) and plugin["registration_ms"] >= 0


def test_devices_missing_ep_library_exits_2(tmp_path):
    missing = tmp_path / "libnothere.so"
    result = _winml("devices", "--ep-library", f"AcmeExecutionProvider={missing}")
    assert result.returncode == 2
    assert str(missing) in result.stderr and "not found" in result.stderr


def test_software_webgpu_listed_as_plugin_serving_no_class():
    pytest.importorskip("onnxruntime_ep_webgpu")
    result = _winml("devices", "--format", "json", env_extra={"ORT_WEBGPU_EP_ALLOW_SOFTWARE_ADAPTER": "1"})
    assert result.returncode == 0, result.stderr
    payload = json.loads(result.stdout)
    webgpu = [d for d in payload["devices"] if d["ep_name"] == "WebGpuExecutionProvider"]
    assert webgpu and all(d["source"] == "plugin" and d["library_path"] for d in webgpu)
    for d in webgpu:  # a software adapter reports a cpu-type device: it must not count as a gpu
        assert d["serves"] == ([] if d["device_type"] != "gpu" else ["gpu"])
