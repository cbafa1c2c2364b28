"""Roofline for decode: how close decode tokens/s comes to the memory-bandwidth bound.

Decoding one token reads (about) every weight of the stages that run on token generation once, so
``bandwidth / bytes_of_weights`` bounds decode tokens/s. We measure this machine's host memory read
bandwidth once (numpy sums over a large array, one chunk per thread, best of k) and cache it per
machine in ``~/.cache/winml-perf/`` (``WINML_PERF_CACHE_DIR`` overrides).

Caveats, recorded with the figure: the weights' file sizes overstate the bytes read per token
(the embedding table is gathered one row at a time), which makes the fraction conservative; and the
bandwidth is the host's, so for a GPU route it is only a reference (pass the device's own figure).
"""

from __future__ import annotations

import json
import math
import os
import socket
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Mapping

from winml_perf.model.route import Route

CACHE_ENV = "WINML_PERF_CACHE_DIR"
CACHE_FILE = "bandwidth.json"
ARRAY_MIB_ENV = "WINML_PERF_BANDWIDTH_ARRAY_MIB"  # size of the probe's array (default 512 MiB)
DEFAULT_ARRAY_BYTES = 512 * 1024 * 1024
DEFAULT_REPEATS = 5
SMALL_MODEL_BYTES = 64 * 1024 * 1024
METHOD = "numpy float64 sum over a {mib} MiB array split across {threads} threads, best of {repeats}"


def cache_dir() -> Path:
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "winml-perf")


def measure_bandwidth(array_bytes: int | None = None, repeats: int = DEFAULT_REPEATS, threads: int | None = None) -> dict[str, Any]:
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
        "measured_utc": datetime.now(timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z"),
    }


def measure_bandwidth_in_child(timeout_s: float = 300.0) -> dict[str, Any]:
    """measure_bandwidth() in a separate Python process, so its large array never raises the
    measuring process's peak RSS (ru_maxrss cannot be reset)."""
    from winml_perf import child

    result = child.run_module(__name__, [], child.ChildContext(), timeout_s)  # no plugins: it runs no EP
    if not result.ok:
        raise RuntimeError(f"bandwidth probe {result.exit.text}: {result.stderr.strip()[-500:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def main(argv: list[str]) -> int:
    """The probe child: print measure_bandwidth() as one JSON line."""
    print(json.dumps(measure_bandwidth()))
    return 0


def machine_key() -> str:
    """What the cached figure belongs to: host, CPU model and core count."""
    from winml_perf.bench.environment import cpu_model

    return f"{socket.gethostname()}|{cpu_model()}|{os.cpu_count()}"


def cached_bandwidth(measure=measure_bandwidth_in_child, refresh: bool = False) -> dict[str, Any]:
    """The bandwidth of this machine, measured on first use and cached (cache: 'hit' or 'miss')."""
    path = cache_dir() / CACHE_FILE
    key = machine_key()
    if not refresh and path.is_file():
        try:
            data = json.loads(path.read_text())
            if data.get("machine") == key and data.get("bandwidth_bytes_per_s", 0) > 0:
                return {**data, "cache": "hit", "cache_path": str(path)}
        except (OSError, json.JSONDecodeError):
            pass  # unreadable cache: measure again and overwrite it
    data = {**measure(), "machine": key}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=2))
    os.replace(tmp, path)
    return {**data, "cache": "miss", "cache_path": str(path)}


def _external_data_files(model: Path) -> set[str]:
    """Names of the external-data files an .onnx file points at (needs onnx; else a guess)."""
    names = set()
    guess = model.with_name(model.name + ".data")
    if guess.is_file():
        names.add(guess.name)
    try:
        import onnx

        proto = onnx.load(str(model), load_external_data=False)
        for tensor in proto.graph.initializer:
            for entry in tensor.external_data:
                if entry.key == "location":
                    names.add(entry.value)
    except Exception:
        pass
    return names


def _token_gen_files(path: Path, route: Route | None) -> list[str]:
    stages = route.stages if route is not None else ()
    if stages and all(s.files for s in stages):
        return sorted({f for s in stages if s.run_on_token_gen for f in s.files if str(f).endswith(".onnx")})
    cfg = json.loads((path / "genai_config.json").read_text())
    decoder = cfg["model"]["decoder"]
    pipeline = decoder.get("pipeline")
    if not pipeline:
        return [decoder["filename"]]
    if isinstance(pipeline, list):
        pipeline = pipeline[0] if len(pipeline) == 1 else {k: v for p in pipeline for k, v in p.items()}
    return sorted({st["filename"] for st in pipeline.values() if st.get("run_on_token_gen", True)})


def weights_bytes_per_token(path: str | Path, route: Route | None = None) -> dict[str, Any]:
    """Bytes of the model files (+ their external data) of the stages that run on every generated
    token, from the route's stages when they list files, else from genai_config.json."""
    path = Path(path)
    try:
        models = _token_gen_files(path, route)
    except (OSError, KeyError, TypeError, ValueError, AttributeError) as exc:
        return {"weights_bytes_per_token": None, "files": [], "note": f"cannot read the stages of {path}: {exc}"}
    files = set()
    for m in models:
        files.add(m)
        files |= _external_data_files(path / m)
    total = 0
    missing = []
    for f in sorted(files):
        p = path / f
        if p.is_file():
            total += p.stat().st_size
        else:
            missing.append(f)
    out: dict[str, Any] = {"weights_bytes_per_token": total or None, "files": sorted(files)}
    if missing:
        out["note"] = f"missing files: {', '.join(missing)}"
    return out


def roofline(decode_rate: float | None, bandwidth: Mapping[str, Any] | None, weights: Mapping[str, Any]) -> dict[str, Any]:
    """fraction = measured decode rate (tokens/s) / (bandwidth / bytes of weights per token)."""
    bw = (bandwidth or {}).get("bandwidth_bytes_per_s")
    per_token = weights.get("weights_bytes_per_token")
    out: dict[str, Any] = {
        "bandwidth_bytes_per_s": bw, "bandwidth_source": (bandwidth or {}).get("method"),
        "weights_bytes_per_token": per_token, "weights_files": list(weights.get("files") or []),
        "bound_tokens_per_s": None, "fraction_of_bound": None,
        "note": "host memory bandwidth; weight file sizes overstate bytes read per token (embeddings), so the fraction is conservative",
    }
    if weights.get("note"):
        out["note"] = weights["note"]
    elif per_token and per_token < SMALL_MODEL_BYTES:
        out["note"] += f"; weights under {SMALL_MODEL_BYTES // 2**20} MiB may stay in CPU caches and beat the bound"
    if bw and per_token:
        out["bound_tokens_per_s"] = bw / per_token
        if decode_rate and math.isfinite(decode_rate):
            out["fraction_of_bound"] = decode_rate / out["bound_tokens_per_s"]
    return out
