"""Energy meters behind one protocol: a cumulative counter in joules and what it covers.

A meter says what it covers ("GPU 0 board", "CPU package 0"), its resolution (the smallest step of
its counter, J) and its update period (how often the counter moves, s). ``available()`` is None or
the reason it cannot be read here; nothing falls back to an estimate. Windows' Energy Meter
Interface or Apple's IOReport plug in as one more class with these members (docs/energy.md).

Meters are picklable until first read (an isolated child opens its own handle).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from winml_perf.support.optional import DEPENDENCIES

#: NVML's total-energy counter moves about every 100 ms (measured on the H200 host, issue 29); 1 mJ units.
NVML_UPDATE_PERIOD_S = 0.1
NVML_RESOLUTION_J = 0.001
#: RAPL counters move about every millisecond; energy_uj is in microjoules.
RAPL_UPDATE_PERIOD_S = 0.001
RAPL_RESOLUTION_J = 1e-6
POWERCAP = Path("/sys/class/powercap")


@runtime_checkable
class EnergyMeter(Protocol):
    name: str  # "nvml", "rapl", "fake", ...
    covers: str  # what the counter measures: "GPU 0 board", "CPU package 0"
    resolution_j: float
    update_period_s: float

    def available(self) -> str | None:
        """None when the meter can be read here, else why not."""

    def read(self) -> float:
        """The cumulative counter, in joules (monotonic while the meter is available)."""


class NvmlMeter:
    """NVML's total energy of one NVIDIA GPU since the driver loaded (nvmlDeviceGetTotalEnergyConsumption, mJ)."""

    name = "nvml"
    resolution_j = NVML_RESOLUTION_J
    update_period_s = NVML_UPDATE_PERIOD_S

    def __init__(self, index: int = 0) -> None:
        self.index = index
        self.covers = f"GPU {index} board"
        self._handle: Any = None
        self._nvml: Any = None
        self._why_not: str | None = None
        self._opened = False

    def __getstate__(self) -> dict[str, Any]:
        return {"index": self.index, "covers": self.covers}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["index"])  # type: ignore[misc]

    def _open(self) -> None:
        if self._opened:
            return
        self._opened = True
        try:
            import pynvml  # nvidia-ml-py, the optional extra "energy"
        except ImportError:
            self._why_not = f"pynvml is not installed ({DEPENDENCIES['pynvml'].install})"
            return
        try:
            pynvml.nvmlInit()
            handle = pynvml.nvmlDeviceGetHandleByIndex(self.index)
            pynvml.nvmlDeviceGetTotalEnergyConsumption(handle)
        except Exception as exc:  # NVMLError_LibraryNotFound, NotSupported (pre-Volta), no such GPU
            self._why_not = f"NVML cannot read GPU {self.index}'s energy counter: {exc}"
            return
        self._nvml, self._handle = pynvml, handle

    def available(self) -> str | None:
        self._open()
        return self._why_not

    def read(self) -> float:
        self._open()
        if self._handle is None:
            raise RuntimeError(self._why_not or "NVML meter not open")
        return float(self._nvml.nvmlDeviceGetTotalEnergyConsumption(self._handle)) / 1000.0


class RaplMeter:
    """A RAPL zone's energy_uj under /sys/class/powercap, unwrapped at max_energy_range_uj."""

    name = "rapl"
    resolution_j = RAPL_RESOLUTION_J
    update_period_s = RAPL_UPDATE_PERIOD_S

    def __init__(self, zone: Path) -> None:
        self.zone = Path(zone)
        label = _read_text(self.zone / "name") or self.zone.name
        self.covers = f"CPU {label.replace('-', ' ')}" if label.startswith("package") else f"RAPL {label}"
        self._last_uj: int | None = None
        self._wraps = 0

    def _range_uj(self) -> int:
        return int(_read_text(self.zone / "max_energy_range_uj") or 0)

    def available(self) -> str | None:
        try:
            int((self.zone / "energy_uj").read_text())
            self._range_uj()
        except (OSError, ValueError) as exc:
            return f"{self.zone / 'energy_uj'} is not readable: {exc.__class__.__name__}: {exc}"
        return None

    def read(self) -> float:
        uj = int((self.zone / "energy_uj").read_text())
        if self._last_uj is not None and uj < self._last_uj:
            span = self._range_uj()
            # the counter passed max_energy_range_uj and restarted at 0: it fell by most of its range.
            # A smaller fall is a counter running backwards: left as it reads, so the cell's energy
            # section sees a negative reading and says "not measured" (power/accounting.py)
            if span > 0 and self._last_uj - uj > span // 2:
                self._wraps += 1
        self._last_uj = uj
        return (self._wraps * self._range_uj() + uj) * 1e-6


class FakeMeter:
    """A meter for tests: the counter is ``power_w`` x time on a clock the test moves, stepped at
    ``update_period_s`` and rounded to ``resolution_j``. ``power_w`` may change between reads."""

    name = "fake"

    def __init__(
        self,
        power_w: float = 10.0,
        *,
        update_period_s: float = 0.1,
        resolution_j: float = 0.001,
        covers: str = "fake device",
        clock: Any = None,
        why_not: str | None = None,
    ) -> None:
        import time

        self.power_w = power_w
        self.update_period_s = update_period_s
        self.resolution_j = resolution_j
        self.covers = covers
        self.clock = clock or time.perf_counter
        self.why_not = why_not
        self._t = self.clock()
        self._energy = 0.0
        self._updated_t = self._t
        self._shown = 0.0

    def available(self) -> str | None:
        return self.why_not

    def read(self) -> float:
        now = self.clock()
        self._energy += self.power_w * (now - self._t)
        self._t = now
        if now - self._updated_t >= self.update_period_s:  # the counter moves only at its updates
            ticks = int((now - self._updated_t) / self.update_period_s)
            self._updated_t += ticks * self.update_period_s
            self._shown = round(self._energy / self.resolution_j) * self.resolution_j
        return self._shown


class SumMeter:
    """Several meters read as one counter (a route whose stages run on several devices)."""

    name = "sum"

    def __init__(self, meters: Sequence[EnergyMeter]) -> None:
        self.meters = tuple(meters)
        self.covers = " + ".join(m.covers for m in self.meters)
        self.resolution_j = max(m.resolution_j for m in self.meters)
        self.update_period_s = max(m.update_period_s for m in self.meters)

    def available(self) -> str | None:
        reasons = [r for r in (m.available() for m in self.meters) if r]
        return "; ".join(reasons) or None

    def read(self) -> float:
        return sum(m.read() for m in self.meters)


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def rapl_packages(root: Path = POWERCAP) -> list[RaplMeter]:
    """The RAPL package zones (intel-rapl:N, not their sub-zones)."""
    if not root.is_dir():
        return []
    zones = sorted(p for p in root.glob("intel-rapl:*") if p.name.count(":") == 1)
    return [RaplMeter(z) for z in zones]


def nvidia_gpus() -> list[NvmlMeter]:
    """One NVML meter per visible NVIDIA GPU (CUDA_VISIBLE_DEVICES indices when numeric), or [GPU 0] to say why not."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible and all(p.strip().isdigit() for p in visible.split(",")):
        return [NvmlMeter(int(p)) for p in visible.split(",")]
    return [NvmlMeter(0)]


#: Device classes whose energy a meter kind covers.
CPU, GPU = "cpu", "gpu"


def meters_for(device: str, *, powercap: Path | None = None) -> tuple[list[EnergyMeter], list[str]]:
    """(the readable meters covering ``device`` ("cpu" | "gpu" | other), why each other one is not)."""
    candidates: list[EnergyMeter]
    powercap = POWERCAP if powercap is None else powercap
    if device == CPU:
        candidates = list(rapl_packages(powercap))
        if not candidates:
            return [], [f"no RAPL zone under {powercap} (no CPU package energy counter on this host)"]
    elif device == GPU:
        candidates = list(nvidia_gpus())
    else:
        return [], [f"no energy meter for a {device} device on this host"]
    ok, why = [], []
    for m in candidates:
        reason = m.available()
        (why.append(f"{m.covers}: {reason}") if reason else ok.append(m))
    return ok, why


#: The quiet window before a cell that measures idle power, and how often it polls the counter.
IDLE_WINDOW_S = 2.0
IDLE_POLL_S = 0.005
