"""A bundle's identity beyond its folder name (issue 28): a digest of its content, stored with each
record (records.bundle_id, migration 0008), part of the series identity, and shown beside the name
only where two bundles of what is listed share one."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3

import pytest
from typer.testing import CliRunner

from tests.conftest import TINY_FLAT
from tests.results_fakes import hex_id, make_cell
from winml_perf.cli import app
from winml_perf.compare.text import bundle_labels
from winml_perf.model.record import CellRecord
from winml_perf.record.bundle_identity import bundle_id
from winml_perf.record.validation import validated_cell
from winml_perf.results import load
from winml_perf.results import rows as R
from winml_perf.results.store import open_store
from winml_perf.support.errors import WinmlPerfError


def series_key(doc: dict) -> str:
    """The series key the store gives a record file's JSON (results/rows.py reads it typed)."""
    return R.series_key(R.typed_record(doc))


ID_A, ID_B = "a1b2c3d4e5f6", "0f0e0d0c0b0a"


@pytest.fixture
def copies(tmp_path):
    def copy(where: str):
        dst = tmp_path / where / "tiny-qwen2"
        shutil.copytree(TINY_FLAT, dst, ignore=shutil.ignore_patterns("_compiled"))
        return dst

    return copy


def test_the_same_content_in_another_folder_is_the_same_bundle(copies):
    a, b = copies("a"), copies("b")
    assert bundle_id(a) == bundle_id(b) == bundle_id(TINY_FLAT)  # TINY_FLAT's _compiled/ is not content
    (b / "_compiled").mkdir()
    (b / "_compiled" / "x.onnx").write_bytes(b"derived")
    assert bundle_id(b) == bundle_id(a)


def test_other_weights_under_the_same_name_are_another_bundle(copies):
    a, b = copies("a"), copies("b")
    data = b / "model.onnx.data"
    raw = bytearray(data.read_bytes())
    raw[len(raw) // 2] ^= 0x01  # one bit of one weight; size and name unchanged
    data.write_bytes(bytes(raw))
    assert bundle_id(b) != bundle_id(a)
    assert bundle_id(a / "model.onnx") != bundle_id(b / "model.onnx")  # a plain model counts its external data
    assert bundle_id(a / "nothing-here") is None


def test_large_weights_are_known_by_their_size_and_spread_samples(tmp_path):
    from winml_perf.record.bundle_identity import FULL_HASH_BYTES

    def bundle(where: str, poke: int | None = None, size: int = FULL_HASH_BYTES + (8 << 20)):
        folder = tmp_path / where / "big"
        folder.mkdir(parents=True)
        (folder / "genai_config.json").write_text("{}")
        with open(folder / "model.onnx.data", "wb") as f:  # sparse: no disk is spent on the zeros
            f.truncate(size)
            if poke is not None:
                f.seek(poke)
                f.write(b"\x01")
        return folder

    same = bundle_id(bundle("a"))
    assert same == bundle_id(bundle("b")) and same is not None
    assert bundle_id(bundle("first-byte", poke=0)) != same  # the first and last bytes are sampled
    assert bundle_id(bundle("last-byte", poke=FULL_HASH_BYTES + (8 << 20) - 1)) != same
    assert bundle_id(bundle("longer", size=FULL_HASH_BYTES + (9 << 20))) != same


def test_labels_name_the_path_only_where_names_clash():
    labels = bundle_labels([("tiny-qwen2", "/x/a/tiny-qwen2"), ("tiny-qwen2", "/x/b/tiny-qwen2"), ("phi", "/x/phi")])
    assert labels[("phi", "/x/phi")] == "phi"
    assert labels[("tiny-qwen2", "/x/a/tiny-qwen2")] == "a/tiny-qwen2"
    assert labels[("tiny-qwen2", "/x/b/tiny-qwen2")] == "b/tiny-qwen2"
    deeper = bundle_labels([("m", "/n1/a/m"), ("m", "/n2/a/m")])  # the tail grows until it tells them apart
    assert deeper[("m", "/n1/a/m")] == "n1/a/m" and deeper[("m", "/n2/a/m")] == "n2/a/m"
    labelled = bundle_labels([("m", "/n1/a/m"), ("m", None)])  # a --series label named like a folder
    assert labelled[("m", None)] == "m (--series)" and labelled[("m", "/n1/a/m")] == "a/m"


def _cell(name: str, bid: str | None, when: str = "2025-01-01T02:00:00Z", path: str = "/a") -> dict:
    cell = make_cell(hex_id(name, bid, when, path), bundle=f"{path}/tiny-qwen2", when=when)
    if bid is not None:
        cell["bundle_id"] = bid
    return cell


def test_the_record_carries_its_id_and_the_schema_checks_it():
    cell = validated_cell(_cell("r", ID_A))
    assert CellRecord.from_dict(cell).to_dict()["bundle_id"] == ID_A
    assert "bundle_id" not in CellRecord.from_dict(_cell("r", None)).to_dict()  # unknown: left out
    with pytest.raises(WinmlPerfError, match="bundle_id"):
        validated_cell(_cell("r", "not-a-digest"))


def test_bundles_named_alike_are_two_series_and_a_rebuild_in_place_stays_one(tmp_path):
    """Issue 35's rule: a series' bundle is its path (or the user's --series label), not its content."""
    a1, b = _cell("a1", ID_A), _cell("b", ID_B, path="/b")
    a2 = _cell("a2", ID_B, "2025-01-02T02:00:00Z")  # /a/tiny-qwen2 rebuilt: other content, same folder
    assert series_key(a1) == series_key(a2) != series_key(b)
    moved = _cell("m", ID_A, "2025-01-03T02:00:00Z", "/elsewhere")
    assert series_key(moved) != series_key(a1)  # another path is another series ...
    x, y = ({**c, "series_label": "nightly"} for c in (a1, moved))
    assert series_key(x) == series_key(y) != series_key(a1)  # ... unless the user names the series
    with open_store(tmp_path / "s.db") as store:
        store.write_json_records([a1, b, a2])
        df = load(store)
    assert list(df["bundle_id"]) == [ID_A, ID_B, ID_B]  # the digest is recorded with every run
    listed = CliRunner().invoke(app, ["results", "list", "--store", str(tmp_path / "s.db")])
    assert listed.stdout.count("a/tiny-qwen2") == 2 and listed.stdout.count("b/tiny-qwen2") == 1


def test_an_old_store_gains_the_column_and_keeps_its_series(tmp_path):
    db = tmp_path / "old.db"
    old = _cell("old", None)
    with open_store(db) as store:
        store.write_json_record(old)
    con = sqlite3.connect(db)  # the store as the code before migration 0008 left it (and so before 0009)
    con.execute("DROP INDEX ix_records_series_shown_digest")
    con.execute(
        "CREATE INDEX ix_records_series_shown ON records (series_key, created_utc, id, status, run_id,"
        " git_commit, winml_perf_version, testbed_id)"
    )
    con.execute("ALTER TABLE records DROP COLUMN series_label")
    con.execute("ALTER TABLE records DROP COLUMN bundle_id")
    con.execute("DELETE FROM schema_migrations WHERE name IN ('0008_bundle_id', '0009_series_by_what_is_tracked')")
    con.commit()
    con.close()
    with open_store(db) as store:
        assert "0008_bundle_id" in store.applied_migrations()
        (row,) = store.records()
        assert row["bundle_id"] is None and row["series_key"] == series_key(old)
        store.write_json_record(_cell("new", ID_A, "2025-01-02T02:00:00Z"))
        keys = [r["series_key"] for r in store.records()]
    assert keys[0] == keys[1]  # the same folder: one series, its content now known (issue 35)
    listed = CliRunner().invoke(app, ["results", "list", "--store", str(db)])
    assert listed.stdout.count("tiny-qwen2") == 2 and "(no id)" not in listed.stdout


def test_a_label_selects_its_bundle_as_listings_show_it(tmp_path):
    db = tmp_path / "s.db"
    with open_store(db) as store:
        store.write_json_records([_cell("a", ID_A), _cell("b", ID_B, path="/b"), _cell("old", None, path="/c")])

    def ids(bundle: str) -> list:
        with open_store(db, create=False) as store:
            df = load(store, bundle=bundle)
        return list(df["bundle_id"]) if "bundle_id" in df else [None] * len(df)

    assert ids("tiny-qwen2 (a1b2c3)") == [ID_A] and ids("tiny-qwen2 (0f0e0d)") == [ID_B]
    assert ids("tiny-qwen2 (no id)") == [None] and len(ids("tiny-qwen2")) == 3
    assert ids("b/tiny-qwen2") == [ID_B] and ids("c/tiny-qwen2") == [None]  # the path tails listings show
    args = ["results", "list", "--store", str(db), "--bundle", "tiny-qwen2 (0f0e0d)", "--format", "json"]
    listed = CliRunner().invoke(app, args)
    assert [r["bundle_id"] for r in json.loads(listed.stdout)] == [ID_B], listed.output


@pytest.mark.parametrize("fmt", ["bmf", "gab-bigger"])
def test_dashboard_exports_keep_bundles_named_alike_apart(tmp_path, fmt):
    from winml_perf.publish import exporters

    with open_store(tmp_path / "s.db") as store:
        store.write_json_records([_cell("a", ID_A), _cell("b", ID_B, path="/b")])
        df = load(store)
    text = exporters.export(df, fmt)
    assert "a/tiny-qwen2 config p16 n8" in text and "b/tiny-qwen2 config p16 n8" in text, text


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_only_regular_files_count_so_a_fifo_or_device_never_blocks_it(copies):
    a, b = copies("a"), copies("b")
    os.mkfifo(b / "pipe")  # opening it to read would wait for a writer forever
    (b / "zeros.bin").symlink_to("/dev/zero")  # reading it would never end
    assert bundle_id(b) == bundle_id(a)
