"""`winml bundle prepare` resolves its target once a command (issue 39): the value is passed down,
never resolved again, whether the EP is planned (no compile) or required here (--compile)."""

from __future__ import annotations

import shutil
import sys

import pytest
from typer.testing import CliRunner

from tests.conftest import TINY_FLAT
from winml_perf.cli import app
from winml_perf.ep import devices


@pytest.fixture
def bundle(tmp_path):
    dst = tmp_path / "tiny-qwen2"
    shutil.copytree(TINY_FLAT, dst, ignore=shutil.ignore_patterns("_compiled"))
    return dst


@pytest.fixture
def resolved(monkeypatch):
    """Every call of ep.devices.resolve_target, as (ep, device), however it is reached."""
    calls: list[tuple[str | None, str | None]] = []
    real = devices.resolve_target

    def counting(ep, device, *args, **kw):
        calls.append((ep, device))
        return real(ep, device, *args, **kw)

    monkeypatch.setattr(devices, "resolve_target", counting)
    return calls


@pytest.mark.parametrize(
    "flags",
    [
        ["--ep", "cpu", "--compile"],  # compiling needs the EP here: resolved, not planned then resolved again
        ["--ep", "cpu"],  # planned: resolved here because cpu is here
        ["--device", "cpu"],
    ],
)
def test_bundle_prepare_resolves_its_target_once(bundle, resolved, flags):
    result = CliRunner().invoke(app, ["bundle", "prepare", str(bundle), *flags, "--format", "json"])
    assert result.exit_code == 0, result.output
    assert len(resolved) == 1, resolved


@pytest.mark.parametrize(
    ("command", "flags"),
    [("prepare", ["--ep", "cpu", "--compile"]), ("prepare", ["--ep", "cpu"]), ("show", ["--ep", "cpu"])],
)
def test_bundle_commands_normalise_the_ep_once(bundle, monkeypatch, command, flags):
    """The EP as spelled is normalised once (commands/bundle.py), then handed on as its canonical name."""
    from winml_perf.ep import table

    spelled: list[str] = []
    real = table.normalize_ep_name

    def counting(name):
        spelled.append(name)
        return real(name)

    for module in [m for m in list(sys.modules.values()) if getattr(m, "__name__", "").startswith("winml_perf")]:
        if getattr(module, "normalize_ep_name", None) is real:
            monkeypatch.setattr(module, "normalize_ep_name", counting)
    result = CliRunner().invoke(app, ["bundle", command, str(bundle), *flags, "--format", "json"])
    assert result.exit_code == 0, result.output
    assert spelled == ["cpu"], spelled
