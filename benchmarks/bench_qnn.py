"""QNN EPContext: one stage compiled (in-process and as the harness does it, in a child), and the cache hit.

Run as a script (prints the figures):  python benchmarks/bench_qnn.py
or under pytest-benchmark:             pytest benchmarks/bench_qnn.py --benchmark-enable

Everything here runs QNN's HTP *emulator* (onnxruntime-qnn on x86_64): compile figures are the
emulator's preparation, not a Snapdragon's. Stage: the iterator of bundles/tiny-qwen2-npu.

* compile_inprocess_ms: ``ModelCompiler.compile_to_file`` alone (plugin already registered);
* compile_child_ms: the harness's compile child (Python start, plugin registration, compile, and the
  verifying session that loads the result with the run's options);
* derive_hit_ms: ``derive_bundle`` of the compiled route once it exists (manifest, file identities,
  onnxruntime's answer, the kept session verdict);
* prepare_hit_ms: the whole ``prepare_route`` hit (adds config load, placement.json read).
"""

from __future__ import annotations

import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
NPU = REPO / "bundles" / "tiny-qwen2-npu"
QNN = "QNNExecutionProvider"
OPTIONS = {"backend_type": "htp", "soc_model": "60", "enable_htp_fp16_precision": "1"}


def _target():
    from winml_perf.ep.devices import Target

    return Target("ep", "qnn", None, QNN, "cpu")


def compile_inprocess_ms(out_dir: Path, n: int = 5) -> list[float]:
    import onnxruntime as ort

    from winml_perf.ep.plugins import registered_plugins

    registered_plugins()
    devices = [d for d in ort.get_ep_devices() if d.ep_name == QNN]
    times = []
    for i in range(n):
        so = ort.SessionOptions()
        so.add_provider_for_devices(devices, OPTIONS)
        t0 = time.perf_counter()
        ort.ModelCompiler(
            so, str(NPU / "transformer_iterator.onnx"), embed_compiled_data_into_model=False
        ).compile_to_file(str(out_dir / f"it{i}_ctx.onnx"))
        times.append((time.perf_counter() - t0) * 1000)
    return times


def route_figures(root: Path, n: int = 20) -> dict:
    from winml_perf.bundle import cache
    from winml_perf.bundle.derive import derive_bundle
    from winml_perf.bundle.epcontext.compile import compile_jobs
    from winml_perf.bundle.prepare import Compiling, plan_for, prepare_route

    bundle = root / "npu"
    shutil.copytree(NPU, bundle, ignore=shutil.ignore_patterns("_compiled"))
    with cache.holding(bundle):  # as a command holds it around its prepares (bundle/prepare.py)
        cold = prepare_route(bundle, _target(), ["iterator"], compile=Compiling(), require_available=False)
        (compiled,) = [c for c in cold.compile if c.status == "compiled"]
        plan = plan_for(bundle, _target(), ["iterator"])
        jobs, _notes = compile_jobs(plan)
        derive_hits, prepare_hits = [], []
        for _ in range(n):
            t0 = time.perf_counter()
            hit = derive_bundle(plan, jobs=jobs)
            derive_hits.append((time.perf_counter() - t0) * 1000)
            assert hit.cache == "hit"
            t0 = time.perf_counter()
            again = prepare_route(bundle, _target(), ["iterator"], compile=Compiling(), require_available=False)
            prepare_hits.append((time.perf_counter() - t0) * 1000)
            assert again.cache == "hit"
    return {"compile_child_ms": compiled.compile_ms, "derive_hit_ms": derive_hits, "prepare_hit_ms": prepare_hits}


def test_qnn_compile_and_hit(benchmark=None):
    with tempfile.TemporaryDirectory() as tmp:
        figures = route_figures(Path(tmp), n=5)
    assert figures["compile_child_ms"] > 0


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        inproc = compile_inprocess_ms(Path(tmp))
        figures = route_figures(Path(tmp))
    med = statistics.median
    print(
        json.dumps(
            {
                "emulated": True,
                "compile_inprocess_ms": {
                    "median": round(med(inproc), 1),
                    "min": round(min(inproc), 1),
                    "max": round(max(inproc), 1),
                    "n": len(inproc),
                },
                "compile_child_ms": round(figures["compile_child_ms"], 1),
                "derive_hit_ms": {
                    "median": round(med(figures["derive_hit_ms"]), 2),
                    "min": round(min(figures["derive_hit_ms"]), 2),
                    "n": len(figures["derive_hit_ms"]),
                },
                "prepare_hit_ms": {
                    "median": round(med(figures["prepare_hit_ms"]), 2),
                    "min": round(min(figures["prepare_hit_ms"]), 2),
                    "n": len(figures["prepare_hit_ms"]),
                },
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    sys.exit(main())
