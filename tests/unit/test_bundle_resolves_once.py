"""`winml bundle prepare` resolves its target once a command (issue 39): the value is passed down,
never resolved again, whether the EP is planned (no compile) or required here (--compile)."""

from __future__ import annotations

import shutil

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
