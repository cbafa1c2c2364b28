"""Issue 26: a prepared plain .onnx model's export and import refuse what cannot travel (exit 2, nothing written)."""

from __future__ import annotations

import json

import pytest

from tests import models
from winml_perf.bundle import cache
from winml_perf.bundle.epcontext import export_onnx
from winml_perf.support.errors import BundleError, UsageError


def test_an_optimised_model_is_not_exported(tmp_path):
    """Made for this host's CPU: only EPContext models travel."""
    from winml_perf.bundle.onnx_prepare import prepare_onnx
    from winml_perf.ep.devices import resolve_target
    from winml_perf.model.runtime import ONNX

    model = models.mlp(tmp_path / "mlp.onnx")
    prepared = prepare_onnx(model, resolve_target("cpu", None, ONNX), "basic")
    manifest, _ = cache.read_manifest(prepared.folder)
    assert manifest is not None and export_onnx.is_prepared_model(manifest)
    with pytest.raises(BundleError) as err:
        export_onnx.export_model(prepared.folder, manifest, tmp_path / "out")
    assert err.value.exit_code == 2 and "only compiled (EPContext) models travel" in str(err.value)
    assert not (tmp_path / "out").exists()


def test_a_bundle_routes_export_is_not_imported_into_a_model(tmp_path):
    model = models.mlp(tmp_path / "mlp.onnx")
    carried = tmp_path / "carried"
    carried.mkdir()
    (carried / "export.json").write_text(json.dumps({"format": 1, "options": {}, "jobs": []}))
    with pytest.raises(UsageError) as err:
        export_onnx.import_plan(model, carried)
    assert "winml bundle import-prepared BUNDLE EXPORT" in str(err.value)
    assert not (tmp_path / "_compiled").exists()
