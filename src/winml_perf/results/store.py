"""The results store: SQLite by default (``results/winml-perf.db`` under the current folder), or
PostgreSQL by URL for a fleet of machines. SQLAlchemy Core; schema by ordered migrations on open.

- ``open_store(url_or_path=None) -> Store``: ``None`` means ``$WINML_PERF_STORE``, else the default
  file. A path (or ``sqlite:///path``) is SQLite; ``postgresql://`` / ``postgres://`` URLs use the
  psycopg 3 driver (``postgresql+psycopg://``).
- ``Store.write_record(record_dict) -> int`` stores one record (its row, metric summaries and every
  raw sample) in one transaction; safe to call after each cell from many processes at once.

Safety: an existing SQLite file is first inspected read-only; a file that is not SQLite, is
damaged, or holds tables of something else is refused with StoreError and left byte-for-byte
untouched. A store whose schema is newer than this code is refused too (exit 2).
Concurrency: SQLite runs in WAL mode, each write takes the write lock up front (BEGIN IMMEDIATE)
with a busy timeout, and "database is locked" is retried with backoff; PostgreSQL writes are
plain transactions, and migrations run under an advisory lock.
"""

from __future__ import annotations

import json
import os
import random
import sqlite3
import time
from dataclasses import dataclass
from functools import lru_cache
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence, TypeVar
from urllib.parse import quote

import sqlalchemy as sa

from winml_perf.errors import StoreError
from winml_perf.results import migrations as mig
from winml_perf.results.rows import record_rows

ENV_VAR = "WINML_PERF_STORE"
DEFAULT_RELATIVE_PATH = Path("results") / "winml-perf.db"
SQLITE_HEADER = b"SQLite format 3\x00"
#: How long a writer waits for the SQLite write lock (busy_timeout), and how long it keeps retrying.
SQLITE_BUSY_TIMEOUT_S = 30.0
WRITE_RETRY_DEADLINE_S = 120.0
#: Arbitrary constant naming the PostgreSQL advisory lock held while migrating.
PG_MIGRATION_LOCK_KEY = 0x77696E6D6C  # "winml"

T = TypeVar("T")


@dataclass(frozen=True)
class Location:
    """Where a store lives: the SQLAlchemy URL, the dialect ('sqlite' | 'postgresql'), the SQLite
    file (None for PostgreSQL) and a printable name (password hidden)."""

    url: sa.URL
    dialect: str
    path: Path | None
    display: str


def _normalise_url(text: str) -> sa.URL:
    try:
        url = sa.make_url(text)
    except Exception as exc:  # sqlalchemy.exc.ArgumentError
        raise StoreError(f"--store {text!r} is not a database URL ({exc})",
                         "use a file path, sqlite:///path.db or postgresql://user@host/db") from None
    backend, _, driver = url.drivername.partition("+")
    if backend in ("postgresql", "postgres"):
        if driver not in ("", "psycopg"):
            raise StoreError(f"--store: driver {url.drivername!r} is not supported", "use postgresql:// (psycopg 3)")
        return url.set(drivername="postgresql+psycopg")
    if backend == "sqlite":
        return url
    raise StoreError(f"--store: {backend!r} databases are not supported", "use SQLite (a file path) or postgresql://")


def resolve_location(url_or_path: str | os.PathLike | None = None, env: Mapping[str, str] | None = None) -> Location:
    """``--store`` value, else ``$WINML_PERF_STORE``, else ``results/winml-perf.db`` under cwd."""
    env = os.environ if env is None else env
    value = url_or_path if url_or_path not in (None, "") else env.get(ENV_VAR) or None
    if value is None:
        path = Path.cwd() / DEFAULT_RELATIVE_PATH
    elif isinstance(value, os.PathLike) or "://" not in str(value):
        path = Path(value).expanduser().absolute()
    else:
        url = _normalise_url(str(value))
        if url.get_backend_name() == "postgresql":
            return Location(url, "postgresql", None, url.render_as_string(hide_password=True))
        if not url.database or url.database == ":memory:":
            raise StoreError(f"--store {value!r}: an in-memory SQLite store keeps nothing", "give a file, e.g. sqlite:///results/winml-perf.db")
        path = Path(url.database).expanduser().absolute()
    return Location(sa.URL.create("sqlite", database=str(path)), "sqlite", path, str(path))


# -- SQLite file inspection (read-only, before anything may write) -------------------------------
def _refuse(path: Path, why: str) -> StoreError:
    return StoreError(
        f"results store {path} {why}; it was left untouched",
        f"pass --store with another file (or set {ENV_VAR}), or move this file away",
    )


def inspect_sqlite_file(path: Path) -> set[str] | None:
    """Applied migration names of an existing store file; None for a fresh (absent or empty) file.
    Raises StoreError for a directory, a non-SQLite or damaged file, or a foreign database."""
    if path.is_dir():
        raise _refuse(path, "is a directory")
    if not path.exists() or path.stat().st_size == 0:
        return None
    try:
        with open(path, "rb") as fh:
            header = fh.read(100)
    except OSError as exc:
        raise StoreError(f"cannot read results store {path}: {exc}", "check the file's permissions") from None
    if len(header) < 100 or not header.startswith(SQLITE_HEADER):
        raise _refuse(path, "is not an SQLite database (bad header)")
    try:
        con = sqlite3.connect(f"file:{quote(str(path))}?mode=ro", uri=True, timeout=SQLITE_BUSY_TIMEOUT_S)
    except sqlite3.Error as exc:
        raise _refuse(path, f"cannot be opened ({exc})") from None
    try:
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        return _applied_from_tables(path, tables, lambda q: [r[0] for r in con.execute(q)], con)
    except sqlite3.DatabaseError as exc:
        raise _refuse(path, f"is damaged or not a database ({exc})") from None
    finally:
        con.close()


def _applied_from_tables(where: Any, tables: set[str], query: Callable[[str], list], con: Any = None) -> set[str] | None:
    user_tables = {t for t in tables if not t.startswith("sqlite_")}
    if not user_tables:
        return None
    if mig.MIGRATIONS_TABLE not in user_tables:
        raise _refuse(where, f"holds tables of something else ({', '.join(sorted(user_tables)[:5])}), not a winml-perf store")
    try:
        applied = set(query(f"SELECT name FROM {mig.MIGRATIONS_TABLE}"))
    except Exception:
        raise _refuse(where, f"has a {mig.MIGRATIONS_TABLE} table of another tool") from None
    if mig.MIGRATIONS[0].name not in applied:
        raise _refuse(where, f"has a {mig.MIGRATIONS_TABLE} table of another tool")
    return applied


def _check_not_newer(where: str, applied: set[str]) -> None:
    newer = mig.unknown(applied)
    if newer:
        raise StoreError(
            f"results store {where} has schema migrations this winml-perf does not know ({', '.join(newer)}): "
            f"it was written by a newer version (this one knows schema {mig.SCHEMA_VERSION})",
            "upgrade winml-perf (pip install -U winml-perf), or use another --store",
        )


# -- engines ---------------------------------------------------------------------------------------
def _sqlite_engine(loc: Location) -> sa.Engine:
    engine = sa.create_engine(loc.url, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_S, "check_same_thread": False})

    @sa.event.listens_for(engine, "connect")
    def _on_connect(dbapi_con, _record):  # noqa: ANN001
        dbapi_con.isolation_level = None  # we emit BEGIN ourselves (below)
        cur = dbapi_con.cursor()
        cur.execute(f"PRAGMA busy_timeout = {int(SQLITE_BUSY_TIMEOUT_S * 1000)}")
        cur.execute("PRAGMA journal_mode = WAL")
        cur.execute("PRAGMA synchronous = NORMAL")
        cur.execute("PRAGMA foreign_keys = ON")
        cur.close()

    @sa.event.listens_for(engine, "begin")
    def _on_begin(conn):  # noqa: ANN001
        mode = conn.get_execution_options().get("winml_begin", "DEFERRED")
        conn.exec_driver_sql(f"BEGIN {mode}")

    return engine


def _pg_engine(loc: Location) -> sa.Engine:
    return sa.create_engine(loc.url, pool_pre_ping=True, pool_size=2, max_overflow=2)


def _is_transient(exc: BaseException) -> bool:
    text = str(getattr(exc, "orig", exc)).lower()
    if "database is locked" in text or "database is busy" in text or "database table is locked" in text:
        return True
    code = getattr(getattr(exc, "orig", None), "sqlstate", None)
    return code in ("40001", "40P01")  # serialization failure, deadlock detected


class Store:
    """An open results store. Use ``open_store``; close with ``close()`` or a ``with`` block."""

    def __init__(self, location: Location, engine: sa.Engine) -> None:
        self.location = location
        self.engine = engine

    # -- lifecycle --------------------------------------------------------------------------------
    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.engine.dispose()

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
        detail = str(getattr(exc, "orig", exc)).strip().splitlines()[0] if str(getattr(exc, "orig", exc)).strip() else type(exc).__name__
        return StoreError(f"cannot {verb} results store {self.display}: {detail}",
                          "check that the database is reachable and writable (--store / " + ENV_VAR + ")")

    # -- schema -----------------------------------------------------------------------------------
    def migrate(self) -> list[str]:
        """Apply pending migrations (under the write lock); returns the names applied now."""
        if self._up_to_date():
            return []

        def attempt() -> list[str]:
            with self._write_conn() as conn, conn.begin():
                if self.location.dialect == "postgresql":
                    conn.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": PG_MIGRATION_LOCK_KEY})
                tables = set(sa.inspect(conn).get_table_names())
                applied = _applied_from_tables(self.display, tables, lambda q: list(conn.execute(sa.text(q)).scalars()))
                if applied is None:
                    mig.schema_migrations.create(conn)
                    applied = set()
                _check_not_newer(self.display, applied)
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
        _check_not_newer(self.display, applied)
        return mig.MIGRATIONS[0].name in applied and not mig.pending(applied)

    def applied_migrations(self) -> list[str]:
        with self.engine.connect() as conn:
            return list(conn.execute(sa.select(mig.schema_migrations.c.name).order_by(mig.schema_migrations.c.name)).scalars())

    # -- writing ----------------------------------------------------------------------------------
    def write_record(self, record: Mapping[str, Any]) -> int:
        """Store one record (a RunRecord.to_dict()) with its metric summaries and raw samples, in
        one transaction. Returns the record's store id. Writing the same record again (same
        record id, or same content) stores nothing new and returns the existing id."""
        rows = record_rows(validated_cell(record))

        insert = self._insert_ignoring_duplicates()

        def attempt() -> int:
            with self._write_conn() as conn, conn.begin():
                record_id = conn.execute(insert.values(**rows.record)).scalar_one_or_none()
                if record_id is None:  # stored before (same cell id): keep the first copy
                    return int(self._id_of_uid(conn, rows.record["record_uid"]))
                if rows.metrics:
                    conn.execute(mig.metrics.insert(), [{**m, "record_id": record_id} for m in rows.metrics])
                if rows.samples:
                    conn.execute(mig.samples.insert(), [{**s, "record_id": record_id} for s in rows.samples])
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

    def _insert_ignoring_duplicates(self) -> Any:
        if self.location.dialect == "postgresql":
            from sqlalchemy.dialects.postgresql import insert
        else:
            from sqlalchemy.dialects.sqlite import insert
        return insert(mig.records).on_conflict_do_nothing(index_elements=["record_uid"]).returning(mig.records.c.id)

    def write_records(self, records: Iterable[Mapping[str, Any]]) -> list[int]:
        return [self.write_record(r) for r in records]

    def write_run(self, run: Any) -> list[int]:
        """Store every cell of a run record (RunRecord or its dict)."""
        d = run.to_dict() if hasattr(run, "to_dict") else run
        if not isinstance(d, Mapping) or d.get("kind") != "run":
            raise StoreError("write_run takes a run record (kind 'run')", "use write_record for one cell record")
        return [self.write_record(c) for c in d.get("cells") or ()]

    @staticmethod
    def _id_of_uid(conn: sa.Connection, uid: str) -> int | None:
        return conn.execute(sa.select(mig.records.c.id).where(mig.records.c.record_uid == uid)).scalar_one_or_none()

    # -- reading ----------------------------------------------------------------------------------
    def _read(self, fn: Callable[[sa.Connection], T]) -> T:
        try:
            with self.engine.connect() as conn:
                return fn(conn)
        except sa.exc.DBAPIError as exc:
            raise self._db_error("read", exc) from None

    def count(self, **filters: Any) -> int:
        stmt = sa.select(sa.func.count()).select_from(mig.records)
        stmt = _apply_filters(stmt, filters)
        return int(self._read(lambda c: c.execute(stmt).scalar_one()))

    def records(self, **filters: Any) -> list[dict]:
        """Record rows (without the JSON), oldest first, filtered (see ``_apply_filters``)."""
        cols = [c for c in mig.records.c if c.name != "record_json"]
        stmt = _apply_filters(sa.select(*cols), filters).order_by(mig.records.c.created_utc, mig.records.c.id)
        limit = filters.get("limit")
        if limit:
            inner = _apply_filters(sa.select(*cols), filters).order_by(mig.records.c.created_utc.desc(), mig.records.c.id.desc()).limit(int(limit)).subquery()
            stmt = sa.select(inner).order_by(inner.c.created_utc, inner.c.id)
        return [dict(r._mapping) for r in self._read(lambda c: c.execute(stmt).all())]

    def metrics(self, record_ids: Sequence[int]) -> list[dict]:
        if not record_ids:
            return []
        stmt = sa.select(mig.metrics).where(mig.metrics.c.record_id.in_(list(record_ids))).order_by(mig.metrics.c.record_id, mig.metrics.c.name)
        return [dict(r._mapping) for r in self._read(lambda c: c.execute(stmt).all())]

    def samples(self, record_ids: Sequence[int], phase: str | None = "measured") -> list[dict]:
        if not record_ids:
            return []
        stmt = sa.select(mig.samples).where(mig.samples.c.record_id.in_(list(record_ids)))
        if phase is not None:
            stmt = stmt.where(mig.samples.c.phase == phase)
        stmt = stmt.order_by(mig.samples.c.record_id, mig.samples.c.seq)
        return [dict(r._mapping) for r in self._read(lambda c: c.execute(stmt).all())]

    def get(self, ref: int | str) -> dict:
        """One record by store id or record id (uid, or a unique prefix of it): the row plus the
        full record under ``record``. StoreError (exit 2) when nothing or several match."""
        text = str(ref).strip()
        if text.isdigit():
            cond = mig.records.c.id == int(text)
        else:
            cond = mig.records.c.record_uid.startswith(text, autoescape=True)
        rows = self._read(lambda c: c.execute(sa.select(mig.records).where(cond).limit(2)).all())
        if not rows:
            raise StoreError(f"no record {text!r} in results store {self.display}", "see `winml results list` for ids")
        if len(rows) > 1:
            raise StoreError(f"record id prefix {text!r} matches several records", "give more characters or the numeric id")
        row = dict(rows[0]._mapping)
        row["record"] = json.loads(row.pop("record_json"))
        return row

    def run_ids(self, **filters: Any) -> list[str]:
        """Distinct run ids, newest run first."""
        last = sa.func.max(mig.records.c.created_utc)
        stmt = _apply_filters(sa.select(mig.records.c.run_id, last.label("last")), filters)
        stmt = stmt.where(mig.records.c.run_id.is_not(None)).group_by(mig.records.c.run_id).order_by(last.desc())
        return [r[0] for r in self._read(lambda c: c.execute(stmt).all())]


def validated_cell(record: Any) -> dict:
    """A cell record as a dict, checked against record.schema.json (StoreError names the path)."""
    from winml_perf.results.record import SCHEMA_VERSION

    d = record.to_dict() if hasattr(record, "to_dict") else record
    if not isinstance(d, Mapping):
        raise StoreError(f"a record must be a dict (CellRecord.to_dict()), got {type(d).__name__}")
    if d.get("kind") == "run":
        raise StoreError("write_record takes one cell record, got a run record", "use Store.write_run for a run record")
    version = d.get("schema_version")
    if isinstance(version, int) and not isinstance(version, bool) and version > SCHEMA_VERSION:
        raise StoreError(f"cell record {d.get('cell_id', '?')} has schema_version {version}, newer than this winml-perf "
                         f"understands ({SCHEMA_VERSION})", "upgrade winml-perf to store it")
    errors = sorted(_cell_validator().iter_errors(d), key=lambda e: list(e.absolute_path))
    if errors:
        e = errors[0]
        where = "/".join(str(p) for p in e.absolute_path) or "(top level)"
        raise StoreError(f"cell record {d.get('cell_id', '?')} does not match record.schema.json at {where}: {e.message}",
                         "store records made by winml-perf (bench/report.py); this one is damaged or from another tool")
    return dict(d)


def inline_refs(node: Any, defs: Mapping[str, Any], seen: tuple[str, ...] = ()) -> Any:
    """``node`` with every local '#/$defs/X' reference replaced by the definition itself (a ref
    beside other keywords becomes allOf, as 2020-12 means). Raises ValueError on a cycle."""
    if isinstance(node, list):
        return [inline_refs(v, defs, seen) for v in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        name = ref[len("#/$defs/"):]
        if name in seen:
            raise ValueError(f"recursive $ref {ref}")
        target = inline_refs(defs[name], defs, seen + (name,))
        rest = {k: inline_refs(v, defs, seen) for k, v in node.items() if k != "$ref"}
        return {"allOf": [target, rest]} if rest else target
    return {k: inline_refs(v, defs, seen) for k, v in node.items() if k != "$defs"}


@lru_cache(maxsize=1)
def _cell_validator() -> Any:
    """A validator of the schema's cell definition with its references inlined: the same rules,
    three times faster than resolving each $ref per value (records are checked on every write)."""
    import jsonschema

    from winml_perf.results.record import load_schema

    schema = load_schema()
    try:
        return jsonschema.Draft202012Validator(inline_refs(schema["$defs"]["cell"], schema["$defs"]))
    except ValueError:  # a recursive schema cannot be inlined: resolve references as usual
        return jsonschema.Draft202012Validator({"$schema": schema["$schema"], "$defs": schema["$defs"], "$ref": "#/$defs/cell"})


# -- filters ---------------------------------------------------------------------------------------
FILTER_KEYS = ("bundle", "route", "testbed", "run_id", "status", "git_commit", "version", "since", "until",
               "prompt_tokens", "max_new_tokens", "ids", "limit")


def _values(v: Any) -> list:
    return list(v) if isinstance(v, (list, tuple, set, frozenset)) else [v]


def _apply_filters(stmt: sa.Select, filters: Mapping[str, Any]) -> sa.Select:
    unknown = sorted(set(filters) - set(FILTER_KEYS))
    if unknown:
        raise StoreError(f"unknown results filter(s): {', '.join(unknown)}", f"use {', '.join(FILTER_KEYS)}")
    r = mig.records.c
    f = {k: v for k, v in filters.items() if v is not None and k != "limit"}
    if "bundle" in f:
        vals = [str(x) for x in _values(f["bundle"])]
        stmt = stmt.where(sa.or_(r.bundle.in_(vals), r.bundle_path.in_(vals)))
    simple = {"route": r.route, "testbed": r.testbed_id, "run_id": r.run_id, "status": r.status,
              "version": r.winml_perf_version, "prompt_tokens": r.prompt_tokens, "max_new_tokens": r.max_new_tokens, "ids": r.id}
    for key, col in simple.items():
        if key in f:
            stmt = stmt.where(col.in_(_values(f[key])))
    if "git_commit" in f:
        stmt = stmt.where(sa.or_(*[r.git_commit.startswith(str(c), autoescape=True) for c in _values(f["git_commit"])]))
    if "since" in f:
        stmt = stmt.where(r.created_utc >= parse_when(f["since"], "--since"))
    if "until" in f:
        stmt = stmt.where(r.created_utc < parse_when(f["until"], "--until", end_of_day=True))
    return stmt


def parse_when(value: Any, flag: str, end_of_day: bool = False, now: datetime | None = None) -> str:
    """'2025-01-31', an ISO datetime, or a relative age '7d' / '12h' / '30m' -> normalised UTC text.
    A bare date given as an upper bound means the end of that day."""
    from winml_perf.results.rows import normalize_utc

    if isinstance(value, datetime):
        return normalize_utc(value.isoformat())
    text = str(value).strip()
    units = {"d": "days", "h": "hours", "m": "minutes", "w": "weeks"}
    if len(text) >= 2 and text[-1] in units and text[:-1].isdigit():
        now = now or datetime.now(timezone.utc)
        return normalize_utc((now - timedelta(**{units[text[-1]]: int(text[:-1])})).isoformat())
    try:
        if len(text) == 10:
            day = datetime.fromisoformat(text).replace(tzinfo=timezone.utc)
            return normalize_utc((day + timedelta(days=1) if end_of_day else day).isoformat())
        return normalize_utc(text)
    except (ValueError, StoreError):
        raise StoreError(f"{flag} {text!r} is not a date", f"e.g. {flag} 2025-01-31, {flag} 2025-01-31T02:00Z or {flag} 7d") from None


def _now_utc() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


# -- opening ---------------------------------------------------------------------------------------
def open_store(url_or_path: str | os.PathLike | None = None, *, create: bool = True) -> Store:
    """Open (and migrate) the results store at ``url_or_path`` / ``$WINML_PERF_STORE`` / the default.

    ``create=False`` refuses to make a new SQLite file (reading commands use it so a typo in
    ``--store`` is an error, not an empty store)."""
    loc = resolve_location(url_or_path)
    if loc.dialect == "sqlite":
        applied = inspect_sqlite_file(loc.path)
        if applied is None and not create and not loc.path.exists():
            raise StoreError(f"no results store at {loc.path}", f"run `winml perf` first, or pass --store / set {ENV_VAR}")
        if applied is not None:
            _check_not_newer(loc.display, applied)
        try:
            loc.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot create the folder of results store {loc.path}: {exc}", "pass --store with a writable path") from None
        engine = _sqlite_engine(loc)
    else:
        engine = _pg_engine(loc)
    store = Store(loc, engine)
    try:
        store.migrate()
    except StoreError:
        store.close()
        raise
    except sa.exc.SQLAlchemyError as exc:
        store.close()
        raise store._db_error("open", exc) from None
    return store
