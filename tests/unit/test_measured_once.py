"""measure/genai_route.measured_once: routes that run exactly the config are measured once."""

from __future__ import annotations

from winml_perf.measure.genai_route import measured_once
from winml_perf.model.route import BUNDLE, MODEL, CompileOutcome, Route
from winml_perf.model.spec import RouteSpec


def _spec(label: str, effective: str, kind: str = BUNDLE, compiled: bool = False) -> RouteSpec:
    requested = label.split("[")[0]
    outcomes = (
        (CompileOutcome(("decoder",), "model.onnx", "QNNExecutionProvider", "x.onnx", "compiled"),) if compiled else ()
    )
    route = Route(label, requested, effective, kind=kind, path=f"/b/{label}", compile=outcomes)
    return RouteSpec.from_route(route, "/b")


def test_a_forced_route_that_changes_nothing_is_folded_into_config_in_either_order(capsys):
    for order in (["config", "ep=cpu"], ["ep=cpu", "config"]):
        specs = {s.label: s for s in (_spec("config", "config"), _spec("ep=cpu", "config"), _spec("ep=qnn", "ep=qnn"))}
        out = measured_once([specs[label] for label in order] + [specs["ep=qnn"]])
        assert [s.label for s in out] == ["config", "ep=qnn"]
        assert out[0].recorded_route.aliases == ("ep=cpu",) and out[1].recorded_route.aliases == ()
        assert "ep=cpu is the config route on this bundle: measured once, shown as config" in capsys.readouterr().err


def test_without_a_config_route_the_first_no_op_route_is_kept(capsys):
    out = measured_once([_spec("ep=cpu", "config"), _spec("ep=cpu[decoder]", "config")])
    assert [(s.label, s.recorded_route.aliases) for s in out] == [("ep=cpu", ("ep=cpu[decoder]",))]
    assert "ep=cpu[decoder] is the ep=cpu route on this bundle" in capsys.readouterr().err


def test_routes_that_differ_are_all_measured(capsys):
    specs = [
        _spec("config", "config"),
        _spec("ep=cpu", "ep=cpu"),  # moved a stage
        _spec("ep=qnn", "config", compiled=True),  # compiled EPContext stages: not the config
        _spec("ep=webgpu", "ep=webgpu", kind=MODEL),
    ]
    assert measured_once(specs) == specs
    assert measured_once([_spec("ep=cpu", "config")])[0].recorded_route.aliases == ()  # alone: measured as asked
    assert capsys.readouterr().err == ""


def test_aliases_travel_through_the_record_json():
    route = Route("config", "config", "config", kind=BUNDLE, path="/b", aliases=("ep=cpu",))
    d = route.to_dict()
    assert d["aliases"] == ["ep=cpu"] and Route.from_dict(d) == route
    assert "aliases" not in Route("config", "config", "config", kind=BUNDLE, path="/b").to_dict()
