"""Host memory bandwidth for the decode roofline: measured once per machine (numpy sums over a
large array, one chunk per thread, best of k) and cached in ``~/.cache/winml-perf/``
(``WINML_PERF_CACHE_DIR`` overrides).

The bytes a decode step reads come from bundle/decode_bytes.py, the bound and its fraction from
record/decode_roofline.py (which also takes an NVIDIA GPU's bandwidth from record/device_bandwidth.py).
"""

from __future__ import annotations

import json
import math
import os
import socket
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from winml_perf.support.cache_file import positive_number, read_cache, write_cache

CACHE_ENV = "WINML_PERF_CACHE_DIR"
CACHE_FILE = "bandwidth.json"
ARRAY_MIB_ENV = "WINML_PERF_BANDWIDTH_ARRAY_MIB"  # size of the probe's array (default 512 MiB)
DEFAULT_ARRAY_BYTES = 512 * 1024 * 1024
DEFAULT_REPEATS = 5
METHOD = "numpy float64 sum over a {mib} MiB array split across {threads} threads, best of {repeats}"


def cache_dir() -> Path:
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "winml-perf")


def measure_bandwidth(
    array_bytes: int | None = None, repeats: int = DEFAULT_REPEATS, threads: int | None = None
) -> dict[str, Any]:
    """Host memory read bandwidth in bytes/s: numpy reductions release the GIL, so one chunk
    per thread reads in parallel like a multi-threaded decode does."""
    import numpy as np

    array_bytes = array_bytes or int(float(os.environ.get(ARRAY_MIB_ENV) or 0) * 2**20) or DEFAULT_ARRAY_BYTES
    threads = threads or (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)
    n = array_bytes // 8
    data = np.ones(n, dtype=np.float64)  # touch every page before timing
    chunks = np.array_split(data, threads)
    best = math.inf
    with ThreadPoolExecutor(max_workers=threads) as pool:
        for _ in range(repeats):
            t0 = time.perf_counter()
            list(pool.map(np.sum, chunks))
            best = min(best, time.perf_counter() - t0)
    return {
        "bandwidth_bytes_per_s": data.nbytes / best,
        "method": METHOD.format(mib=array_bytes // (1024 * 1024), threads=threads, repeats=repeats),
        "array_bytes": int(data.nbytes),
        "threads": threads,
        "measured_utc": datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
    }


def measure_bandwidth_in_child(timeout_s: float = 300.0) -> dict[str, Any]:
    """measure_bandwidth() in a separate Python process, so its large array never raises the
    measuring process's peak RSS (ru_maxrss cannot be reset)."""
    from winml_perf.ep import child

    result = child.run_module(__name__, [], child.ChildContext(), timeout_s)  # no plugins: it runs no EP
    if not result.ok:
        raise RuntimeError(f"bandwidth probe {result.exit.text}: {result.stderr.strip()[-500:]}")
    return probe_figure(result.stdout, "bandwidth probe")


def probe_figure(stdout: str, probe: str) -> dict[str, Any]:
    """The JSON object a probe child printed as its last line (RuntimeError when it printed none)."""
    lines = stdout.strip().splitlines()
    figure = json.loads(lines[-1]) if lines else None
    if not isinstance(figure, dict):
        raise RuntimeError(f"{probe} printed no JSON object: {stdout.strip()[-500:]!r}")
    return figure


def main(argv: list[str]) -> int:
    """The probe child: print measure_bandwidth() as one JSON line."""
    print(json.dumps(measure_bandwidth()))
    return 0


def machine_key() -> str:
    """What the cached figure belongs to: host, CPU model and core count."""
    from winml_perf.record.environment import cpu_model

    return f"{socket.gethostname()}|{cpu_model()}|{os.cpu_count()}"


def cached_bandwidth(
    measure: Callable[[], dict[str, Any]] = measure_bandwidth_in_child, refresh: bool = False
) -> dict[str, Any]:
    """The bandwidth of this machine, measured on first use and cached (cache: 'hit' or 'miss')."""
    path = cache_dir() / CACHE_FILE
    key = machine_key()
    if not refresh:
        # a damaged cache (Infinity, a list, a wrong type) is measured again with a warning, never trusted
        data = read_cache(
            path, lambda d: isinstance(d.get("machine"), str) and positive_number(d.get("bandwidth_bytes_per_s"))
        )
        if data is not None and data["machine"] == key:
            return {**data, "cache": "hit", "cache_path": str(path)}
    data = {**measure(), "machine": key}
    write_cache(path, data)
    return {**data, "cache": "miss", "cache_path": str(path)}
