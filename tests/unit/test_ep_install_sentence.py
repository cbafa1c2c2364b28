"""One sentence per EP says how to get it (issue 38), made from its entry in ep/table.py: README's
"Getting WebGPU, QNN, OpenVINO" holds each verbatim, `winml devices` prints it for each EP not here,
and the errors of an unavailable EP (forced, or named by a bundle's config) quote it."""

from __future__ import annotations

import json
import re
import tomllib

import pytest
from typer.testing import CliRunner

from tests.conftest import REPO
from winml_perf.cli import app
from winml_perf.ep import table as eps
from winml_perf.ep.devices import EPDevice
from winml_perf.support.errors import EPUnavailableError


def test_readme_says_how_to_get_each_ep_in_the_tables_words():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme.split("### Getting WebGPU, QNN, OpenVINO", 1)[1].split("\n### ", 1)[0]
    listed = [line[2:] for line in section.splitlines() if line.startswith("- ")]
    assert listed == eps.install_sentences()
    for extra in (".[webgpu]", ".[qnn]", ".[openvino]"):
        assert extra in section


def test_every_extra_a_sentence_names_exists_in_pyproject():
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for info in eps.EPS.values():
        if info.install_extra:
            assert any(dep.startswith(info.install_package) for dep in extras[info.install_extra]), info.name


def _device(ep: str) -> EPDevice:
    return EPDevice(ep, "vendor", "cpu", "vendor", None, None, "builtin")


def test_devices_prints_the_sentence_of_each_ep_not_here(monkeypatch):
    from winml_perf.commands import devices as cmd

    monkeypatch.setattr(cmd, "register_plugin_eps", lambda libs: [])
    monkeypatch.setattr(cmd, "list_ep_devices", lambda: [_device("CPUExecutionProvider")])
    result = CliRunner().invoke(app, ["devices"], env={"COLUMNS": "500"})
    assert result.exit_code == 0, result.output
    for sentence in eps.install_sentences():
        assert f"  {sentence}\n" in result.stderr
    doc = json.loads(CliRunner().invoke(app, ["devices", "--format", "json"]).stdout)
    assert {m["ep"] for m in doc["not_here"]} == set(eps.EPS) - {"CPUExecutionProvider"}


@pytest.mark.parametrize("alias", ["webgpu", "qnn", "openvino"])
def test_a_forced_ep_that_is_not_here_quotes_its_sentence(alias):
    from winml_perf.ep.devices import resolve_target

    name = eps.normalize_ep_name(alias)
    with pytest.raises(EPUnavailableError) as raised:
        resolve_target(alias, None, "winml-genai", devices=[_device("CPUExecutionProvider")])
    assert eps.install_sentence(name) in str(raised.value)
    assert not re.search(r"install or register its plugin", str(raised.value))
