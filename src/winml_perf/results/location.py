"""Where a results store lives, and a read-only look at an existing SQLite file before anything
may write to it (a file that is not ours is refused and left byte-for-byte untouched).

``find_store`` does both at once for results/store.py ``open_store``: the location resolved (its
credentials remembered by support/secrets.py), the file inspected, its schema checked, and whether
it can only be read, in one StoreSite that the store is built from."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import sqlalchemy as sa

from winml_perf.results import migrations as mig
from winml_perf.support import secrets
from winml_perf.support.errors import StoreError

ENV_VAR = "WINML_PERF_STORE"
DEFAULT_RELATIVE_PATH = Path("results") / "winml-perf.db"
SQLITE_HEADER = b"SQLite format 3\x00"
#: Pseudo filesystems, where no database can live.
PSEUDO_ROOTS = (Path("/proc"), Path("/sys"))
#: How long a writer waits for the SQLite write lock (busy_timeout).
SQLITE_BUSY_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Location:
    """Where a store lives: the SQLAlchemy URL, the dialect ('sqlite' | 'postgresql'), the SQLite
    file (None for PostgreSQL) and a printable name (password hidden)."""

    url: sa.URL
    dialect: str
    path: Path | None
    display: str
    #: Where `winml perf` leaves a run record whose cells the store did not take (next to an SQLite
    #: store; under results/ for PostgreSQL), for `winml results import`.
    unstored: Path


def _normalise_url(text: str, source: str) -> sa.URL:
    try:
        url = sa.make_url(text)
    except Exception as exc:  # sqlalchemy.exc.ArgumentError
        raise StoreError(
            f"{source} {secrets.mask_arg(text)!r} is not a database URL ({secrets.mask(str(exc))})",
            "use a file path, sqlite:///path.db or postgresql://user@host/db",
        ) from None
    backend, _, driver = url.drivername.partition("+")
    if backend in ("postgresql", "postgres"):
        if driver not in ("", "psycopg"):
            raise StoreError(f"{source}: driver {url.drivername!r} is not supported", "use postgresql:// (psycopg 3)")
        return url.set(drivername="postgresql+psycopg")
    if backend == "sqlite":
        return url
    raise StoreError(f"{source}: {backend!r} databases are not supported", "use SQLite (a file path) or postgresql://")


def _refuse_unslashed_url(value: str, source: str) -> None:
    """A value such as ``postgresql:/user:pw@host/db`` would be an SQLite file of that name (its
    folders made, its password in every path shown): refused, naming the scheme only."""
    m = secrets.UNSLASHED_DB_URL.match(value)
    if m:
        scheme = m[1]
        url = (
            f"{scheme}:///results/winml-perf.db (a path relative to here; four slashes for an absolute one)"
            if scheme.lower().startswith("sqlite")
            else f"{scheme}://user@host:5432/db"
        )
        raise StoreError(
            f"{source} starts with {scheme + ':'!r} but not {scheme + '://'!r}: it is neither a database URL nor,"
            " as meant, a file",
            f"write {url}; for an SQLite file whose name starts so, give it as ./{scheme}:...",
        )


def resolve_location(
    url_or_path: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None
) -> Location:
    """``--store`` value, else ``$WINML_PERF_STORE``, else ``results/winml-perf.db`` under cwd."""
    env = os.environ if env is None else env
    value = url_or_path if url_or_path not in (None, "") else env.get(ENV_VAR) or None
    source = "--store" if url_or_path not in (None, "") else ENV_VAR  # what the user named it with
    if isinstance(value, str):
        secrets.remember(value)  # from here on, no output of this process shows its credentials
        if "://" not in value and secrets.looks_like_dsn(value):
            raise StoreError(
                f"{source} {secrets.mask(value)!r} is a libpq connection string (key=value), not a path or URL",
                "give a URL such as postgresql://user@host:5432/db (or a file path for SQLite)",
            )
        _refuse_unslashed_url(value, source)
    if value is None:
        path = _under_working_folder(DEFAULT_RELATIVE_PATH, f"the default results store (no --store, no {ENV_VAR})")
    elif isinstance(value, os.PathLike) or "://" not in str(value):
        path = _under_working_folder(Path(value).expanduser())
    else:
        url = _normalise_url(str(value), source)
        if url.get_backend_name() == "postgresql":
            secrets.remember_secret(url.password if isinstance(url.password, str) else None)
            display = secrets.mask(url.render_as_string(hide_password=True))
            return Location(url, "postgresql", None, display, unstored_path(None))
        if not url.database or url.database == ":memory:":
            raise StoreError(
                f"{source} {secrets.mask_arg(str(value))!r}: an in-memory SQLite store keeps nothing",
                "give a file, e.g. sqlite:///results/winml-perf.db",
            )
        path = _under_working_folder(Path(url.database).expanduser())
    url = sa.URL.create("sqlite", database=str(path))
    return Location(url, "sqlite", path, secrets.mask(str(path)), unstored_path(path))


def _under_working_folder(path: Path, what: str = "the results store") -> Path:
    """``path`` made absolute; a relative one under the working folder, which must still exist."""
    if path.is_absolute():
        return path
    try:
        return Path.cwd() / path
    except FileNotFoundError:
        raise StoreError(
            f"{what} {path} is named relative to the working folder, which no longer exists",
            "cd to an existing folder, or pass --store with an absolute path or a postgresql:// URL",
        ) from None


# -- SQLite file inspection (read-only, before anything may write) -------------------------------
def _refuse(path: Path, why: str, remedy: str = "") -> StoreError:
    return StoreError(
        f"results store {path} {why}; it was left untouched",
        remedy or f"pass --store with another file (or set {ENV_VAR}), or move this file away",
    )


def inspect_sqlite_file(path: Path, check_pages: bool = False) -> set[str] | None:
    """Applied migration names of an existing store file; None for a fresh (absent or empty) file.
    Raises StoreError for a directory, a non-SQLite or damaged file, or a foreign database.
    ``check_pages`` (a writer, before its work): every page is read (PRAGMA quick_check), so a store
    whose data pages every reader would refuse is refused before a run appends to it."""
    if path.is_dir():
        inside = path / DEFAULT_RELATIVE_PATH.name
        raise _refuse(
            path,
            "is a folder, not a database file",
            f"pass --store {inside} (a store file in that folder), or another file (or set {ENV_VAR} so)",
        )
    if any(path == root or root in path.parents for root in PSEUDO_ROOTS):
        where = f"is on a pseudo filesystem ({path.parts[1]})"
        raise _refuse(path, where, f"pass --store with a file on a disk (or set {ENV_VAR} so)")
    if path.exists() and not path.is_file():
        raise _refuse(path, "is not a regular file (a device, FIFO or socket cannot hold a database)")
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
        con = sqlite3.connect(inspection_uri(path), uri=True, timeout=SQLITE_BUSY_TIMEOUT_S)
    except sqlite3.Error as exc:
        raise _refuse(path, f"cannot be opened ({exc})") from None
    try:
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        applied = applied_from_tables(path, tables, lambda q: [r[0] for r in con.execute(q)], con)
        if check_pages:
            verdict = [r[0] for r in con.execute("PRAGMA quick_check(3)")]
            if verdict != ["ok"]:
                found = "; ".join(str(v).replace("\n", "; ") for v in verdict)
                raise _refuse(path, f"is damaged ({found[:300]}), so every reader refuses it")
        return applied
    except sqlite3.DatabaseError as exc:
        raise _refuse(path, f"is damaged or not a database ({exc})") from None
    finally:
        con.close()


def unstored_path(path: Path | None) -> Path:
    """Location.unstored of the SQLite file ``path``; for PostgreSQL (None) ``results/`` relative to
    the working folder when a record is written there: a PostgreSQL location never reads that folder."""
    if path is None:
        return DEFAULT_RELATIVE_PATH.parent / "postgresql.unstored"
    return path.parent / f"{path.name}.unstored"


def writable(path: Path) -> bool:
    """Can a writer use this SQLite file: the file (when it exists) and its folder (journal, lock)."""
    return (not path.exists() or os.access(path, os.W_OK)) and os.access(path.parent, os.W_OK | os.X_OK)


def read_only_uri(path: Path) -> str:
    """An SQLite URI that reads ``path`` without writing anything, even where the WAL's shared
    memory file cannot be made (a read-only file or folder: then nobody can be writing to it)."""
    return f"file:{quote(str(path))}?mode=ro" + ("" if writable(path) else "&immutable=1")


def inspection_uri(path: Path) -> str:
    """The URI of the first look at a file. With no journal or WAL beside it, the file holds every
    committed page, so it is read as immutable: that makes no -shm or -wal file either, which a
    plain read-only open does for a header that says WAL, damaged or not."""
    beside = [path.with_name(path.name + suffix) for suffix in ("-wal", "-journal")]
    if any(p.exists() for p in beside):
        return read_only_uri(path)
    return f"file:{quote(str(path))}?mode=ro&immutable=1"


def applied_from_tables(
    where: Any, tables: set[str], query: Callable[[str], list[Any]], con: Any = None
) -> set[str] | None:
    user_tables = {t for t in tables if not t.startswith("sqlite_")}
    if not user_tables:
        return None
    if mig.MIGRATIONS_TABLE not in user_tables:
        raise _refuse(
            where, f"holds tables of something else ({', '.join(sorted(user_tables)[:5])}), not a winml-perf store"
        )
    try:
        applied = set(query(f"SELECT name FROM {mig.MIGRATIONS_TABLE}"))
    except Exception:
        raise _refuse(where, f"has a {mig.MIGRATIONS_TABLE} table of another tool") from None
    if mig.MIGRATIONS[0].name not in applied:
        raise _refuse(where, f"has a {mig.MIGRATIONS_TABLE} table of another tool")
    return applied


def check_schema(where: str, applied: set[str], *, read_only: bool = False) -> None:
    """Refuse a store whose schema this winml-perf cannot use: one a newer version wrote, or
    (``read_only``: nobody can write it here) one whose older schema cannot be upgraded."""
    newer = mig.unknown(applied)
    if newer:
        raise StoreError(
            f"results store {where} has schema migrations this winml-perf does not know ({', '.join(newer)}): "
            f"it was written by a newer version (this one knows schema {mig.SCHEMA_VERSION})",
            "upgrade winml-perf (pip install -U winml-perf), or use another --store",
        )
    if read_only and mig.pending(applied):
        raise StoreError(
            f"results store {where} is read-only and has an older schema than this winml-perf reads",
            "make it writable once so its schema can be upgraded, or read it with the version that wrote it",
        )


# -- finding a store before opening it -----------------------------------------------------------
@dataclass(frozen=True)
class StoreSite:
    """A store as ``find_store`` found it: where it lives, and whether it is opened to read only
    (an SQLite file nobody can write here, which reading commands read as it is)."""

    location: Location
    read_only: bool = False


def find_store(url_or_path: str | os.PathLike[str] | None = None, *, create: bool = True) -> StoreSite:
    """The store at ``url_or_path`` / ``$WINML_PERF_STORE`` / the default, looked at before opening:
    an SQLite file is inspected read-only (every page when ``create``: a writer is refused before it
    works), its folder made, and its schema checked. ``create=False`` refuses to make a new SQLite
    file (reading commands use it so a typo in ``--store`` is an error, not an empty store)."""
    loc = resolve_location(url_or_path)
    if loc.path is None:  # PostgreSQL: its schema is read once connected
        return StoreSite(loc)
    applied = inspect_sqlite_file(loc.path, check_pages=create)
    if applied is None and not create and not loc.path.exists():
        raise StoreError(f"no results store at {loc.path}", f"run `winml perf` first, or pass --store / set {ENV_VAR}")
    try:
        loc.path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(
            f"cannot create the folder of results store {loc.path}: {exc.strerror or exc}",
            "pass --store with a writable path",
        ) from None
    read_only = not writable(loc.path)
    if applied is not None:  # a newer store is refused before a read-only one
        check_schema(loc.display, applied, read_only=read_only and not create)
    if read_only and (create or applied is None):
        raise StoreError(
            f"results store {loc.path} is read-only (the file or its folder)",
            "pass --store with a writable path, or make it writable",
        )
    return StoreSite(loc, read_only)
