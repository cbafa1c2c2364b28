"""Memory of the measuring process: peak RSS sampled in a background thread, the kernel's
ru_maxrss, and NVIDIA device memory through NVML where it can be read (else omitted, saying why).

The sampler wakes every ``interval_s`` for one cheap read (/proc via psutil); it never runs in the
timing loop itself, but it does share the process. Sampling can miss a spike shorter than the
interval: ru_maxrss (the kernel's own high-water mark of the whole process lifetime) covers that.

The model's memory apart from the harness's: the RSS when sampling starts (before the session's
libraries and the model are loaded: the interpreter and the harness's own libraries, which are far
larger in the main process than in a child) is ``baseline_rss_bytes``, and ``model_rss_bytes`` is
the peak above it.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any

DEFAULT_INTERVAL_S = 0.1


def ru_maxrss_bytes() -> int | None:
    """Peak resident set size of this process over its lifetime, in bytes (None on Windows)."""
    try:
        import resource
    except ImportError:
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024)  # Linux reports KiB, macOS bytes


class _Nvml:
    """NVML device-memory reader; ``note`` says why it is unavailable when it is."""

    def __init__(self) -> None:
        self.handles: list[Any] = []
        self.note: str | None = None
        self._nvml: Any = None  # the pynvml module (untyped) once NVML answered with a visible GPU
        try:
            import pynvml  # nvidia-ml-py
        except ImportError:
            self.note = "pynvml (nvidia-ml-py) is not installed; install winml-perf[nvidia] for device memory"
            return
        try:
            pynvml.nvmlInit()
            count = pynvml.nvmlDeviceGetCount()
            visible = os.environ.get("CUDA_VISIBLE_DEVICES")
            indices = list(range(count))
            if visible and all(p.strip().isdigit() for p in visible.split(",")):
                indices = [int(p) for p in visible.split(",") if int(p) < count]
            handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in indices]
        except Exception as exc:  # NVMLError_LibraryNotFound, DriverNotLoaded, ...
            self.note = f"NVML unavailable: {exc}"
            return
        if not handles:
            self.note = "NVML found no visible NVIDIA GPU"
            return
        self._nvml = pynvml
        self.handles = handles

    def used_bytes(self) -> tuple[int, int | None]:
        """(device-wide used bytes summed over visible GPUs, bytes used by this process or None)."""
        used = 0
        mine: int | None = None
        pid = os.getpid()
        for h in self.handles:
            used += int(self._nvml.nvmlDeviceGetMemoryInfo(h).used)
            try:
                for p in self._nvml.nvmlDeviceGetComputeRunningProcesses(h):
                    if p.pid == pid and p.usedGpuMemory is not None:
                        mine = (mine or 0) + int(p.usedGpuMemory)
            except Exception:
                pass  # per-process accounting is often unavailable in containers
        return used, mine


class MemorySampler:
    """Background sampler of this process's RSS (and device memory via NVML when visible).

    ``reset()`` starts a new peak window (one per cell); ``snapshot()`` returns the figures.
    """

    def __init__(self, interval_s: float = DEFAULT_INTERVAL_S, device: bool = True) -> None:
        import psutil

        self.interval_s = interval_s
        self._proc = psutil.Process()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._nvml = _Nvml() if device else None
        self._peak_rss = 0
        self._peak_dev: int | None = None
        self._peak_dev_mine: int | None = None
        self._samples = 0
        self._baseline_rss: int | None = None  # RSS before the session loaded: the harness's own

    def _sample(self) -> None:
        rss = int(self._proc.memory_info().rss)
        dev = mine = None
        if self._nvml is not None and self._nvml.handles:
            try:
                dev, mine = self._nvml.used_bytes()
            except Exception:
                dev = mine = None
        with self._lock:
            self._samples += 1
            self._peak_rss = max(self._peak_rss, rss)
            if dev is not None:
                self._peak_dev = max(self._peak_dev or 0, dev)
            if mine is not None:
                self._peak_dev_mine = max(self._peak_dev_mine or 0, mine)

    def _loop(self, running: threading.Event) -> None:
        running.set()
        while not self._stop.wait(self.interval_s):
            self._sample()

    def start(self) -> MemorySampler:
        """Start sampling; returns once the thread is parked in its wait, so its start-up (which
        needs the GIL) cannot land inside the first timed iteration."""
        if self._thread is None:
            if self._baseline_rss is None:
                self._baseline_rss = int(self._proc.memory_info().rss)
            self._sample()
            running = threading.Event()
            self._thread = threading.Thread(target=self._loop, args=(running,), name="winml-perf-memory", daemon=True)
            self._thread.start()
            running.wait(timeout=5.0)
            time.sleep(0.001)  # let it go from set() into the wait
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2.0)
            self._thread = None

    def reset(self) -> None:
        with self._lock:
            self._peak_rss = 0
            self._peak_dev = None
            self._peak_dev_mine = None
            self._samples = 0
        self._sample()

    def snapshot(self) -> dict[str, Any]:
        self._sample()
        with self._lock:
            out: dict[str, Any] = {
                "peak_rss_bytes": self._peak_rss,
                "baseline_rss_bytes": self._baseline_rss,
                "model_rss_bytes": None if self._baseline_rss is None else max(0, self._peak_rss - self._baseline_rss),
                "ru_maxrss_bytes": ru_maxrss_bytes(),
                "rss_sample_count": self._samples,
                "rss_sample_interval_s": self.interval_s,
                "pid": os.getpid(),
            }
            if self._nvml is None:
                out["device_memory_note"] = "device memory sampling was turned off"
            elif self._nvml.note:
                out["device_memory_note"] = self._nvml.note
            else:
                out["device_memory_peak_used_bytes"] = self._peak_dev
                out["device_memory_peak_process_bytes"] = self._peak_dev_mine
                out["device_memory_note"] = (
                    "device-wide used memory over visible GPUs (NVML); process share where NVML reports it"
                )
            return out

    def __enter__(self) -> MemorySampler:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
