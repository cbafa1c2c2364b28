"""Where a measurement ran: versions, OS, CPU, GPU and driver, EP devices, git state, testbed id.

``collect_environment()`` is called once per run, outside any timing. Every probe that can fail
(no NVML, no nvidia-smi, no git) leaves a note instead of a value; nothing here raises.
"""

from __future__ import annotations

import hashlib
import os
import platform
import socket
import sys
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from winml_perf.ep import child
from winml_perf.ep import table as eps

TESTBED_ENV = "WINML_PERF_TESTBED"
RUNTIMES = ("onnxruntime", "onnxruntime-genai")  # each installed by any of its builds (GPU / NPU builds)
#: The plugin EPs whose package versions every record names (their packages: the EP table).
RECORDED_PLUGINS = ("webgpu", "qnn")
PACKAGES = ("winml-perf", *RUNTIMES, *(str(eps.ep_info(a).install_package) for a in RECORDED_PLUGINS), "numpy")
SUBPROCESS_TIMEOUT_S = 5.0


def package_versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for name in PACKAGES:
        for dist in eps.runtime_distributions(name) if name in RUNTIMES else (name,):
            try:
                out[name] = metadata.version(dist) if dist == name else f"{metadata.version(dist)} ({dist})"
                break
            except metadata.PackageNotFoundError:
                continue
        else:
            out[name] = None
    out["python"] = platform.python_version()
    return out


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            if line.lower().startswith(("model name", "hardware", "processor\t: ")) and ":" in line:
                value = line.split(":", 1)[1].strip()
                if value and not value.isdigit():
                    return value
    except OSError:
        pass
    if sys.platform == "darwin":
        try:
            return (
                child.run_command(["sysctl", "-n", "machdep.cpu.brand_string"], SUBPROCESS_TIMEOUT_S).stdout.strip()
                or platform.processor()
            )
        except OSError:
            pass
    return platform.processor() or platform.machine()


def cpu_info() -> dict[str, Any]:
    import psutil

    return {
        "model": cpu_model(),
        "arch": platform.machine(),
        "physical_cores": psutil.cpu_count(logical=False),
        "logical_cores": psutil.cpu_count(logical=True),
        "affinity_cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "memory_total_bytes": int(psutil.virtual_memory().total),
    }


def _gpus_nvml() -> list[dict[str, Any]] | None:
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
        driver = pynvml.nvmlSystemGetDriverVersion()
        gpus = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            name = pynvml.nvmlDeviceGetName(h)
            gpus.append(
                {
                    "index": i,
                    "name": name.decode() if isinstance(name, bytes) else name,
                    "vendor": "NVIDIA",
                    "driver": driver.decode() if isinstance(driver, bytes) else driver,
                    "memory_total_bytes": int(pynvml.nvmlDeviceGetMemoryInfo(h).total),
                    "source": "nvml",
                }
            )
        return gpus
    except Exception:
        return None


def _gpus_nvidia_smi() -> list[dict[str, Any]] | None:
    try:
        proc = child.run_command(
            ["nvidia-smi", "--query-gpu=index,name,driver_version,memory.total", "--format=csv,noheader,nounits"],
            SUBPROCESS_TIMEOUT_S,
        )
    except OSError:
        return None
    if not proc.ok:
        return None
    gpus = []
    for line in proc.stdout.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) >= 4:
            mem = int(float(parts[3]) * 1024 * 1024) if parts[3].replace(".", "").isdigit() else None
            gpus.append(
                {
                    "index": int(parts[0]),
                    "name": parts[1],
                    "vendor": "NVIDIA",
                    "driver": parts[2],
                    "memory_total_bytes": mem,
                    "source": "nvidia-smi",
                }
            )
    return gpus


def gpu_info() -> dict[str, Any]:
    gpus = _gpus_nvml()
    if gpus is None:
        gpus = _gpus_nvidia_smi()
    if gpus is None:
        return {"gpus": [], "note": "no NVIDIA GPU visible (neither NVML nor nvidia-smi answered)"}
    return {"gpus": gpus}


def ep_devices() -> dict[str, Any]:
    """EP devices as winml_perf.ep.devices lists them (built-in and registered plugins)."""
    try:
        from winml_perf.ep.devices import list_ep_devices

        rows = []
        for d in list_ep_devices():
            rows.append(d.to_dict() if hasattr(d, "to_dict") else {k: getattr(d, k) for k in vars(d)})
        return {"devices": rows, "source": "winml_perf.ep.devices"}
    except ImportError:
        pass
    except Exception as exc:
        return {"devices": [], "note": f"listing EP devices failed: {type(exc).__name__}: {exc}"}
    try:
        import onnxruntime as ort

        rows = [
            {
                "ep_name": d.ep_name,
                "ep_vendor": d.ep_vendor,
                "device_type": str(d.device.type).split(".")[-1].lower(),
                "hw_vendor": d.device.vendor,
                "vendor_id": d.device.vendor_id,
                "device_id": d.device.device_id,
            }
            for d in ort.get_ep_devices()
        ]
        return {"devices": rows, "source": "onnxruntime.get_ep_devices"}
    except Exception as exc:
        return {"devices": [], "note": f"listing EP devices failed: {type(exc).__name__}: {exc}"}


def plugin_eps() -> dict[str, Any]:
    """Each registered plugin EP library: package, version, SDK version (QNN SDK for onnxruntime-qnn), sha256."""
    try:
        from winml_perf.ep.plugins import plugin_identities

        return {"plugins": plugin_identities()}
    except Exception as exc:
        return {"plugins": [], "note": f"identifying plugin EPs failed: {type(exc).__name__}: {exc}"}


def git_state(cwd: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """Commit and dirty flag of the git working folder at ``cwd``, if it is one."""

    def git(*args: str) -> child.ChildResult:
        return child.run_command(["git", *args], SUBPROCESS_TIMEOUT_S, cwd)

    try:
        head = git("rev-parse", "HEAD")
        if head.exit.timed_out:
            return {"commit": None, "dirty": None, "note": f"git unavailable: it {head.exit.text}"}
        if not head.ok:
            return {"commit": None, "dirty": None, "note": "not a git working folder"}
        status = git("status", "--porcelain", "--untracked-files=no")
        branch = git("rev-parse", "--abbrev-ref", "HEAD")
    except OSError as exc:
        return {"commit": None, "dirty": None, "note": f"git unavailable: {exc}"}
    return {
        "commit": head.stdout.strip(),
        "dirty": bool(status.stdout.strip()),
        "branch": branch.stdout.strip() or None,
    }


def testbed_id(hostname: str, cpu: Mapping[str, Any], gpus: Sequence[Mapping[str, Any]], os_name: str) -> str:
    """Stable id of a machine: sha256 of what makes its numbers comparable (12 hex digits);
    WINML_PERF_TESTBED overrides it (e.g. to name a fleet machine)."""
    override = os.environ.get(TESTBED_ENV)
    if override:
        return override
    parts = [hostname, cpu.get("model") or "", str(cpu.get("logical_cores")), os_name]
    parts += sorted(f"{g.get('name')}|{g.get('memory_total_bytes')}" for g in gpus)
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:12]


def collect_environment(cwd: str | os.PathLike[str] | None = None, include_ep_devices: bool = True) -> dict[str, Any]:
    hostname = socket.gethostname()
    cpu = cpu_info()
    gpu = gpu_info()
    os_info = {
        "system": platform.system(),
        "release": platform.release(),
        "version": platform.version(),
        "platform": platform.platform(),
    }
    env: dict[str, Any] = {
        "timestamp_utc": datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
        "hostname": hostname,
        "testbed_id": testbed_id(hostname, cpu, gpu["gpus"], os_info["system"]),
        "testbed_id_source": "env" if os.environ.get(TESTBED_ENV) else "hash",
        "versions": package_versions(),
        "os": os_info,
        "cpu": cpu,
        "gpu": gpu,
        "git": git_state(cwd),
        "cwd": str(Path(cwd or os.getcwd()).resolve()),
    }
    if include_ep_devices:
        env["ep_devices"] = ep_devices()
        env["plugin_eps"] = plugin_eps()
    return env
