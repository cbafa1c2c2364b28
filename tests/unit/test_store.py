"""The results store on SQLite and on a real PostgreSQL server: schema and migrations, record
round trip, idempotent writes, filters, concurrent writers, and refusing bad stores."""

from __future__ import annotations

import json
import os
import random
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import sqlalchemy as sa

from tests.results_fakes import hex_id, make_cell, small_cell
from winml_perf.model.record import CellRecord, RunRecord
from winml_perf.results import load, load_samples
from winml_perf.results import migrations as mig
from winml_perf.results.store import ENV_VAR, open_store, resolve_location
from winml_perf.support.errors import EXIT_USAGE, StoreError
from winml_perf.support.secrets import mask

REPO = Path(__file__).resolve().parents[2]
RUN_A, RUN_B = hex_id("run-a"), hex_id("run-b")


def _tables(url_or_path: str) -> set[str]:
    loc = resolve_location(url_or_path)
    engine = sa.create_engine(loc.url)
    try:
        with engine.connect() as conn:
            return set(sa.inspect(conn).get_table_names())
    finally:
        engine.dispose()


# -- schema ----------------------------------------------------------------------------------------
def test_open_creates_schema_and_records_migrations_once(store_url):
    with open_store(store_url) as store:
        assert store.applied_migrations() == [m.name for m in mig.MIGRATIONS]
        assert store.count() == 0
    with open_store(store_url) as store:  # reopening applies nothing twice
        assert store.applied_migrations() == [m.name for m in mig.MIGRATIONS]
        assert store.migrate() == []
    assert {"schema_migrations", "records", "metrics", "samples"} <= _tables(store_url)


def test_a_store_with_a_newer_schema_is_refused(store_url):
    with open_store(store_url) as store, store.engine.begin() as conn:
        conn.execute(
            mig.schema_migrations.insert().values(name="9999_from_the_future", applied_utc="2099-01-01T00:00:00Z")
        )
    with pytest.raises(StoreError) as err:
        open_store(store_url)
    assert err.value.exit_code == EXIT_USAGE
    assert "9999_from_the_future" in str(err.value) and "newer" in str(err.value)


def test_pending_migrations_are_applied_on_open(store_url):
    with open_store(store_url) as store, store.engine.begin() as conn:  # roll the store back to schema 1
        conn.execute(sa.text("DROP INDEX ix_records_series"))
        conn.execute(sa.text("DROP INDEX ix_samples_record_round"))
        conn.execute(mig.schema_migrations.delete().where(mig.schema_migrations.c.name == "0002_query_indexes"))
    with open_store(store_url) as store:
        assert store.applied_migrations() == [m.name for m in mig.MIGRATIONS]
        assert "0002_query_indexes" in store.applied_migrations()
        with store.engine.connect() as conn:
            names = {ix["name"] for ix in sa.inspect(conn).get_indexes("records")}
        assert "ix_records_series" in names


# -- records ---------------------------------------------------------------------------------------
def test_write_record_keeps_the_record_its_metrics_and_every_raw_sample(store_url):
    cell = make_cell(RUN_A, route="ep=cpu", step_ms=[2.0, 2.5, 1.5], rounds=[0, 0, 1], commit="abcdef123456")
    with open_store(store_url) as store:
        rid = store.write_json_record(cell)
        row = store.get(rid)
        assert row["record"] == cell  # lossless
        assert (row["route"], row["bundle"], row["bundle_path"], row["prompt_tokens"], row["max_new_tokens"]) == (
            "ep=cpu",
            "tiny-qwen2",
            "bundles/tiny-qwen2",
            16,
            8,
        )
        assert (row["run_id"], row["testbed_id"], row["git_commit"], row["status"]) == (
            RUN_A,
            "tb-linux",
            "abcdef123456",
            "ok",
        )
        assert (row["winml_perf_version"], row["onnxruntime_version"], row["genai_version"]) == (
            "0.1.0",
            "1.31.1",
            "0.18.0",
        )
        assert row["created_utc"] == "2025-01-01T02:00:00.000000Z"

        samples = store.samples([rid], phase=None)
        measured = [s for s in samples if s["phase"] == "measured"]
        assert [s["round_index"] for s in measured] == [0, 0, 1]
        assert len([s for s in samples if s["phase"] == "warmup"]) == 1
        for raw, got in zip(cell["samples"]["iterations"], measured):
            assert json.loads(got["decode_step_ms"]) == raw["decode_step_ms"]
            assert got["decode_tokens_per_s"] == pytest.approx(
                len(raw["decode_step_ms"]) / sum(raw["decode_step_ms"]) * 1000
            )
            assert got["prompt_tokens_per_s"] == pytest.approx(raw["prompt_tokens"] / raw["prompt_ms"] * 1000)
            assert got["tpot_ms"] == pytest.approx(sum(raw["decode_step_ms"]) / len(raw["decode_step_ms"]))
            assert got["ttft_ms"] == raw["ttft_ms"] and got["e2e_ms"] == raw["e2e_ms"]

        metrics = {m["name"]: m for m in store.metrics([rid])}
        decode = cell["metrics"]["decode_tokens_per_s"]
        assert metrics["decode_tokens_per_s"]["median"] == pytest.approx(decode["median"])
        assert metrics["decode_tokens_per_s"]["n"] == 3
        assert metrics["itl_ms"]["p95"] == pytest.approx(cell["metrics"]["itl_ms"]["p95"])
        assert metrics["peak_rss_bytes"]["median"] == 200_000_000 and metrics["peak_rss_bytes"]["n"] == 1


def test_writing_the_same_record_twice_stores_it_once(store_url):
    cell = make_cell(RUN_A)
    with open_store(store_url) as store:
        first, second = store.write_json_record(cell), store.write_json_record(cell)
        assert first == second
        assert store.count() == 1
        assert len(store.samples([first], phase=None)) == len(cell["samples"]["iterations"]) + len(
            cell["samples"]["warmup"]
        )


def test_a_failed_cell_is_stored_with_its_failure(store_url):
    with open_store(store_url) as store:
        rid = store.write_json_record(make_cell(RUN_A, status="failed"))
        row = store.get(rid)
        assert row["status"] == "failed" and row["n_samples"] == 0
        assert row["record"]["failure"]["signal_name"] == "SIGKILL"


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda c: c.update(status="weird"), "status"),
        (lambda c: c.pop("samples"), "samples"),
        (lambda c: c.update(schema_version=99), "newer"),
        (lambda c: c.update(kind="run"), "run record"),
    ],
)
def test_invalid_records_are_refused_and_nothing_is_written(store_url, mutate, message):
    cell = make_cell(RUN_A)
    mutate(cell)
    with open_store(store_url) as store:
        with pytest.raises(StoreError, match=message):
            store.write_json_record(cell)
        assert store.count() == 0


def test_write_run_stores_every_cell(store_url):
    cells = [make_cell(RUN_A, route=r, index=i) for i, r in enumerate(("config", "ep=cpu"))]
    when = "2025-01-01T02:00:00Z"
    run = RunRecord(RUN_A, when, when, "ok", {}, {}, cells=tuple(CellRecord.from_dict(c) for c in cells))
    with open_store(store_url) as store:
        assert len(store.write_run(run)) == 2
        assert sorted(r["route"] for r in store.records()) == ["config", "ep=cpu"]


def test_filters_select_records(store_url):
    with open_store(store_url) as store:
        store.write_json_record(make_cell(RUN_A, route="config", when="2025-01-01T02:00:00Z", commit="aaaa1111"))
        store.write_json_record(
            make_cell(RUN_A, route="ep=cpu", when="2025-01-01T02:00:01Z", commit="aaaa1111", index=1)
        )
        store.write_json_record(
            make_cell(
                RUN_B,
                route="config",
                when="2025-01-03T02:00:00Z",
                commit="bbbb2222",
                testbed="tb-win",
                bundle="bundles/other",
                prompt_tokens=128,
            )
        )
        ids = lambda **f: [r["id"] for r in store.records(**f)]  # noqa: E731
        assert ids() == [1, 2, 3]
        assert ids(route="config") == [1, 3]
        assert ids(bundle="other") == [3] and ids(bundle="bundles/other") == [3]
        assert ids(testbed="tb-win") == [3]
        assert ids(run_id=RUN_A) == [1, 2]
        assert ids(git_commit="bbbb") == [3]
        assert ids(since="2025-01-02") == [3] and ids(until="2025-01-01") == [1, 2]
        assert ids(prompt_tokens=128) == [3]
        assert ids(limit=2) == [2, 3]  # the newest two, oldest first
        assert store.run_ids() == [RUN_B, RUN_A]
        with pytest.raises(StoreError, match="--since"):
            store.records(since="last tuesday")
        with pytest.raises(StoreError, match="unknown results filter"):
            store.records(colour="red")


def test_get_by_cell_id_prefix_and_unknown_ids(store_url):
    cell = make_cell(RUN_A)
    with open_store(store_url) as store:
        rid = store.write_json_record(cell)
        assert store.get(cell["cell_id"][:10])["id"] == rid
        with pytest.raises(StoreError, match="no record") as err:
            store.get(999)
        assert err.value.exit_code == EXIT_USAGE


def test_load_returns_a_dataframe_and_samples(store_url):
    with open_store(store_url) as store:
        store.write_json_record(make_cell(RUN_A, route="config"))
        store.write_json_record(make_cell(RUN_A, route="ep=cpu", index=1, step_ms=[1.0, 1.0]))
    df = load(store_url)
    assert list(df["route"]) == ["config", "ep=cpu"]
    assert df.loc[1, "decode_tokens_per_s"] == pytest.approx(1000.0)
    assert {"decode_tokens_per_s_ci95_low", "itl_ms_p99", "peak_rss_bytes", "ttft_ms_n"} <= set(df.columns)
    assert list(load(store_url, route="ep=cpu")["route"]) == ["ep=cpu"]
    samples = load_samples(store_url, route="ep=cpu")
    assert len(samples) == 2 and set(samples["round_index"]) == {0, 1}


# -- concurrency -----------------------------------------------------------------------------------
WRITERS, PER_WRITER = 8, 50  # 8 writers at once is the contention; 50 each keeps them overlapping


def test_eight_processes_writing_at_once_lose_nothing(store_url, tmp_path):
    go = tmp_path / "go"
    code = "import sys; from tests.results_fakes import concurrent_writer as w; w(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])"
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, store_url, str(w), str(PER_WRITER), str(go)],
            cwd=REPO,
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )
        for w in range(WRITERS)
    ]
    time.sleep(0.5)
    go.touch()
    errors = [p.communicate(timeout=300)[1] for p in procs]
    assert [p.returncode for p in procs] == [0] * WRITERS, errors
    with open_store(store_url) as store:
        assert store.count() == WRITERS * PER_WRITER
        records = store.records()
        assert len({r["record_uid"] for r in records}) == WRITERS * PER_WRITER
        assert {r["testbed_id"] for r in records} == {f"tb-{w}" for w in range(WRITERS)}
        assert len(store.samples([r["id"] for r in records])) == 2 * WRITERS * PER_WRITER


# -- bad stores ------------------------------------------------------------------------------------
def _snapshot(path: Path) -> tuple[bytes, list[str]]:
    return path.read_bytes(), sorted(p.name for p in path.parent.iterdir())


def _wal_header_over_garbage() -> bytes:
    """A page-1 header that says WAL (bytes 18-19 are 2) over garbage: a plain read-only open of
    it makes -wal and -shm files before it finds the damage (seen once in CI from random bytes)."""
    header = bytearray(b"SQLite format 3\x00" + bytes(84))
    header[16:18] = (4096).to_bytes(2, "big")
    header[18] = header[19] = 2
    header[21:24] = bytes([64, 32, 32])
    return bytes(header) + random.Random(1).randbytes(8192)


@pytest.mark.parametrize(
    "content",
    [
        random.Random(0).randbytes(4096),
        b"SQLite format 3\x00" + b"\x00" * 20,  # a header and nothing more
        *(b"SQLite format 3\x00" + random.Random(seed).randbytes(8192) for seed in range(8)),  # a header over garbage
        _wal_header_over_garbage(),
    ],
)
def test_a_corrupted_file_is_refused_and_left_untouched(tmp_path, content):
    path = tmp_path / "winml-perf.db"
    path.write_bytes(content)
    before = _snapshot(path)
    with pytest.raises(StoreError, match="left untouched") as err:
        open_store(path)
    assert err.value.exit_code == EXIT_USAGE
    assert _snapshot(path) == before


@pytest.mark.parametrize("journal_mode", ["DELETE", "WAL"])
def test_a_foreign_sqlite_database_is_refused_and_left_untouched(tmp_path, journal_mode):
    path = tmp_path / "app.db"
    con = sqlite3.connect(path)
    con.execute(f"PRAGMA journal_mode={journal_mode}")
    con.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)")
    con.execute("INSERT INTO customers (name) VALUES ('ada')")
    con.commit()
    con.close()  # in WAL mode the last connection checkpoints and removes -wal and -shm
    before = _snapshot(path)
    assert before[1] == ["app.db"]
    with pytest.raises(StoreError, match="customers"):
        open_store(path)
    assert _snapshot(path) == before  # no WAL switch, no -wal / -shm files, no new tables


def test_a_schema_migrations_table_of_another_tool_is_refused(tmp_path):
    path = tmp_path / "rails.db"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE schema_migrations (version TEXT PRIMARY KEY)")
    con.commit()
    con.close()
    before = _snapshot(path)
    with pytest.raises(StoreError, match="another tool"):
        open_store(path)
    assert _snapshot(path) == before


@pytest.mark.postgres
def test_a_foreign_postgres_schema_is_refused(pg_url):
    engine = sa.create_engine(resolve_location(pg_url).url)
    with engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE invoices (id serial primary key)"))
    engine.dispose()
    with pytest.raises(StoreError, match="invoices"):
        open_store(pg_url)
    assert _tables(pg_url) == {"invoices"}


def test_a_folder_as_store_and_a_missing_store_for_reading(tmp_path):
    with pytest.raises(StoreError, match="is a folder, not a database file"):
        open_store(tmp_path)
    with pytest.raises(StoreError, match="no results store"):
        open_store(tmp_path / "nope.db", create=False)
    assert not (tmp_path / "nope.db").exists()


@pytest.mark.postgres
def test_an_unreachable_postgres_server_is_a_store_error():
    with pytest.raises(StoreError, match="cannot open results store postgresql") as err:
        open_store("postgresql://nobody@127.0.0.1:1/none?connect_timeout=2")
    assert err.value.exit_code == EXIT_USAGE


# -- locations -------------------------------------------------------------------------------------
def test_location_default_env_path_and_urls(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(ENV_VAR, raising=False)
    assert resolve_location().path == tmp_path / "results" / "winml-perf.db"
    monkeypatch.setenv(ENV_VAR, str(tmp_path / "env.db"))
    assert resolve_location().path == tmp_path / "env.db"
    assert resolve_location("other.db").path == tmp_path / "other.db"  # --store beats the env
    assert resolve_location(f"sqlite:///{tmp_path}/u.db").path == tmp_path / "u.db"
    for url in ("postgresql://u:secret@h:5432/db", "postgres://u:secret@h/db", "postgresql+psycopg://u:secret@h/db"):
        loc = resolve_location(url)
        assert loc.dialect == "postgresql" and loc.url.drivername == "postgresql+psycopg"
        assert "secret" not in loc.display
    with pytest.raises(StoreError, match="not supported"):
        resolve_location("mysql://u@h/db")
    with pytest.raises(StoreError, match="in-memory"):
        resolve_location("sqlite://")


@pytest.mark.parametrize("value", ["postgresql:/u:Pw9-hidden@h:5432/db", "postgres:u:Pw9-hidden@h/db", "sqlite:x.db"])
def test_a_url_without_its_slashes_is_refused_not_taken_for_a_file(value, tmp_path, monkeypatch):
    """'postgresql:/u:pw@h/db' was an SQLite file of that name under the working folder: folders
    named with the password, the password in every 'stored in' line."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(StoreError, match="but not '(postgresql|postgres|sqlite)://'") as err:
        resolve_location(value)
    assert err.value.exit_code == EXIT_USAGE and "Pw9-hidden" not in f"{err.value} {err.value.remedy}"
    assert list(tmp_path.iterdir()) == []
    shown = "sqlite:///results/winml-perf.db" if value.startswith("sqlite") else "://user@host:5432/db"
    assert shown in str(err.value.remedy)  # a URL of the scheme given, which works when followed
    monkeypatch.setenv(ENV_VAR, value)
    with pytest.raises(StoreError, match=f"^{ENV_VAR} starts with"):  # named as the user gave it
        resolve_location()
    assert "Pw9-hidden" not in mask("stored in ./" + value)  # and remembered as a secret


def test_a_file_whose_name_starts_like_a_scheme_is_a_file_when_written_so(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert resolve_location("./sqlite:x.db").path == tmp_path / "sqlite:x.db"


def test_open_store_creates_the_default_file_under_cwd(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(ENV_VAR, raising=False)
    with open_store() as store:
        store.write_json_record(small_cell(RUN_A, 0))
    assert (tmp_path / "results" / "winml-perf.db").is_file()
    con = sqlite3.connect(tmp_path / "results" / "winml-perf.db")
    assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    con.close()


def test_a_sqlite_connection_keeps_a_page_cache_the_dashboards_reads_fit(tmp_path):
    """Neighbouring series share index pages: a dashboard worker's connection caches SQLITE_CACHE_KIB,
    not SQLite's 2,000 KiB (a page's reads twice over from the file otherwise)."""
    from winml_perf.results.store import SQLITE_CACHE_KIB

    with open_store(tmp_path / "s.db") as store:
        size = store.read(lambda conn: conn.exec_driver_sql("PRAGMA cache_size").scalar())
    assert size == -SQLITE_CACHE_KIB and SQLITE_CACHE_KIB >= 65_536


def test_invocation_counts_read_what_the_stored_record_says_without_its_samples(tmp_path):
    """The count compare routes and the overview pair by: the stored record's invocations (1 for a
    record made before invocations existed), for many ids in one pass, as reading each record whole."""
    from tests.results_fakes import make_cell
    from winml_perf.compare.cells import invocations_of

    ids = []
    with open_store(tmp_path / "s.db") as s:
        for k, n in enumerate((0, 1, 3, 10)):
            cell = make_cell("a" * 32, index=k, when=f"2025-01-01T02:00:0{k}Z")
            if n:
                cell["invocations"] = [
                    {"index": i, "iterations": 2, "medians": {"decode_step_ms": 2.0}} for i in range(n)
                ]
            ids.append(s.write_json_record(cell))
        counts = s.invocation_counts(ids)
        assert counts == {i: invocations_of(s.get(i)["record"]) for i in ids}
        assert [counts[i] for i in ids] == [1, 1, 3, 10]
        assert s.invocation_counts([]) == {}
