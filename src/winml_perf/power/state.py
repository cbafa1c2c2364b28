"""The power state a cell ran in: CPU governor and frequency, GPU clocks, power limit and
performance state (NVML), EP performance modes the route sets, AC or battery.

Read outside any timing, once at a cell's start. Each probe the host cannot answer is left out
with a note; nothing here raises. ``differences`` compares two states on the keys that change
speed, for the warning that interleaved routes ran in different states.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from winml_perf.support.optional import DEPENDENCIES

CPUFREQ = Path("/sys/devices/system/cpu")
POWER_SUPPLY = Path("/sys/class/power_supply")
#: Provider-option keys by which an EP picks a performance mode (QNN's HTP; OpenVINO's hint).
PERFORMANCE_OPTION_KEYS = ("htp_performance_mode", "performance_mode", "PERFORMANCE_HINT", "power_mode")
#: The keys whose difference between two routes' states is worth a warning.
COMPARED = ("cpu.governor", "gpu.pstate", "gpu.power_limit_w", "power_source")


def _text(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def cpu_state(root: Path = CPUFREQ) -> dict[str, Any]:
    """Governors in use and current frequencies (MHz) over the CPUs that expose cpufreq."""
    dirs = sorted(root.glob("cpu[0-9]*/cpufreq"))
    if not dirs:
        return {"note": f"no cpufreq under {root} (the host or container hides CPU frequency control)"}
    governors = sorted({g for d in dirs if (g := _text(d / "scaling_governor"))})
    khz = [int(f) for d in dirs if (f := _text(d / "scaling_cur_freq")) and f.isdigit()]
    out: dict[str, Any] = {"governor": ",".join(governors) or None, "cpus": len(dirs)}
    if khz:
        out.update(freq_mhz_min=min(khz) / 1000, freq_mhz_max=max(khz) / 1000)
    return out


def gpu_state(index: int = 0) -> dict[str, Any]:
    """NVML's clocks, power limit, performance state and throttle reasons of GPU ``index``."""
    try:
        import pynvml
    except ImportError:
        return {"note": f"pynvml is not installed ({DEPENDENCIES['pynvml'].install})"}
    try:
        pynvml.nvmlInit()
        h = pynvml.nvmlDeviceGetHandleByIndex(index)
    except Exception as exc:
        return {"note": f"NVML unavailable: {exc}"}
    out: dict[str, Any] = {"index": index}
    probes: dict[str, Callable[[], object]] = {
        "sm_clock_mhz": lambda: pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM),
        "mem_clock_mhz": lambda: pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_MEM),
        "power_limit_w": lambda: pynvml.nvmlDeviceGetEnforcedPowerLimit(h) / 1000.0,
        "power_w": lambda: pynvml.nvmlDeviceGetPowerUsage(h) / 1000.0,
        "pstate": lambda: f"P{pynvml.nvmlDeviceGetPerformanceState(h)}",
        "temperature_c": lambda: pynvml.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU),
        "throttle_reasons": lambda: int(pynvml.nvmlDeviceGetCurrentClocksEventReasons(h)),
    }
    for key, probe in probes.items():
        try:
            out[key] = probe()
        except Exception as exc:  # NotSupported on some boards
            out.setdefault("unsupported", []).append(f"{key}: {exc}")
    return out


def power_source(root: Path = POWER_SUPPLY) -> dict[str, Any]:
    """AC online and battery capacity where the OS reports them."""
    if not root.is_dir() or not any(root.iterdir()):
        return {"note": f"no power supply under {root} (the OS does not say AC or battery)"}
    out: dict[str, Any] = {}
    for d in sorted(root.iterdir()):
        kind = _text(d / "type")
        if kind == "Mains":
            out["ac_online"] = _text(d / "online") == "1"
        elif kind == "Battery":
            out["battery_status"] = _text(d / "status")
            cap = _text(d / "capacity")
            out["battery_percent"] = int(cap) if cap and cap.isdigit() else None
    return out


def ep_performance_modes(provider_options: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """The performance-mode options among a route's provider options ({key: value})."""
    out: dict[str, str] = {}
    for opts in provider_options:
        for key, value in opts.items():
            if isinstance(value, Mapping):
                out.update(ep_performance_modes([value]))
            elif key in PERFORMANCE_OPTION_KEYS:
                out[key] = str(value)
    return out


def power_state(provider_options: Iterable[Mapping[str, Any]] = (), gpu: bool = False) -> dict[str, Any]:
    """The whole state; the GPU's only when the route runs on one (NVML is slow to start)."""
    source = power_source()
    state: dict[str, Any] = {"cpu": cpu_state(), "ep_modes": ep_performance_modes(provider_options)}
    if gpu:
        state["gpu"] = gpu_state()
    state["power_source"] = None if "note" in source else ("AC" if source.get("ac_online", True) else "battery")
    state["supply"] = source
    return state


def _get(state: Mapping[str, Any], dotted: str) -> Any:
    node: Any = state
    for part in dotted.split("."):
        node = node.get(part) if isinstance(node, Mapping) else None
    return node


def differences(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, tuple[Any, Any]]:
    """The compared keys on which two states both have a value and differ."""
    out = {}
    for key in COMPARED:
        x, y = _get(a, key), _get(b, key)
        if x is not None and y is not None and x != y:
            out[key] = (x, y)
    return out
