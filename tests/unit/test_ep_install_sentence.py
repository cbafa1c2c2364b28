"""One sentence per EP says how to get it (issue 38), made from its entry in ep/table.py: README's
"Getting WebGPU, QNN, OpenVINO" holds it verbatim for each EP it lists (those its heading names at
least; a new EP needs no line there), `winml devices` prints it for each EP not here,
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

_HEADING = "### Getting WebGPU, QNN, OpenVINO"
#: README's promise that every EP of the table is one command away, not only those it lists.
_EVERY_EP = "`winml devices` lists what this machine has, then the line of every other EP in the table"


def _readme_section() -> str:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    return readme.split(_HEADING, 1)[1].split("\n### ", 1)[0]


def _listed() -> dict[str, str]:
    """README's EP lines by the EP each names (its alias, before the colon)."""
    lines = [line[2:] for line in _readme_section().splitlines() if line.startswith("- ")]
    names = [eps.normalize_ep_name(line.split(":", 1)[0]) for line in lines]  # an EP not in the table: UsageError
    assert len(set(names)) == len(names), "README lists an EP twice"
    return dict(zip(names, lines, strict=True))


def test_readme_says_how_to_get_each_ep_in_the_tables_words():
    """Each line README gives is its EP's sentence from the table, word for word (an EP the table lacks or a
    wrong command fails); the EPs its heading names are listed; every other table EP's line is one command away
    (`winml devices`, test_devices_prints_the_sentence_of_each_ep_not_here), which README says. A new EP needs
    no README line."""
    listed = _listed()
    for name, line in listed.items():
        assert line == eps.install_sentence(name), f"README's line for {name} is not the table's sentence"
    headed = [eps.normalize_ep_name(word) for word in _HEADING.removeprefix("### Getting ").split(", ")]
    unlisted = [name for name in headed if name not in listed]
    assert not unlisted, f"README's heading names {unlisted} but gives no line for them"
    assert list(listed) == [name for name in eps.EPS if name in listed]  # in table order
    section = " ".join(_readme_section().split())
    assert _EVERY_EP in section
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
