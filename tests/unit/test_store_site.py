"""results/location.py find_store: a store's location, file, schema and writability decided in one
look before results/store.py opens it; the location's unstored path decided with it."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from winml_perf.results import location
from winml_perf.results import migrations as mig
from winml_perf.results.store import open_store
from winml_perf.support.errors import StoreError


def _store_with(path: Path, names: list[str]) -> Path:
    con = sqlite3.connect(path)
    con.execute(f"CREATE TABLE {mig.MIGRATIONS_TABLE} (name TEXT PRIMARY KEY, applied_utc TEXT)")
    con.executemany(f"INSERT INTO {mig.MIGRATIONS_TABLE} VALUES (?, 'x')", [(n,) for n in names])
    con.commit()
    con.close()
    return path


def test_the_unstored_path_is_decided_with_the_location(tmp_path, monkeypatch):
    assert location.resolve_location(tmp_path / "s.db").unstored == tmp_path / "s.db.unstored"
    pg = location.resolve_location("postgresql://u@h/db")
    assert pg.unstored == Path("results") / "postgresql.unstored"  # under the working folder when written


@pytest.fixture
def deleted_cwd(tmp_path, monkeypatch):
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    return gone


def test_a_postgresql_location_does_not_touch_the_working_folder(deleted_cwd, monkeypatch):
    """A PostgreSQL store has nothing under the working folder: a deleted one is not read."""
    monkeypatch.setattr(Path, "cwd", lambda: pytest.fail("a PostgreSQL location asked for the working folder"))
    site = location.find_store("postgresql://u@h/db")
    assert site.location.dialect == "postgresql" and site.location.path is None


def test_a_relative_store_under_a_deleted_working_folder_is_refused_naming_it(deleted_cwd):
    for value in (None, "s.db", "sqlite:///s.db"):
        with pytest.raises(StoreError) as info:
            location.resolve_location(value, env={})
        assert "is named relative to the working folder, which no longer exists" in info.value.message
        assert "cd to an existing folder" in info.value.remedy
    assert location.resolve_location(deleted_cwd.parent / "s.db").path == deleted_cwd.parent / "s.db"


def test_a_current_store_nobody_can_write_is_found_read_only_for_readers(tmp_path, monkeypatch):
    open_store(tmp_path / "s.db").close()
    monkeypatch.setattr(location, "writable", lambda path: False)
    site = location.find_store(tmp_path / "s.db", create=False)
    assert site.read_only and site.location.path == tmp_path / "s.db"
    with pytest.raises(StoreError, match=r"is read-only \(the file or its folder\)"):
        location.find_store(tmp_path / "s.db")  # a writer is refused
    store = open_store(tmp_path / "s.db", create=False)
    try:
        assert store.read_only
    finally:
        store.close()


def test_a_writable_store_is_found_writable(tmp_path):
    assert not location.find_store(tmp_path / "new.db").read_only
    assert not (tmp_path / "new.db").exists()  # finding makes no file


def test_schema_refusals_come_before_the_read_only_one(tmp_path, monkeypatch):
    older = _store_with(tmp_path / "older.db", [mig.MIGRATIONS[0].name])
    newer = _store_with(tmp_path / "newer.db", [m.name for m in mig.MIGRATIONS] + ["9999_from_the_future"])
    monkeypatch.setattr(location, "writable", lambda path: False)
    with pytest.raises(StoreError, match="older schema"):
        location.find_store(older, create=False)
    with pytest.raises(StoreError, match=r"is read-only \(the file or its folder\)"):
        location.find_store(older)  # a writer is told the file is read-only, not that it is old
    with pytest.raises(StoreError, match="newer version"):
        location.find_store(newer)


def test_a_folder_given_as_the_store_is_called_a_folder_and_the_fix_names_a_file_in_it(tmp_path):
    """`--store DIR` said "move this file away": a folder is not a file, and moving it is no fix."""
    with pytest.raises(StoreError) as info:
        location.find_store(tmp_path)
    assert info.value.message == f"results store {tmp_path} is a folder, not a database file; it was left untouched"
    inside = tmp_path / "winml-perf.db"
    assert info.value.remedy.startswith(f"pass --store {inside} (a store file in that folder)")
    assert "move this file" not in str(info.value)
    assert location.find_store(inside).location.path == inside  # the remedy, followed, works
