"""Derive cost vs weight size: a bundle with a 1 GB sparse weight file against a tiny one.

Run as a script (prints a table):      python benchmarks/bench_derive.py
or under pytest-benchmark:             pytest benchmarks/bench_derive.py --benchmark-enable

Cold = first derive (links every file, writes config + manifest); warm = the cache hit that follows.
Both should be the same for 1 GB and 1 KB of weights: links, not copies, and a key over file
identities (size, mtime_ns, inode), not contents.

Hit on the committed tiny bundles (``--ep cpu``, placement.json saved): the whole ``prepare_route``
of a cache hit, which checks the derived bundle against its manifest (digests of the files the cache
wrote, identities of what it linked) and reads placement.json; the median of 200 hits is printed.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from winml_perf.bundle import cache, cache_contents, derive
from winml_perf.bundle.prepare import prepare_route
from winml_perf.ep.devices import Target

GB = 1 << 30
TARGET = Target("ep", "qnn", None, "QNNExecutionProvider", "npu")
CPU_TARGET = Target("ep", "cpu", None, "CPUExecutionProvider", "cpu")
REPO_BUNDLES = Path(__file__).resolve().parents[1] / "bundles"


def make_bundle(root: Path, weight_bytes: int) -> Path:
    bundle = root / f"bundle-{weight_bytes}"
    bundle.mkdir()
    config = {
        "model": {"type": "qwen2", "decoder": {"filename": "model.onnx", "session_options": {"provider_options": []}}}
    }
    (bundle / "genai_config.json").write_text(json.dumps(config))
    (bundle / "model.onnx").write_bytes(b"fake onnx graph" * 100)
    with open(bundle / "model.onnx.data", "wb") as f:
        f.truncate(weight_bytes)  # sparse: no blocks written
    return bundle


def _disk_bytes(folder: Path) -> int:
    """Bytes of blocks newly allocated under ``folder`` (hard links share blocks with the source)."""
    seen, total = set(), 0
    for p in folder.rglob("*"):
        st = p.lstat()
        if p.is_file() and st.st_nlink == 1 and st.st_ino not in seen:
            seen.add(st.st_ino)
            total += st.st_blocks * 512
    return total


def measure(bundle: Path) -> dict:
    derive.clean(bundle)
    t0 = time.perf_counter()
    cold = prepare_route(bundle, TARGET, require_available=False)
    cold_ms = (time.perf_counter() - t0) * 1000
    t0 = time.perf_counter()
    warm = prepare_route(bundle, TARGET, require_available=False)
    warm_ms = (time.perf_counter() - t0) * 1000
    manifest = json.loads((cold.path / "manifest.json").read_text())
    assert cold.cache == "miss" and warm.cache == "hit"
    return {
        "cold_ms": cold_ms,
        "warm_ms": warm_ms,
        "bytes_written": manifest["bytes_written"] + (cold.path / "manifest.json").stat().st_size,
        "new_disk_bytes": _disk_bytes(cold.path),
        "links": manifest["links"],
    }


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        rows = []
        for size in (1024, GB):
            bundle = make_bundle(Path(tmp), size)
            runs = [measure(bundle) for _ in range(5)]
            best = {k: min(r[k] for r in runs) for k in ("cold_ms", "warm_ms")}
            rows.append(
                (
                    size,
                    best["cold_ms"],
                    best["warm_ms"],
                    runs[-1]["bytes_written"],
                    runs[-1]["new_disk_bytes"],
                    runs[-1]["links"],
                )
            )
        print(f"{'weights':>12} {'cold ms':>9} {'warm ms':>9} {'bytes written':>14} {'new disk bytes':>15}  links")
        for size, cold, warm, written, disk, links in rows:
            print(f"{size:>12} {cold:>9.2f} {warm:>9.2f} {written:>14} {disk:>15}  {links}")


def hit_ms(source: Path, root: Path, hits: int = 200) -> tuple[float, float, float]:
    """(median, p90) ms of a cache-hit ``prepare_route`` of ``source`` (copied into ``root``) on CPU,
    and the median ms of the contents check alone (``cache_contents.verify``: stats and digests)."""
    bundle = root / source.name
    shutil.copytree(source, bundle, ignore=shutil.ignore_patterns("_compiled"))
    first = prepare_route(bundle, CPU_TARGET)
    assert first.cache == "miss"
    times = []
    for _ in range(hits):
        t0 = time.perf_counter()
        route = prepare_route(bundle, CPU_TARGET)
        times.append((time.perf_counter() - t0) * 1000)
        assert route.cache == "hit" and route.placement_cache == "hit"
    times.sort()
    contents = json.loads((route.path / "manifest.json").read_text())["contents"]
    verify = []
    for _ in range(hits):
        t0 = time.perf_counter()
        assert cache_contents.verify(route.path, contents, cache.file_sha256) is None
        verify.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times), times[int(len(times) * 0.9)], statistics.median(verify)


def main_hits() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        print(f"{'bundle (--ep cpu)':>24} {'hit median ms':>14} {'hit p90 ms':>11} {'verify median ms':>17}")
        for name in ("tiny-qwen2", "tiny-qwen2-pipeline"):
            median, p90, verify = hit_ms(REPO_BUNDLES / name, Path(tmp))
            print(f"{name:>24} {median:>14.2f} {p90:>11.2f} {verify:>17.3f}")


def _clean(bundle: Path) -> None:
    derive.clean(bundle)  # pytest-benchmark's setup must return None (or args)


def test_derive_cold_1gb(benchmark, tmp_path):
    bundle = make_bundle(tmp_path, GB)
    benchmark.pedantic(
        lambda: prepare_route(bundle, TARGET, require_available=False), setup=lambda: _clean(bundle), rounds=5
    )


def test_derive_cold_tiny(benchmark, tmp_path):
    bundle = make_bundle(tmp_path, 1024)
    benchmark.pedantic(
        lambda: prepare_route(bundle, TARGET, require_available=False), setup=lambda: _clean(bundle), rounds=5
    )


def test_derive_warm_1gb(benchmark, tmp_path):
    bundle = make_bundle(tmp_path, GB)
    prepare_route(bundle, TARGET, require_available=False)
    result = benchmark(lambda: prepare_route(bundle, TARGET, require_available=False))
    assert result.cache == "hit"


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    main()
    main_hits()
