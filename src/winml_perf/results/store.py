"""The results store: SQLite by default (``results/winml-perf.db`` under the current folder), or
PostgreSQL by URL for a fleet of machines. SQLAlchemy Core; schema by ordered migrations on open.

- ``open_store(url_or_path=None) -> Store``: ``None`` means ``$WINML_PERF_STORE``, else the default
  file. A path (or ``sqlite:///path``) is SQLite; ``postgresql://`` / ``postgres://`` URLs use the
  psycopg 3 driver (``postgresql+psycopg://``).
- ``Store.write_record(record) -> int`` stores one CellRecord (its row, metric summaries and every
  raw sample) in one transaction; safe to call after each cell from many processes at once.
  ``Store.write_json_record(doc)`` stores a record's JSON as a file holds it (the import edge).
- Reads of records, metrics and samples are methods here; reads of a whole series (histories, the
  series list, newest runs per series) are in results/series.py.

Safety: an existing SQLite file is first inspected read-only (results/location.py ``find_store``);
a file that is not SQLite, is damaged, or holds tables of something else is refused with StoreError
and left byte-for-byte untouched. A store whose schema is newer than this code is refused too (exit 2).
Concurrency: SQLite runs in WAL mode; writers queue on an OS file lock ('<db>.lock', locking.py),
then take SQLite's write lock up front (BEGIN IMMEDIATE) with a busy timeout, and "database is
locked" is retried with backoff; readers never wait. PostgreSQL writes are plain transactions, and
migrations run under an advisory lock. Writing a record whose cell id is stored already is a no-op.
"""

from __future__ import annotations

import json
import os
import random
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

import sqlalchemy as sa

from winml_perf.record.validation import validated_cell  # noqa: F401  (re-exported)
from winml_perf.results import migrations as mig
from winml_perf.results.filters import FILTER_KEYS, apply_filters, parse_when  # noqa: F401  (re-exported)
from winml_perf.results.location import (  # noqa: F401  (re-exported)
    DEFAULT_RELATIVE_PATH,
    ENV_VAR,
    SQLITE_BUSY_TIMEOUT_S,
    Location,
    applied_from_tables,
    check_schema,
    find_store,
    inspect_sqlite_file,
    read_only_uri,
    resolve_location,
    writable,
)
from winml_perf.results.locking import WriterLock
from winml_perf.results.rows import RecordRows, json_record_rows, record_rows, restore_samples
from winml_perf.results.sql_types import AnySelect
from winml_perf.support.errors import StoreError

if TYPE_CHECKING:
    from sqlalchemy.dialects import postgresql, sqlite

    from winml_perf.model.record import CellRecord, RunRecord

#: SQLite's page cache per connection, KiB (its default: 2,000). A dashboard page reads 4,000 records'
#: metric rows, one index seek each, and neighbouring series share index pages, which 64 MiB keeps
#: between a worker's pages (docs/benchmarks.md, issue 37). The cache grows only as pages are read.
SQLITE_CACHE_KIB = 65_536
#: How long a writer keeps retrying "database is locked" before giving up.
WRITE_RETRY_DEADLINE_S = 120.0
#: Ids per statement when a query is given ids (far below SQLite's and PostgreSQL's bind limits).
ID_CHUNK = 900
#: Records deleted per transaction by ``prune``.
PRUNE_CHUNK = ID_CHUNK
#: Arbitrary constant naming the PostgreSQL advisory lock held while migrating.
PG_MIGRATION_LOCK_KEY = 0x77696E6D6C  # "winml"

T = TypeVar("T")


# -- engines ---------------------------------------------------------------------------------------
def _sqlite_engine(loc: Location) -> sa.Engine:
    engine = sa.create_engine(loc.url, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_S, "check_same_thread": False})

    @sa.event.listens_for(engine, "connect")
    def _on_connect(dbapi_con: Any, _record: Any) -> None:  # the sqlite3 connection, untyped to SQLAlchemy
        dbapi_con.isolation_level = None  # we emit BEGIN ourselves (below)
        cur = dbapi_con.cursor()
        cur.execute(f"PRAGMA busy_timeout = {int(SQLITE_BUSY_TIMEOUT_S * 1000)}")
        cur.execute("PRAGMA journal_mode = WAL")
        cur.execute("PRAGMA synchronous = NORMAL")
        cur.execute("PRAGMA foreign_keys = ON")
        cur.execute(f"PRAGMA cache_size = -{SQLITE_CACHE_KIB}")  # negative: KiB, not pages
        cur.close()

    @sa.event.listens_for(engine, "begin")
    def _on_begin(conn: sa.Connection) -> None:
        mode = conn.get_execution_options().get("winml_begin", "DEFERRED")
        conn.exec_driver_sql(f"BEGIN {mode}")

    return engine


def _pg_engine(loc: Location) -> sa.Engine:
    try:
        return sa.create_engine(loc.url, pool_pre_ping=True, pool_size=2, max_overflow=2)
    except ImportError as exc:  # psycopg is the optional extra 'postgres'
        from winml_perf.support.optional import DEPENDENCIES

        raise StoreError(
            f"--store {loc.display} needs the psycopg driver ({exc})", DEPENDENCIES["psycopg"].install
        ) from None


def _is_transient(exc: BaseException) -> bool:
    text = str(getattr(exc, "orig", exc)).lower()
    if "database is locked" in text or "database is busy" in text or "database table is locked" in text:
        return True
    code = getattr(getattr(exc, "orig", None), "sqlstate", None)
    return code in ("40001", "40P01")  # serialization failure, deadlock detected


class Store:
    """An open results store. Use ``open_store``; close with ``close()`` or a ``with`` block."""

    def __init__(self, location: Location, engine: sa.Engine, read_only: bool = False) -> None:
        self.location = location
        self.engine = engine
        self.read_only = read_only
        self._lock = (
            WriterLock(location.path.with_name(location.path.name + ".lock"))
            if location.path and not read_only
            else None
        )
        self._wrote = False

    # -- lifecycle --------------------------------------------------------------------------------
    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._wrote and self.location.dialect == "sqlite":
            self._optimize()
        self.engine.dispose()
        if self._lock is not None:
            self._lock.close()

    def __repr__(self) -> str:
        return f"Store({self.location.display})"

    @property
    def display(self) -> str:
        return self.location.display

    def _write_conn(self) -> sa.Connection:
        conn = self.engine.connect()
        if self.location.dialect == "sqlite":
            conn = conn.execution_options(winml_begin="IMMEDIATE")
        return conn

    @contextmanager
    def _writer_turn(self) -> Iterator[None]:
        """SQLite: wait for our turn to write in a queue the OS keeps (an exclusive lock on
        '<db>.lock'), so concurrent writers hand the database over at once instead of polling it
        with SQLite's busy handler (whose back-off sleeps reach 100 ms). PostgreSQL: nothing."""
        if self._lock is None:
            yield
            return
        with self._lock:
            yield

    def _retrying(self, fn: Callable[[], T], verb: str = "write to") -> T:
        deadline = time.monotonic() + WRITE_RETRY_DEADLINE_S
        delay = 0.005
        while True:
            try:
                return fn()
            except sa.exc.IntegrityError:
                raise
            except sa.exc.DBAPIError as exc:
                if not _is_transient(exc) or time.monotonic() > deadline:
                    raise self._db_error(verb, exc) from None
                time.sleep(delay * (0.5 + random.random()))
                delay = min(delay * 2, 0.25)

    def _db_error(self, verb: str, exc: BaseException) -> StoreError:
        detail = (
            str(getattr(exc, "orig", exc)).strip().splitlines()[0]
            if str(getattr(exc, "orig", exc)).strip()
            else type(exc).__name__
        )
        return StoreError(
            f"cannot {verb} results store {self.display}: {detail}",
            "check that the database is reachable and writable (--store / " + ENV_VAR + ")",
        )

    # -- planner statistics -----------------------------------------------------------------------
    def analyze(self) -> None:
        """Refresh the query planner's statistics (after bulk imports and prunes; the migration that
        adds the series index runs it too). Without them SQLite may read a series through the
        two-valued route index instead of the series index."""
        with self._writer_turn(), self._write_conn() as conn, conn.begin():
            mig.analyze(conn, mig.metadata.tables)

    def _optimize(self) -> None:
        """SQLite's advice for connections that wrote: ``PRAGMA optimize`` before closing (it re-runs
        ANALYZE only where the statistics are stale). Best effort: a busy store is left as it is."""
        try:
            with self.engine.connect() as conn:
                conn.exec_driver_sql("PRAGMA optimize")
        except sa.exc.DBAPIError:
            pass

    # -- schema -----------------------------------------------------------------------------------
    def migrate(self) -> list[str]:
        """Apply pending migrations (under the write lock); returns the names applied now."""
        if self._up_to_date():
            return []

        def attempt() -> list[str]:
            with self._writer_turn(), self._write_conn() as conn, conn.begin():
                if self.location.dialect == "postgresql":
                    conn.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": PG_MIGRATION_LOCK_KEY})
                tables = set(sa.inspect(conn).get_table_names())
                applied = applied_from_tables(self.display, tables, lambda q: list(conn.execute(sa.text(q)).scalars()))
                if applied is None:
                    mig.schema_migrations.create(conn)
                    applied = set()
                check_schema(self.display, applied)
                todo = mig.pending(applied)
                for m in todo:
                    m.apply(conn)
                    conn.execute(mig.schema_migrations.insert().values(name=m.name, applied_utc=_now_utc()))
                return [m.name for m in todo]

        return self._retrying(attempt, "open")

    def _up_to_date(self) -> bool:
        """A lock-free look first: most opens find the schema current and need no write lock."""
        try:
            with self.engine.connect() as conn:
                if not sa.inspect(conn).has_table(mig.MIGRATIONS_TABLE):
                    return False
                applied = set(conn.execute(sa.select(mig.schema_migrations.c.name)).scalars())
        except sa.exc.DBAPIError:
            return False  # let the locked path report it
        check_schema(self.display, applied)
        return mig.MIGRATIONS[0].name in applied and not mig.pending(applied)

    def applied_migrations(self) -> list[str]:
        with self.engine.connect() as conn:
            return list(
                conn.execute(sa.select(mig.schema_migrations.c.name).order_by(mig.schema_migrations.c.name)).scalars()
            )

    # -- writing ----------------------------------------------------------------------------------
    def write_record(self, record: CellRecord) -> int:
        """Store one cell record with its metric summaries and raw samples, in one transaction
        (its JSON checked against the schema first). Returns the record's store id. Writing the
        same record again (same record id, or same content) stores nothing new and returns the
        existing id."""
        self._check_writable()
        return self._write_rows(record_rows(record, validated_cell(record.to_dict())))

    def write_json_record(self, doc: Mapping[str, Any]) -> int:
        """``write_record`` for a cell record's JSON as a file holds it (``winml results import``):
        checked against the schema, then stored as it is, keys a newer or older version wrote or
        left out included."""
        self._check_writable()
        return self._write_rows(json_record_rows(validated_cell(doc)))

    def _check_writable(self) -> None:
        if self.read_only:
            raise StoreError(f"results store {self.display} is read-only", "pass --store with a writable path")

    def _write_rows(self, rows: RecordRows) -> int:
        """Insert one record's rows in one transaction; the id of the copy stored first."""
        insert = self._insert_ignoring_duplicates()

        def attempt() -> int:
            with self._writer_turn(), self._write_conn() as conn, conn.begin():
                record_id: int | None = conn.execute(insert.values(**rows.record)).scalar_one_or_none()
                if record_id is None:  # stored before (same cell id): keep the first copy
                    first = self._id_of_uid(conn, rows.record["record_uid"])
                    assert first is not None  # the insert met this uid, stored
                    return int(first)
                if rows.metrics:
                    conn.execute(mig.metrics.insert(), [{**m, "record_id": record_id} for m in rows.metrics])
                if rows.samples:
                    conn.execute(mig.samples.insert(), [{**s, "record_id": record_id} for s in rows.samples])
                self._wrote = True
                return record_id

        try:
            return self._retrying(attempt)
        except StoreError:
            raise
        except sa.exc.IntegrityError:  # the same record written concurrently by another process
            with self.engine.connect() as conn:
                existing = self._id_of_uid(conn, rows.record["record_uid"])
            if existing is None:
                raise
            return existing

    def dialect_insert(self, table: sa.Table) -> postgresql.Insert | sqlite.Insert:
        """An INSERT into ``table`` in this store's dialect (each has its own ON CONFLICT clauses)."""
        from sqlalchemy.dialects import postgresql, sqlite

        return postgresql.insert(table) if self.location.dialect == "postgresql" else sqlite.insert(table)

    def _insert_ignoring_duplicates(self) -> Any:
        return (
            self.dialect_insert(mig.records)
            .on_conflict_do_nothing(index_elements=["record_uid"])
            .returning(mig.records.c.id)
        )

    def write_records(self, records: Iterable[CellRecord]) -> list[int]:
        return [self.write_record(r) for r in records]

    def write_json_records(self, docs: Iterable[Mapping[str, Any]]) -> list[int]:
        return [self.write_json_record(d) for d in docs]

    def write_run(self, run: RunRecord) -> list[int]:
        """Store every cell of a run record."""
        return [self.write_record(c) for c in run.cells]

    @staticmethod
    def _id_of_uid(conn: sa.Connection, uid: str) -> int | None:
        return conn.execute(sa.select(mig.records.c.id).where(mig.records.c.record_uid == uid)).scalar_one_or_none()

    def write(self, fn: Callable[[sa.Connection], T], verb: str = "write to") -> T:
        """``fn(connection)`` in one write transaction, in the writers' queue, retried while the
        database is busy (for derived rows such as the change-point cache; records go through
        ``write_record``)."""
        if self.read_only:
            raise StoreError(f"results store {self.display} is read-only", "pass --store with a writable path")

        def attempt() -> T:
            with self._writer_turn(), self._write_conn() as conn, conn.begin():
                out = fn(conn)
                self._wrote = True
                return out

        return self._retrying(attempt, verb)

    # -- reading ----------------------------------------------------------------------------------
    def read(self, fn: Callable[[sa.Connection], T]) -> T:
        """``fn(connection)`` on a reading connection; a database error becomes StoreError (exit 2)."""
        try:
            with self.engine.connect() as conn:
                return fn(conn)
        except sa.exc.DBAPIError as exc:
            raise self._db_error("read", exc) from None

    def count(self, **filters: Any) -> int:
        stmt = sa.select(sa.func.count()).select_from(mig.records)
        stmt = apply_filters(stmt, filters)
        return int(self.read(lambda c: c.execute(stmt).scalar_one()))

    def records(self, **filters: Any) -> list[dict[str, Any]]:
        """Record rows (without the JSON), oldest first, filtered (see ``_apply_filters``)."""
        cols = [c for c in mig.records.c if c.name != "record_json"]
        stmt = apply_filters(sa.select(*cols), filters).order_by(mig.records.c.created_utc, mig.records.c.id)
        limit = filters.get("limit")
        if limit:
            inner = (
                apply_filters(sa.select(*cols), filters)
                .order_by(mig.records.c.created_utc.desc(), mig.records.c.id.desc())
                .limit(int(limit))
                .subquery()
            )
            stmt = sa.select(inner).order_by(inner.c.created_utc, inner.c.id)
        return [dict(r._mapping) for r in self.read(lambda c: c.execute(stmt).all())]

    def _chunked(self, make: Callable[[list[int]], AnySelect], record_ids: Sequence[int]) -> list[dict[str, Any]]:
        """Rows of ``make(chunk)`` over ``record_ids`` in chunks of ID_CHUNK ids (bounded binds)."""
        ids = sorted(set(int(i) for i in record_ids))
        out: list[dict[str, Any]] = []

        def read(conn: sa.Connection) -> None:
            for k in range(0, len(ids), ID_CHUNK):
                out.extend(dict(r._mapping) for r in conn.execute(make(ids[k : k + ID_CHUNK])))

        self.read(read)
        return out

    def metrics(self, record_ids: Sequence[int], names: Sequence[str] | None = None) -> list[dict[str, Any]]:
        """Metric rows of these records (optionally only the metrics ``names``), by record id."""

        def make(chunk: list[int]) -> AnySelect:
            stmt = sa.select(mig.metrics).where(mig.metrics.c.record_id.in_(chunk))
            if names is not None:
                stmt = stmt.where(mig.metrics.c.name.in_(list(names)))
            return stmt.order_by(mig.metrics.c.record_id, mig.metrics.c.name)

        return self._chunked(make, record_ids)

    def metrics_of(self, names: Sequence[str] | None = None, **filters: Any) -> list[dict[str, Any]]:
        """Metric rows of the records ``filters`` select, by one join (no list of ids)."""
        ids = self._ids_selected(filters)
        stmt = sa.select(mig.metrics).where(mig.metrics.c.record_id.in_(ids))
        if names is not None:
            stmt = stmt.where(mig.metrics.c.name.in_(list(names)))
        stmt = stmt.order_by(mig.metrics.c.record_id, mig.metrics.c.name)
        return [dict(r._mapping) for r in self.read(lambda c: c.execute(stmt).all())]

    def _ids_selected(self, filters: Mapping[str, Any]) -> AnySelect:
        """The ids of the records ``filters`` select (the newest ``limit`` when given), as a subquery."""
        stmt = apply_filters(sa.select(mig.records.c.id), filters)
        if filters.get("limit"):
            stmt = stmt.order_by(mig.records.c.created_utc.desc(), mig.records.c.id.desc()).limit(int(filters["limit"]))
            return sa.select(stmt.subquery().c.id)
        return stmt

    def invocation_counts(self, record_ids: Sequence[int]) -> dict[int, int]:
        """Record id -> how many invocations its cell ran (1 for records made before invocations
        existed), read from the stored record's JSON in one pass, without its samples."""
        r = mig.records.c

        def make(chunk: list[int]) -> AnySelect:
            return sa.select(r.id, r.record_json).where(r.id.in_(chunk))

        return {
            row["id"]: len(json.loads(row["record_json"]).get("invocations") or ()) or 1
            for row in self._chunked(make, record_ids)
        }

    def samples(self, record_ids: Sequence[int], phase: str | None = "measured") -> list[dict[str, Any]]:
        def make(chunk: list[int]) -> AnySelect:
            stmt = sa.select(mig.samples).where(mig.samples.c.record_id.in_(chunk))
            if phase is not None:
                stmt = stmt.where(mig.samples.c.phase == phase)
            return stmt.order_by(mig.samples.c.record_id, mig.samples.c.seq)

        return self._chunked(make, record_ids)

    # -- retention ------------------------------------------------------------------------------
    def prune(self, before: str) -> int:
        """Delete every record created before ``before`` (normalised UTC text) with its metrics and
        samples, PRUNE_CHUNK records per transaction; refresh statistics. Returns records deleted."""
        deleted = 0
        r = mig.records.c
        while True:

            def attempt() -> int:
                with self._writer_turn(), self._write_conn() as conn, conn.begin():
                    ids = list(
                        conn.execute(
                            sa.select(r.id).where(r.created_utc < before).order_by(r.id).limit(PRUNE_CHUNK)
                        ).scalars()
                    )
                    if ids:
                        conn.execute(mig.samples.delete().where(mig.samples.c.record_id.in_(ids)))
                        conn.execute(mig.metrics.delete().where(mig.metrics.c.record_id.in_(ids)))
                        conn.execute(mig.records.delete().where(r.id.in_(ids)))
                    return len(ids)

            n = self._retrying(attempt, "prune")
            deleted += n
            if n < PRUNE_CHUNK:
                break
        if deleted:
            self._drop_orphan_change_points()
            self.analyze()
        return deleted

    def _drop_orphan_change_points(self) -> None:
        """Cached change points of series that no longer have any record (the others are checked
        against their input when read; see results/change_point_cache.py)."""
        c = mig.change_point_cache.c
        alive = sa.select(mig.records.c.series_key).where(mig.records.c.series_key == c.series_key).exists()
        self.write(lambda conn: conn.execute(mig.change_point_cache.delete().where(~alive)), "prune")

    def get(self, ref: int | str) -> dict[str, Any]:
        """One record by store id or record id (uid, or a unique prefix of it): the row plus the
        full record under ``record``. StoreError (exit 2) when nothing or several match."""
        text = str(ref).strip()
        if text.isdigit() and int(text) > 2**63 - 1:  # past SQLite's integers: no such record
            raise StoreError(f"no record {text!r} in results store {self.display}", "see `winml results list` for ids")
        if text.isdigit():
            cond = mig.records.c.id == int(text)
        else:
            cond = mig.records.c.record_uid.startswith(text, autoescape=True)
        rows = self.read(lambda c: c.execute(sa.select(mig.records).where(cond).limit(2)).all())
        if not rows:
            raise StoreError(f"no record {text!r} in results store {self.display}", "see `winml results list` for ids")
        if len(rows) > 1:
            raise StoreError(
                f"record id prefix {text!r} matches several records", "give more characters or the numeric id"
            )
        row = dict(rows[0]._mapping)
        row["record"] = json.loads(row.pop("record_json"))
        if "samples" not in row["record"]:  # stored once, in the samples table
            row["record"]["samples"] = restore_samples(self.samples([row["id"]], phase=None))
        return row

    def run_ids(self, **filters: Any) -> list[str]:
        """Distinct run ids, newest run first."""
        last = sa.func.max(mig.records.c.created_utc)
        stmt = apply_filters(sa.select(mig.records.c.run_id, last.label("last")), filters)
        stmt = stmt.where(mig.records.c.run_id.is_not(None)).group_by(mig.records.c.run_id).order_by(last.desc())
        return [r[0] for r in self.read(lambda c: c.execute(stmt).all())]


def _now_utc() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


# -- opening ---------------------------------------------------------------------------------------
def _read_only_engine(loc: Location) -> sa.Engine:
    """A store file nobody can write here: read as it is (reading commands only)."""
    assert loc.path is not None  # a SQLite location names its file
    return sa.create_engine(f"sqlite:///{read_only_uri(loc.path)}&uri=true", connect_args={"check_same_thread": False})


def open_store(url_or_path: str | os.PathLike[str] | None = None, *, create: bool = True) -> Store:
    """Open (and migrate) the results store at ``url_or_path`` / ``$WINML_PERF_STORE`` / the default,
    as results/location.py ``find_store`` found it (``create=False``: no new SQLite file)."""
    site = find_store(url_or_path, create=create)
    loc = site.location
    if site.read_only:
        return Store(loc, _read_only_engine(loc), read_only=True)
    store = Store(loc, _sqlite_engine(loc) if loc.dialect == "sqlite" else _pg_engine(loc))
    try:
        store.migrate()
    except StoreError:
        store.close()
        raise
    except sa.exc.SQLAlchemyError as exc:
        store.close()
        raise store._db_error("open", exc) from None
    return store
