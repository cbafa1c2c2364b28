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
    monkeypatch.chdir(tmp_path)
    pg = location.resolve_location("postgresql://u@h/db")
    assert pg.unstored == tmp_path / "results" / "postgresql.unstored"


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
