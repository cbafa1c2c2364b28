"""A forced route that resolves to exactly the config route (same EP and options for every stage,
nothing compiled) is measured once, shown as config, and its label is recorded on the config cell."""

from __future__ import annotations

import pytest

from tests.conftest import TINY_FLAT, TINY_PIPELINE, run_winml

pytestmark = pytest.mark.e2e

RUN = ("--prompt-tokens", "4", "--max-new-tokens", "3", "--warmup", "1", "--iterations", "2", "--invocations", "1")


@pytest.mark.parametrize(
    "bundle, routes",
    [
        (TINY_FLAT, ("config", "ep=cpu")),
        (TINY_PIPELINE, ("ep=cpu", "config")),  # the config route is the one measured, whatever the order
    ],
    ids=["flat", "pipeline-forced-first"],
)
def test_ep_cpu_on_a_cpu_only_bundle_is_measured_once_as_config(bundle, routes, tmp_path):
    store = tmp_path / "s.db"
    args = [a for r in routes for a in ("--route", r)]
    result = run_winml("perf", bundle, *args, *RUN, "--format", "json", "--store", store)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "ep=cpu is the config route on this bundle: measured once, shown as config" in result.stderr
    (cell,) = result.json()["cells"]  # one cell: ep=cpu was not measured a second time
    assert cell["route"]["label"] == "config" and cell["route"]["aliases"] == ["ep=cpu"]
    assert "route_no_effect" not in {w["code"] for w in cell["warnings"]}  # nothing duplicated left to warn about
    rows = run_winml("results", "list", "--store", store, "--format", "json").json()
    assert [(r["route"], r["n_samples"]) for r in rows] == [("config", 2)]


def test_a_lone_forced_route_that_changes_nothing_is_still_measured_and_warned():
    result = run_winml("perf", TINY_FLAT, "--route", "ep=cpu", *RUN, "--format", "json", "--no-store")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "measured once" not in result.stderr
    (cell,) = result.json()["cells"]
    assert cell["route"]["label"] == "ep=cpu" and "aliases" not in cell["route"]
    assert "route_no_effect" in {w["code"] for w in cell["warnings"]}
