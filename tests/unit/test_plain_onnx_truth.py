"""Issue 23 finding 4 on the CPU EP: a plain model's route carries its placement, its provider options
decision and a load-checked prepared model; the session's report of what ran reads the node assignment.
The QNN side (a total fallback, --strict, backend_type, one cache key) is tests/e2e/test_plain_onnx_qnn_e2e.py."""

from __future__ import annotations

import pytest

from tests import models
from winml_perf.bundle import cache
from winml_perf.bundle.epcontext import compat
from winml_perf.bundle.onnx_prepare import prepare_onnx
from winml_perf.ep.devices import Target
from winml_perf.ep.effective import plain_provider_options
from winml_perf.ep.resolved import resolve_route
from winml_perf.measure.onnx_route import onnx_route as _onnx_route
from winml_perf.measure.orchestrate import PerfRequest, RouteRequest
from winml_perf.session.onnx_session import OnnxSession
from winml_perf.support.errors import BundleError

CPU = "CPUExecutionProvider"
QNN = "QNNExecutionProvider"
CPU_TARGET = Target("ep", "cpu", None, CPU, "cpu")


def test_a_prepared_model_that_does_not_load_is_not_published(tmp_path, monkeypatch):
    """Plain prepared models were never load-checked: a model that fails to load was published."""
    model = models.mlp(tmp_path / "mlp.onnx")
    monkeypatch.setattr(compat, "load_error", lambda *a, **k: "Could not determine default backend path")
    with pytest.raises(BundleError, match="does not load on CPUExecutionProvider.*default backend path"):
        prepare_onnx(model, CPU_TARGET, "all")
    root = tmp_path / cache.COMPILED_DIR
    assert not root.exists() or not [p for p in root.iterdir() if not p.name.endswith(".lock")]


def test_the_plain_route_records_its_placement_and_options_and_is_strict_checked(tmp_path):
    """Plain models had no placement (so no fallback warning and --strict did nothing) and no options decision."""
    model = models.mlp(tmp_path / "mlp.onnx")
    request = RouteRequest(ep="cpu")
    req = PerfRequest(path=model, routes=(request,), runtime="winml", strict=True)
    spec = _onnx_route(req, resolve_route(request, req.runtime_value, req.ep_options), (), 0.0)
    (stage,) = spec.route.stages
    assert stage.forced and stage.placement is not None and stage.placement.nodes_per_ep == {CPU: 3}
    assert spec.route.target["options"]["ep"] == CPU and spec.route.target["ep_options"] == {}
    assert spec.session.options["provider_options"] == {}


def test_qnn_gets_its_backend_type_default_for_a_plain_model():
    """`perf MODEL.onnx --ep qnn` got no backend_type and failed ('Could not determine default backend path')."""
    target = Target("ep", "qnn", None, QNN, "cpu")
    decided, options = plain_provider_options(target, {"soc_model": "60"})
    assert options == {"soc_model": "60", "backend_type": "htp"} and decided.asked == (("soc_model", "60"),)


def test_what_ran_is_read_from_the_node_assignment_not_from_get_providers(tmp_path):
    """Every node on CPU under a QNN session was reported as model: QNNExecutionProvider."""
    session = OnnxSession(models.mlp(tmp_path / "mlp.onnx"), ep="cpu")
    session.target = Target("ep", "qnn", None, QNN, "cpu")
    session.providers = [QNN, CPU]
    session.node_assignment = {CPU: 3}
    assert session.actual_route()["model"] == CPU
    session.node_assignment = {QNN: 2, CPU: 1}
    assert session.actual_route()["model"] == QNN
