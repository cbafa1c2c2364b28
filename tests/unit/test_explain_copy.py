"""The profiling copy of a route holds its files inside itself: onnxruntime-genai refuses external
data that resolves outside the folder it loads (issue 23, finding 10)."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.conftest import TINY_FLAT
from winml_perf.explain.genai_run import profile_route, profiling_copy


def _derived_like(tmp_path: Path) -> Path:
    """A route folder whose weights are links to files elsewhere, as a derived bundle's are."""
    weights = tmp_path / "weights"
    shutil.copytree(TINY_FLAT, weights, ignore=shutil.ignore_patterns("_compiled"))
    route = tmp_path / "route"
    route.mkdir()
    for entry in weights.iterdir():
        if entry.name == "genai_config.json":
            shutil.copy2(entry, route / entry.name)
        else:
            (route / entry.name).symlink_to(entry)
    return route


def test_every_file_of_the_copy_resolves_inside_it(tmp_path):
    route = _derived_like(tmp_path)
    profiling_copy(route, tmp_path / "work")
    bundle = (tmp_path / "work" / "bundle").resolve()
    files = list(bundle.iterdir())
    assert any(f.name == "model.onnx.data" for f in files)
    for f in files:
        assert not f.is_symlink(), f
        assert f.resolve().parent == bundle, f


def test_a_route_with_linked_external_data_is_profiled(tmp_path):
    route = _derived_like(tmp_path)
    phases = profile_route(route, [1, 2, 3, 4], 3)
    assert set(phases) == {"prompt", "decode_step"}
    assert phases["decode_step"].wall_ms > 0
