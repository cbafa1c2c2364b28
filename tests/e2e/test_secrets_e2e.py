"""A PostgreSQL password given in --store appears in no output: stdout, stderr, the -o record, every
export, the store's exports and the dashboard pages (the test greps each for it)."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa

pytestmark = pytest.mark.postgres

SECRET = "Pw-never-printed-7"


def _with_password(url: str) -> str:
    """The test server trusts local connections, so any password connects; the URL carries one."""
    parsed = sa.make_url(url)
    return parsed.set(password=SECRET).render_as_string(hide_password=False)


def _files(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file()]


def test_the_store_password_is_in_no_output(winml, tiny_flat, pg_url, tmp_path):
    store = _with_password(pg_url)
    assert SECRET in store
    outputs = []
    perf = winml(
        "perf", "--invocations", "1", tiny_flat, "--store", store, "--format", "json", "-o", tmp_path / "run.json",
        "--export-csv", tmp_path / "run.csv", "--export-jsonl", tmp_path / "run.jsonl",
        "--export-markdown", tmp_path / "run.md", "--iterations", "2", "--max-new-tokens", "4",
        "--prompt-tokens", "8", cwd=tmp_path,
    )  # fmt: skip
    assert perf.returncode == 0, perf.stderr
    assert "argv" in perf.json() and any("***" in a for a in perf.json()["argv"])
    outputs.append(perf)
    for fmt in ("csv", "json", "jsonl", "markdown", "bmf", "gab-bigger"):
        outputs.append(winml("results", "export", "--store", store, "--format", fmt, "-o", tmp_path / f"x.{fmt}"))
    for args in (("results", "list"), ("results", "list", "--format", "json"), ("compare", "routes")):
        outputs.append(winml(*args, "--store", store, cwd=tmp_path))
    outputs.append(winml("dashboard", "--store", store, "-o", tmp_path / "site", cwd=tmp_path))
    for done in outputs:
        assert SECRET not in done.stdout + done.stderr
    written = _files(tmp_path)
    assert len(written) >= 10
    for path in written:
        assert SECRET.encode() not in path.read_bytes(), path
