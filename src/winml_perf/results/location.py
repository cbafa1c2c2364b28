"""Where a results store lives, and a read-only look at an existing SQLite file before anything
may write to it (a file that is not ours is refused and left byte-for-byte untouched)."""

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


def _normalise_url(text: str) -> sa.URL:
    try:
        url = sa.make_url(text)
    except Exception as exc:  # sqlalchemy.exc.ArgumentError
        raise StoreError(
            f"--store {secrets.mask_arg(text)!r} is not a database URL ({secrets.mask(str(exc))})",
            "use a file path, sqlite:///path.db or postgresql://user@host/db",
        ) from None
    backend, _, driver = url.drivername.partition("+")
    if backend in ("postgresql", "postgres"):
        if driver not in ("", "psycopg"):
            raise StoreError(f"--store: driver {url.drivername!r} is not supported", "use postgresql:// (psycopg 3)")
        return url.set(drivername="postgresql+psycopg")
    if backend == "sqlite":
        return url
    raise StoreError(f"--store: {backend!r} databases are not supported", "use SQLite (a file path) or postgresql://")


def resolve_location(
    url_or_path: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None
) -> Location:
    """``--store`` value, else ``$WINML_PERF_STORE``, else ``results/winml-perf.db`` under cwd."""
    env = os.environ if env is None else env
    value = url_or_path if url_or_path not in (None, "") else env.get(ENV_VAR) or None
    if isinstance(value, str):
        secrets.remember(value)  # from here on, no output of this process shows its credentials
        if "://" not in value and secrets.looks_like_dsn(value):
            raise StoreError(
                f"--store {secrets.mask(value)!r} is a libpq connection string (key=value), not a path or URL",
                "give a URL such as postgresql://user@host:5432/db (or a file path for SQLite)",
            )
    if value is None:
        path = Path.cwd() / DEFAULT_RELATIVE_PATH
    elif isinstance(value, os.PathLike) or "://" not in str(value):
        path = Path(value).expanduser().absolute()
    else:
        url = _normalise_url(str(value))
        if url.get_backend_name() == "postgresql":
            secrets.remember_secret(url.password if isinstance(url.password, str) else None)
            return Location(url, "postgresql", None, secrets.mask(url.render_as_string(hide_password=True)))
        if not url.database or url.database == ":memory:":
            raise StoreError(
                f"--store {secrets.mask_arg(str(value))!r}: an in-memory SQLite store keeps nothing",
                "give a file, e.g. sqlite:///results/winml-perf.db",
            )
        path = Path(url.database).expanduser().absolute()
    return Location(sa.URL.create("sqlite", database=str(path)), "sqlite", path, secrets.mask(str(path)))


# -- SQLite file inspection (read-only, before anything may write) -------------------------------
def _refuse(path: Path, why: str) -> StoreError:
    return StoreError(
        f"results store {path} {why}; it was left untouched",
        f"pass --store with another file (or set {ENV_VAR}), or move this file away",
    )


def inspect_sqlite_file(path: Path, check_pages: bool = False) -> set[str] | None:
    """Applied migration names of an existing store file; None for a fresh (absent or empty) file.
    Raises StoreError for a directory, a non-SQLite or damaged file, or a foreign database.
    ``check_pages`` (a writer, before its work): every page is read (PRAGMA quick_check), so a store
    whose data pages every reader would refuse is refused before a run appends to it."""
    if path.is_dir():
        raise _refuse(path, "is a directory")
    if any(path == root or root in path.parents for root in PSEUDO_ROOTS):
        raise _refuse(path, f"is on a pseudo filesystem ({path.parts[1]})")
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


def unstored_path(loc: Location) -> Path:
    """Where `winml perf` leaves a run record whose cells the store did not take (next to an SQLite
    store; under results/ for PostgreSQL), for `winml results import`."""
    folder = loc.path.parent if loc.path is not None else Path.cwd() / DEFAULT_RELATIVE_PATH.parent
    stem = loc.path.name if loc.path is not None else "postgresql"
    return folder / f"{stem}.unstored"


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


def check_not_newer(where: str, applied: set[str]) -> None:
    newer = mig.unknown(applied)
    if newer:
        raise StoreError(
            f"results store {where} has schema migrations this winml-perf does not know ({', '.join(newer)}): "
            f"it was written by a newer version (this one knows schema {mig.SCHEMA_VERSION})",
            "upgrade winml-perf (pip install -U winml-perf), or use another --store",
        )
