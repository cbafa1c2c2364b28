"""Route parsing, request wiring and store-failure handling of `winml perf`'s orchestrator."""

from pathlib import Path

import pytest

from tests.conftest import TINY_FLAT, TINY_PIPELINE
from winml_perf.ep.resolved import resolve_routes
from winml_perf.ep.route_request import route_requests
from winml_perf.measure.orchestrate import PerfRequest, RouteRequest, parse_route, run_benchmark
from winml_perf.model.runtime import runtime_named
from winml_perf.model.spec import IterationPolicy, WarmupPolicy
from winml_perf.support.errors import StoreError, UsageError


@pytest.mark.parametrize(
    "text,expected,label",
    [
        ("config", RouteRequest(), "config"),
        ("ep=webgpu", RouteRequest(ep="webgpu"), "ep=webgpu"),
        ("device=gpu", RouteRequest(device="gpu"), "device=gpu"),
        (
            "ep=webgpu;stages=context,iterator",
            RouteRequest(ep="webgpu", stages=("context", "iterator")),
            "ep=webgpu[context,iterator]",
        ),
        (" ep=cpu ; stages = context ", RouteRequest(ep="cpu", stages=("context",)), "ep=cpu[context]"),
        (
            "ep=qnn;options=soc_model=60,htp_arch=73",
            RouteRequest(ep="qnn", options=(("htp_arch", "73"), ("soc_model", "60"))),
            "ep=qnn(htp_arch=73,soc_model=60)",
        ),
        (
            "ep=qnn;stages=iterator;options=soc_model=88",
            RouteRequest(ep="qnn", stages=("iterator",), options=(("soc_model", "88"),)),
            "ep=qnn(soc_model=88)[iterator]",
        ),
    ],
)
def test_parse_route(text, expected, label):
    r = parse_route(text)
    assert r == expected and r.label == label


@pytest.mark.parametrize(
    "text",
    [
        "gpu",
        "ep=",
        "fast=1",
        "config;stages=context",
        "ep=cpu;layers=1",
        "config;options=soc_model=60",
        "ep=qnn;options=soc_model",
        "ep=qnn;options=a=1;options=b=2",
    ],
)
def test_bad_routes_are_usage_errors(text):
    with pytest.raises(UsageError, match="--route"):
        parse_route(text)


@pytest.mark.parametrize(
    "text,fix",
    [
        ("ep=cpu,intra_op_num_threads=1", "--route 'ep=cpu;options=intra_op_num_threads=1'"),
        ("ep=qnn,soc_model=60;stages=context", "--route 'ep=qnn;options=soc_model=60'"),
        ("device=npu,x=1", "--route 'device=npu;options=x=1'"),
    ],
)
def test_options_written_into_the_ep_name_point_to_the_options_part(text, fix):
    """The EP named with its options glued on (a likely first try) is refused at parse time with the
    route's own syntax, not later as an unknown EP of --ep."""
    with pytest.raises(UsageError) as e:
        parse_route(text)
    assert "--route" in str(e.value) and "';options='" in str(e.value) and fix in e.value.remedy


@pytest.mark.parametrize(
    "text,fix",
    [
        ("ep=cpu stages=decoder", "--route 'ep=cpu;stages=decoder'"),
        ("ep=qnn,stages=context,iterator", "--route 'ep=qnn;stages=context,iterator'"),
        ("ep=qnn options=soc_model=60", "--route 'ep=qnn;options=soc_model=60'"),
    ],
)
def test_a_route_part_glued_on_with_a_space_or_comma_points_to_its_own_part(text, fix):
    """``stages=``/``options=`` written after the EP name without ';' get a remedy that runs as given."""
    with pytest.raises(UsageError) as e:
        parse_route(text)
    assert fix in e.value.remedy
    parse_route(fix.removeprefix("--route ").strip("'"))


@pytest.mark.parametrize(
    "routes,flags,wrong",
    [
        (["ep=cpuu"], {}, "unknown execution provider 'cpuu' (--route 'ep=cpuu')"),
        (
            ["config", "ep=cpuu;stages=decoder"],
            {},
            "unknown execution provider 'cpuu' (--route 'ep=cpuu;stages=decoder')",
        ),
        ([], {"ep": "cpuu"}, "unknown execution provider 'cpuu' (--ep)"),
    ],
)
def test_an_unknown_ep_names_the_flag_it_came_from(routes, flags, wrong):
    """A typo in --route is refused naming that --route, not --ep, which was not given; --ep's names --ep."""
    asked = route_requests(routes, flags.get("ep"), None, None)
    with pytest.raises(UsageError) as e:
        resolve_routes(asked, runtime_named("winml-genai"))
    assert wrong in str(e.value)


def test_an_unknown_device_in_a_route_names_the_route_not_device():
    with pytest.raises(UsageError) as e:
        parse_route("device=gpuu")
    assert "unknown device 'gpuu' (--route 'device=gpuu')" in str(e.value)


def _request(path: Path, **kw) -> PerfRequest:
    base = dict(
        path=path,
        prompt_tokens=(8,),
        max_new_tokens=(4,),
        warmup=WarmupPolicy(count=0),
        iterations=IterationPolicy(iterations=2),
        quiet=True,
        isolate=False,
    )
    return PerfRequest(**{**base, **kw})


def test_two_routes_run_interleaved_and_are_stored(tmp_path):
    store = tmp_path / "s.db"
    out = run_benchmark(
        _request(TINY_PIPELINE, routes=(RouteRequest(), RouteRequest(ep="qnn", stages=("context",))), store=str(store))
    )
    labels = [c.route.label for c in out.run.cells]
    assert labels == ["config", "ep=qnn[context]"] and out.store_errors == []
    from winml_perf.results import load

    assert len(load(str(store))) == 2
    order = out.run.sweep["order"]
    assert order and all(set(o["order"]) == {"config|p8|n4", "ep=qnn[context]|p8|n4"} for o in order)


def test_a_cell_that_cannot_be_stored_does_not_stop_the_sweep(tmp_path, monkeypatch):
    from winml_perf.results.store import Store

    calls = []

    def failing_write(self, record):
        calls.append(record.cell_key)
        if len(calls) == 1:
            raise StoreError("connection to the database was lost")
        return 1

    monkeypatch.setattr(Store, "write_record", failing_write)
    out = run_benchmark(_request(TINY_FLAT, max_new_tokens=(2, 4), store=str(tmp_path / "s.db")))
    assert len(out.run.cells) == 2 and len(calls) == 2
    assert len(out.store_errors) == 1 and "connection to the database was lost" in out.store_errors[0]


def test_no_store_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = run_benchmark(_request(TINY_FLAT, no_store=True))
    assert out.store is None and not (tmp_path / "results").exists()


@pytest.mark.parametrize("asked", ["device=gpuu", "ep=cpu,intra_op_num_threads=1", "ep=cpu;bogus=1", "gpu"])
def test_a_reference_no_route_could_be_is_refused_as_of_reference(asked):
    """--reference with a spelling --route would refuse is not one of the run's routes: the error names
    --reference and the routes, not a --route the user did not write."""
    from winml_perf.ep.route_request import reference_label

    with pytest.raises(UsageError) as e:
        reference_label(asked, (RouteRequest(), RouteRequest(ep="cpu")))
    assert str(e.value).startswith(f"--reference {asked}: not one of this run's routes (config, ep=cpu)")
