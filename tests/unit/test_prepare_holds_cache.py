"""Whoever prepares a derived route holds the bundle's artifact cache (bundle/cache.py ``holding``) once,
around the whole prepare: `winml perf` once a run (measure/prepare.py), `winml bundle prepare` and
`winml bundle import-prepared` once a command. bundle/prepare.py's prepare_route takes no hold of its own."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.conftest import TINY_FLAT
from tests.unit.bundle_fakes import ep_target
from winml_perf.bundle import cache
from winml_perf.bundle import prepare as bundle_prepare
from winml_perf.cli import app

pytestmark = pytest.mark.skipif(os.name == "nt", reason="flock")


@pytest.fixture
def bundle(tmp_path):
    dst = tmp_path / "tiny-qwen2"
    shutil.copytree(TINY_FLAT, dst, ignore=shutil.ignore_patterns("_compiled"))
    return dst


def _held(bundle: Path) -> bool:
    """Whether someone holds ``bundle``'s artifact root (a `bundle clean` would wait)."""
    import fcntl

    lock = cache.root_for(bundle) / cache.ROOT_LOCK
    if not lock.exists():
        return False
    fd = os.open(lock, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


@pytest.fixture
def checked(monkeypatch):
    """Each derive and placement read of bundle/prepare.py, as whether the bundle's cache was held then."""
    seen: list[tuple[str, bool]] = []
    derive, placement = bundle_prepare.derive_bundle, bundle_prepare.derived_placement

    def deriving(plan, **kw):
        seen.append(("derive", _held(Path(plan.config.bundle))))
        return derive(plan, **kw)

    def placing(folder, key, config):
        seen.append(("placement", _held(Path(folder).parent.parent)))
        return placement(folder, key, config)

    monkeypatch.setattr(bundle_prepare, "derive_bundle", deriving)
    monkeypatch.setattr(bundle_prepare, "derived_placement", placing)
    return seen


def test_bundle_prepare_derives_and_places_under_its_own_hold(bundle, checked):
    result = CliRunner().invoke(app, ["bundle", "prepare", str(bundle), "--ep", "cpu", "--format", "json"])
    assert result.exit_code == 0, result.output
    assert checked == [("derive", True), ("placement", True)]
    assert not _held(bundle)  # released when the command is done


def test_import_prepared_derives_under_its_own_hold(bundle, checked, monkeypatch, tmp_path):
    from winml_perf.bundle.epcontext import export as ex

    doc = {"options": {"asked": {}}, "jobs": [{"ep": "CPUExecutionProvider"}]}
    monkeypatch.setattr(ex, "read_export", lambda source: doc)
    monkeypatch.setattr(ex, "check_here", lambda doc, bundle, jobs: None)
    monkeypatch.setattr(ex, "runner", lambda source, doc: None)  # nothing to compile on cpu: no job to run
    result = CliRunner().invoke(app, ["bundle", "import-prepared", str(bundle), str(tmp_path / "export")])
    assert result.exit_code == 0, result.output
    assert checked == [("derive", True), ("placement", True)]


def test_prepare_route_takes_no_hold_of_its_own(bundle, checked, monkeypatch):
    """The caller's hold is the only one: prepare_route never asks cache.holding (it did, for callers without one)."""

    def refused(source_dir):
        raise AssertionError(f"prepare_route held {source_dir} itself")

    monkeypatch.setattr(cache, "holding", refused)
    route = bundle_prepare.prepare_route(bundle, ep_target("cpu"), require_available=False)
    assert route.derived_path is not None and route.derived_path.parent.parent == bundle
    assert checked == [("derive", False), ("placement", False)]  # no caller held it here
