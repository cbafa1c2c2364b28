"""Which memory a stage's EP reads from, and that memory's bandwidth.

Devices: ``host`` (an EP whose table entry reads host memory, the CPU EP; an EP whose only device is
of type CPU: WebGPU over a software Vulkan adapter such as lavapipe, the QNN HTP emulator, labelled
emulated), ``nvidia-gpu`` (an EP device of type GPU from vendor 0x10de, or an EP whose table entry
reads NVIDIA GPU memory, CUDA/TensorRT, on a machine with an NVIDIA GPU) and ``unknown`` (anything
else: no bandwidth, so no roofline fraction). Which memory each EP reads is ``EPInfo.memory`` in
ep/table.py.

NVIDIA bandwidth: the peak from NVML (max memory clock x bus width x 2 for double data rate), which
no kernel can beat, plus a measured device-to-device copy where torch with CUDA is importable (run
in a child process, cached per machine like the host probe). The peak is the bound; the copy is
recorded next to it as what a streaming kernel reaches.

A run decides these once, before its first cell (``run_devices``): each generation route's stages
with the memory each reads, the host's bandwidth and, where a stage reads NVIDIA GPU memory, the
GPU's. measure/sweep.py hands that one value on: the energy meters read the stages' devices, each
cell's record the bandwidths (its roofline asks stage_device again, for the EP that actually ran).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from winml_perf.ep import child
from winml_perf.ep import table as eps
from winml_perf.record.roofline import cache_dir, machine_key, probe_figure
from winml_perf.support.cache_file import positive_number, read_cache, write_cache

if TYPE_CHECKING:
    from winml_perf.model.spec import CellSpec

HOST, NVIDIA_GPU, UNKNOWN = "host", "nvidia-gpu", "unknown"
#: Below this many bytes per step the host's working set can stay in the CPU caches, where a DRAM
#: probe is no bound: such steps are bounded by a probe that re-reads a working set of their size.
CACHE_RESIDENT_BYTES = 1 << 30
WORKING_SET_MIN_BYTES = 256 << 10
WORKING_SET_READ_BYTES = 1 << 30  # bytes each working-set probe reads in all (re-reading its array)
NVIDIA_VENDOR_ID = 0x10DE
GPU_CACHE_FILE = "gpu_bandwidth.json"
COPY_BYTES = 1 << 30
COPY_REPEATS = 10


@dataclass(frozen=True)
class StageDevice:
    device: str  # HOST | NVIDIA_GPU | UNKNOWN
    label: str  # what the reader is told, e.g. "host (QNN HTP emulator, emulated)"
    emulated: bool = False


def stage_device(ep_name: str | None, environment: Mapping[str, Any]) -> StageDevice:
    """The memory an EP's stage reads, from the run's environment (ep_devices, gpu)."""
    if not ep_name:
        return StageDevice(UNKNOWN, "no EP recorded for the stage")
    ep = eps.canonical_or_own(ep_name)
    memory = eps.memory_of(ep)
    if memory == eps.HOST_MEMORY:
        return StageDevice(HOST, f"host ({eps.ep_alias(ep).upper()} EP)")
    rows = [
        r
        for r in ((environment.get("ep_devices") or {}).get("devices") or [])
        if eps.canonical_or_own(str(r.get("ep_name"))) == ep
    ]
    types = {str(r.get("device_type")) for r in rows}
    if any(r.get("device_type") == "gpu" and r.get("vendor_id") == NVIDIA_VENDOR_ID for r in rows):
        return StageDevice(NVIDIA_GPU, f"NVIDIA GPU ({ep})")
    if types == {"cpu"}:
        emulator = eps.emulator_of(ep)
        if emulator:
            name = eps.EPS[ep].genai_name or eps.ep_alias(ep)
            return StageDevice(HOST, f"host ({name} {emulator} emulator, emulated)", emulated=True)
        return StageDevice(HOST, f"host ({ep} on a CPU-type device, e.g. a software adapter)")
    nvidia_present = any(g.get("vendor") == "NVIDIA" for g in ((environment.get("gpu") or {}).get("gpus") or []))
    if not rows and memory == eps.NVIDIA_GPU_MEMORY and nvidia_present:
        return StageDevice(NVIDIA_GPU, f"NVIDIA GPU ({ep})")
    return StageDevice(
        UNKNOWN, f"{ep} on {'/'.join(sorted(types)) or 'an unlisted device'}: its memory bandwidth is unknown"
    )


#: Each generation route's stages, by route label: the EP that runs each (as planned) and the memory it reads.
RouteDevices = dict[str, tuple[tuple[str | None, StageDevice], ...]]


def route_devices(cells: Sequence[CellSpec], environment: Mapping[str, Any]) -> RouteDevices:
    """The stages of each generation route of ``cells`` (its first cell's) and the memory each reads."""
    out: RouteDevices = {}
    for cell in cells:
        if cell.session.token_based and cell.route_label not in out:
            eps_run = [s.ran_on() for s in cell.recorded_route.stages]
            out[cell.route_label] = tuple((ep, stage_device(ep, environment)) for ep in eps_run)
    return out


@dataclass(frozen=True)
class RunDevices:
    """What a run decides once about memory (see the module doc). ``host``: cached_bandwidth(), or
    why it is missing; None without a roofline or a generation route. ``gpu``: nvidia_bandwidth(),
    or why it is missing; None where no stage reads NVIDIA GPU memory."""

    routes: RouteDevices
    host: Mapping[str, Any] | None = None
    gpu: Mapping[str, Any] | None = None


def _figure_or_note(probe: Callable[[], Mapping[str, Any]]) -> Mapping[str, Any]:
    """A bandwidth probe's figure, or why it is missing: a roofline is a bonus, not worth failing a run."""
    try:
        return probe()
    except Exception as exc:
        return {"bandwidth_bytes_per_s": None, "method": None, "error": f"{type(exc).__name__}: {exc}"}


def run_devices(cells: Sequence[CellSpec], environment: Mapping[str, Any], roofline: bool = True) -> RunDevices:
    """The run's RunDevices; the host is probed (or read from its cache) only for a roofline of a
    generation route, the NVIDIA GPU only when a stage of one reads its memory."""
    from winml_perf.record.roofline import cached_bandwidth

    routes = route_devices(cells, environment)
    if not roofline or not routes:
        return RunDevices(routes)
    host = _figure_or_note(cached_bandwidth)
    on_gpu = any(d.device == NVIDIA_GPU for stages in routes.values() for _, d in stages)
    return RunDevices(routes, host, _figure_or_note(nvidia_bandwidth) if on_gpu else None)


def measure_working_set(array_bytes: int, repeats: int = 5, threads: int | None = None) -> dict[str, Any]:
    """Read bandwidth of a working set of ``array_bytes`` re-read over and over (from the caches when
    it fits), one chunk per thread reduced many times per timing so thread dispatch does not count."""
    import time
    from concurrent.futures import ThreadPoolExecutor

    import numpy as np

    threads = threads or (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)
    data = np.ones(max(array_bytes // 8, threads), dtype=np.float64)
    chunks = np.array_split(data, threads)
    passes = max(1, WORKING_SET_READ_BYTES // data.nbytes)

    def read(chunk: np.ndarray[Any, np.dtype[np.float64]]) -> None:
        for _ in range(passes):
            chunk.max()  # a SIMD max reads faster than a pairwise float sum

    best = float("inf")
    with ThreadPoolExecutor(max_workers=threads) as pool:
        for _ in range(repeats):
            t0 = time.perf_counter()
            list(pool.map(read, chunks))
            best = min(best, time.perf_counter() - t0)
    return {
        "bandwidth_bytes_per_s": data.nbytes * passes / best,
        "array_bytes": int(data.nbytes),
        "threads": threads,
        "method": f"numpy max re-reading a {data.nbytes / 2**20:.3g} MiB working set {passes}x across {threads} threads, best of {repeats}",
    }


def working_set_bytes(step_bytes: float) -> int | None:
    """The probe's array for a step of this many bytes (the next power of two), or None when it cannot fit in caches."""
    if step_bytes >= CACHE_RESIDENT_BYTES:
        return None
    size = WORKING_SET_MIN_BYTES
    while size < step_bytes:
        size *= 2
    return size


WORKING_SET_CACHE_FILE = "working_set_bandwidth.json"
_WORKING_SET_FIGURES: dict[int, dict[str, Any]] = {}


def _valid_working_sets(data: Mapping[str, Any]) -> bool:
    figures = data.get("figures")
    return (
        isinstance(data.get("machine"), str)
        and isinstance(figures, dict)
        and all(isinstance(f, dict) and positive_number(f.get("bandwidth_bytes_per_s")) for f in figures.values())
    )


def _read_working_sets() -> dict[str, Any]:
    """This machine's cached figures by size (a damaged file: none, with a warning; rebuilt on store)."""
    data = read_cache(cache_dir() / WORKING_SET_CACHE_FILE, _valid_working_sets)
    return dict(data["figures"]) if data is not None and data["machine"] == machine_key() else {}


def _cached_working_set(size: int) -> dict[str, Any] | None:
    """This machine's figure for ``size`` from the cache file, if one was measured."""
    return _read_working_sets().get(str(size))


def _store_working_set(size: int, figure: Mapping[str, Any]) -> None:
    figures = _read_working_sets()
    figures[str(size)] = dict(figure)
    write_cache(cache_dir() / WORKING_SET_CACHE_FILE, {"machine": machine_key(), "figures": figures})


def working_set_bandwidth(step_bytes: float, timeout_s: float = 120.0) -> dict[str, Any] | None:
    """measure_working_set() for a step's size, in a child process (the array never raises this
    process's peak RSS), once per size per machine: cached beside the DRAM probe's figure
    (record/roofline.py), so a run does not pay the probe after its measurements. None above
    CACHE_RESIDENT_BYTES."""
    size = working_set_bytes(step_bytes)
    if size is None:
        return None
    if size not in _WORKING_SET_FIGURES:
        cached = _cached_working_set(size)
        if cached is not None:
            _WORKING_SET_FIGURES[size] = {**cached, "cache": "hit"}
        else:
            result = child.run_module(__name__, ["working-set", str(size)], child.ChildContext(), timeout_s)
            if not result.ok:
                return {"bandwidth_bytes_per_s": None, "error": f"working-set probe failed: {result.failure()}"}
            figure = probe_figure(result.stdout, "working-set probe")
            _store_working_set(size, figure)
            _WORKING_SET_FIGURES[size] = {**figure, "cache": "miss"}
    return _WORKING_SET_FIGURES[size]


def nvml_peak() -> dict[str, Any] | None:
    """GPU 0's peak memory bandwidth from NVML, or None without pynvml or an NVIDIA driver."""
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
        h = pynvml.nvmlDeviceGetHandleByIndex(0)
        clock_mhz = pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_MEM)
        bus_bits = pynvml.nvmlDeviceGetMemoryBusWidth(h)
        name = pynvml.nvmlDeviceGetName(h)
    except Exception:
        return None
    return {
        "peak_bytes_per_s": clock_mhz * 1e6 * 2 * bus_bits / 8,
        "memory_clock_mhz": clock_mhz,
        "bus_width_bits": bus_bits,
        "name": name.decode() if isinstance(name, bytes) else name,
    }


def measure_copy(n: int = COPY_BYTES, repeats: int = COPY_REPEATS) -> dict[str, Any]:
    """Best device-to-device copy rate on GPU 0 through torch, counting read + write bytes."""
    import torch

    src = torch.empty(n, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    dst.copy_(src)
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        dst.copy_(src)
        end.record()
        torch.cuda.synchronize()
        best = min(best, start.elapsed_time(end) / 1000)
    return {"copy_bytes_per_s": 2 * n / best, "name": torch.cuda.get_device_name(0), "copy_bytes": n}


def measure_copy_in_child(timeout_s: float = 120.0) -> dict[str, Any] | None:
    """measure_copy() in a child process (torch and its CUDA context stay out of this one); None
    where torch or CUDA is missing."""
    try:
        result = child.run_module(__name__, ["copy"], child.ChildContext(), timeout_s)
    except OSError:
        return None
    return probe_figure(result.stdout, "copy probe") if result.ok else None


def main(argv: list[str]) -> int:
    """The probe child: ``copy`` or ``working-set BYTES``, one JSON line on stdout."""
    out = measure_copy() if argv[0] == "copy" else measure_working_set(int(argv[1]))
    print(json.dumps(out))
    return 0


def nvidia_bandwidth(
    peak: Callable[[], dict[str, Any] | None] = nvml_peak,
    copy: Callable[[], dict[str, Any] | None] = measure_copy_in_child,
) -> dict[str, Any]:
    """The bound for stages on the NVIDIA GPU: NVML's peak (else the measured copy), with both recorded."""
    path = cache_dir() / GPU_CACHE_FILE
    key = machine_key()
    data = read_cache(
        path, lambda d: isinstance(d.get("machine"), str) and positive_number(d.get("bandwidth_bytes_per_s"))
    )
    if data is not None and data["machine"] == key:
        return {**data, "cache": "hit"}
    p, c = peak(), copy()
    out: dict[str, Any] = {"machine": key, "nvml": p, "copy": c, "bandwidth_bytes_per_s": None, "method": None}
    if p:
        out.update(
            bandwidth_bytes_per_s=p["peak_bytes_per_s"],
            method=f"NVML peak of {p['name']}: {p['memory_clock_mhz']} MHz x {p['bus_width_bits']} bit x 2 (DDR)",
        )
    elif c:
        out.update(
            bandwidth_bytes_per_s=c["copy_bytes_per_s"], method=f"measured device copy on {c['name']} (no NVML peak)"
        )
    if positive_number(out["bandwidth_bytes_per_s"]):
        write_cache(path, out)
    return {**out, "cache": "miss"}
