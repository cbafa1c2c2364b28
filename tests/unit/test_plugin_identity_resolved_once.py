"""What each plugin EP library is (ep/plugins.py identity_of) is asked once a command, where its
plugins are registered (``plugins_here``: ep/resolved.py for `winml perf`, commands/bundle.py and
commands/bundle_travel.py for `winml bundle prepare` and `import-prepared`), and handed down: a derived
bundle's key holds that value and bundle/derive.py asks no plugin identity again (it used to ask
``plugin_identity`` once a route)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.conftest import TINY_FLAT
from winml_perf.cli import app
from winml_perf.ep import plugins
from winml_perf.ep.resolved import resolve_request
from winml_perf.ep.route_request import RouteRequest
from winml_perf.measure import prepare as prepare_phase
from winml_perf.measure.request import PerfRequest
from winml_perf.model.runtime import GENAI

QNN = "QNNExecutionProvider"
SDK = "9.99-resolved-once"  # a QNN SDK no machine has: only the one resolution hands it on


@pytest.fixture
def bundle(tmp_path):
    pytest.importorskip("onnxruntime_qnn")
    dst = tmp_path / "tiny-qwen2"
    shutil.copytree(TINY_FLAT, dst, ignore=shutil.ignore_patterns("_compiled"))
    return dst


@pytest.fixture
def identified(monkeypatch):
    """Each identity_of call, with QNN's SDK marked; plugin_identity (the per-EP ask) refused."""
    calls: list[str] = []
    real = plugins.identity_of

    def marked(reg):
        calls.append(reg.ep_name)
        ident = real(reg)
        return {**ident, "sdk_version": SDK} if reg.ep_name == QNN else ident

    monkeypatch.setattr(plugins, "identity_of", marked)
    monkeypatch.setattr(plugins, "plugin_identity", lambda ep: pytest.fail(f"{ep}'s plugin identity asked again"))
    return calls


def _keyed_sdk(route_path) -> str:
    manifest = json.loads((route_path / "manifest.json").read_text())
    return manifest["components"]["plugins"][QNN]["sdk_version"]


def test_the_resolved_request_holds_each_registered_plugins_identity(bundle, identified):
    resolved = resolve_request((RouteRequest(ep="qnn"),), GENAI)
    assert resolved.plugins.identities[QNN]["sdk_version"] == SDK
    assert identified.count(QNN) == 1
    assert f"{QNN}=" in " ".join(resolved.plugins.specs)


def test_a_perf_runs_derived_bundle_is_keyed_by_the_identity_its_resolution_took(bundle, identified):
    req = PerfRequest(path=bundle, routes=(RouteRequest(ep="qnn"),))
    (route,) = prepare_phase.prepare_request(req)
    assert route.recorded_route.derived_path is not None
    assert _keyed_sdk(route.recorded_route.derived_path) == SDK
    assert identified.count(QNN) == 1  # once a run, where its plugins were registered


def test_bundle_prepare_keys_its_route_by_the_identity_it_registered(bundle, identified):
    result = CliRunner().invoke(app, ["bundle", "prepare", str(bundle), "--ep", "qnn", "--format", "json"])
    assert result.exit_code == 0, result.output
    derived = json.loads(result.stdout)["derived_path"]
    assert _keyed_sdk(Path(derived)) == SDK
    assert identified.count(QNN) == 1


def test_a_caller_that_says_nothing_of_its_plugins_still_keys_by_their_identity(bundle, monkeypatch):
    """prepare_route with no holdings (a script, benchmarks/bench_qnn.py) gets the same kind of key as a
    run: the plugin's identity asked for the route's EP, never left out (a new QNN SDK would otherwise
    reuse a derived bundle compiled by the old one)."""
    from winml_perf.bundle.prepare import prepare_route
    from winml_perf.ep.devices import resolve_target

    plugins.register_plugin_eps([])  # the installed onnxruntime-qnn, as a script would have it
    real = plugins.plugin_identity
    monkeypatch.setattr(
        plugins, "plugin_identity", lambda ep: {**ident, "sdk_version": SDK} if (ident := real(ep)) else ident
    )
    route = prepare_route(bundle, resolve_target("qnn", None, GENAI))
    assert route.derived_path is not None and _keyed_sdk(route.derived_path) == SDK
