"""pytest fixtures of the results tests: the same tests run on SQLite and on a real PostgreSQL
server (a fresh schema per test)."""

from __future__ import annotations

import os
import uuid
from urllib.parse import quote

import pytest

PG_ENV = "WINML_PERF_TEST_PG_URL"


def pg_base_url() -> str:
    """The test server's URL; skips outside CI when unset, fails in CI (it must run there)."""
    url = os.environ.get(PG_ENV)
    if not url:
        if os.environ.get("CI"):
            pytest.fail(f"{PG_ENV} is not set in CI; .ci/run starts PostgreSQL with scripts/ci-postgres.sh")
        pytest.skip(f"{PG_ENV} not set (start a server: export {PG_ENV}=$(scripts/ci-postgres.sh start))")
    return url


@pytest.fixture
def pg_url():
    """A fresh, empty PostgreSQL schema for one test (dropped afterwards), as a store URL."""
    import sqlalchemy as sa

    base = pg_base_url()
    schema = "t_" + uuid.uuid4().hex[:12]
    admin = sa.create_engine(sa.make_url(base).set(drivername="postgresql+psycopg"))
    with admin.begin() as conn:
        conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
    sep = "&" if "?" in base else "?"
    yield f"{base}{sep}options={quote(f'-csearch_path={schema}')}"
    with admin.begin() as conn:
        conn.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))
    admin.dispose()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store_url(request, tmp_path):
    """Each test using this runs once on an SQLite file and once on PostgreSQL."""
    if request.param == "sqlite":
        return str(tmp_path / "results" / "winml-perf.db")
    return request.getfixturevalue("pg_url")
