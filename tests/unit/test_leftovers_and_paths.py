"""A failed dashboard leaves no temporary file; bundle filters compare normalised paths."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from tests.results_fakes import make_cell
from winml_perf.publish import dashboard_page
from winml_perf.results import load
from winml_perf.results.store import open_store
from winml_perf.support import safe_write

RUN = "b" * 32


def test_a_page_that_cannot_be_written_leaves_no_temporary_file(tmp_path, monkeypatch):
    (tmp_path / "index.html").mkdir()  # a folder where the page goes: the rename fails
    with pytest.raises(OSError):
        dashboard_page.write_file(tmp_path / "index.html", "<html></html>")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["index.html"]

    real_open = safe_write._open_new

    def disk_full(tmp):  # the temporary file is made, then the disk is full
        real_open(tmp).close()
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(safe_write, "_open_new", disk_full)
    with pytest.raises(OSError):
        dashboard_page.write_file(tmp_path / "page.html", "<html></html>")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["index.html"]


def test_a_failed_dashboard_command_leaves_no_temporary_file(winml, tmp_path):
    store = tmp_path / "s.db"
    with open_store(store) as s:
        s.write_json_record(make_cell(RUN))
    site = tmp_path / "site"
    (site / "index.html").mkdir(parents=True)
    done = winml("dashboard", "--store", store, "-o", site)
    assert done.returncode == 2, done.stderr
    assert not [p for p in site.rglob("*") if p.name.endswith(".tmp")]


@pytest.fixture
def store_with_b(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    store = tmp_path / "s.db"
    with open_store(store) as s:
        s.write_json_record(make_cell(RUN, bundle="b", index=0))
        s.write_json_record(make_cell(RUN, bundle="./b/", index=1, route="ep=cpu"))
        s.write_json_record(make_cell(RUN, bundle="other/b", index=2, route="ep=x"))
    return store


@pytest.mark.parametrize("given", ["b", "./b", "b/", "./b/", "x/../b", "ABS", "../HERE/b"])
def test_bundle_filters_compare_normalised_paths(store_with_b, given):
    here = Path(os.getcwd())
    given = given.replace("ABS", str(here / "b")).replace("HERE", here.name)
    found = load(str(store_with_b), bundle=given)
    expected = 3 if given == "b" else 2  # a bare name matches every bundle of that name
    assert len(found) == expected, given


def test_another_folder_of_the_same_name_is_not_matched(store_with_b):
    assert len(load(str(store_with_b), bundle="elsewhere/b")) == 0
    assert len(load(str(store_with_b), bundle="other/b")) == 1
