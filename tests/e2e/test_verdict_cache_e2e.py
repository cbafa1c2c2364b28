"""Issue 34 item 4 against the real runtime: a second `winml perf` over the same bundle judges nothing
and records the same verdict; one changed byte of a weight is judged again; --no-equivalence-cache
judges every time. Each run's cost line says which."""

from __future__ import annotations

import pytest

from tests.conftest import TINY_FLAT, run_winml
from tests.e2e.test_equivalence_e2e import RUN, _equivalence

pytestmark = pytest.mark.e2e


def _perf(bundle, *flags):
    result = run_winml("perf", bundle, "--route", "config", "--route", "ep=qnn", *RUN, *flags)
    e = _equivalence(result)["ep=qnn"]
    line = next(x for x in result.stderr.splitlines() if x.startswith("equivalence: 1 route(s) against config in "))
    return e, line


def _without_cost(e: dict) -> dict:
    return {k: v for k, v in e.items() if k not in ("cost_ms", "route_path")}


def test_a_second_run_reads_the_verdict_back_and_a_changed_weight_misses(bundle_copy):
    bundle = bundle_copy(TINY_FLAT)
    cold, line = _perf(bundle)
    assert "(0 from cache, 1 judged: reference " in line, line
    warm, line = _perf(bundle)
    assert "(1 from cache, 0 judged, content keys " in line, line
    assert _without_cost(warm) == _without_cost(cold) and warm["verdict"] == "equivalent"
    assert sorted(p.name.rsplit("-", 1)[1] for p in (bundle / "_compiled").glob("equivalence-*.json")) == [
        "bands.json",
        "route.json",
    ]
    data = bundle / "model.onnx.data"
    raw = bytearray(data.read_bytes())
    raw[1000] ^= 1  # one byte of a weight
    data.write_bytes(bytes(raw))
    _, line = _perf(bundle)
    assert "(0 from cache, 1 judged: reference " in line, line
    off, line = _perf(bundle, "--no-equivalence-cache")
    assert "(1 judged: reference " in line and "cache" not in line, line
    assert off["verdict"] in ("equivalent", "within precision tolerance", "not equivalent")
