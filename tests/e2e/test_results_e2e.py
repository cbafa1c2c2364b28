"""`winml results`, `winml compare` and `winml dashboard` as a user runs them: on a store of
hand-made records (exact expectations) and on a store that a real `winml perf` sweep filled.

Most calls go through the CLI's ``main()`` in this process (the same code path as the `winml`
script, minus a Python start-up each); exit codes, stdout and stderr are checked the same way.
A few calls run `winml` as a real subprocess to cover the script itself.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sqlite3
from dataclasses import dataclass

import pytest

from tests.conftest import TINY_FLAT, run_winml
from tests.results_fakes import GOLDEN_RUN_A, GOLDEN_RUN_B, golden_cells
from winml_perf.results import migrations as mig
from winml_perf.results.store import open_store

pytestmark = pytest.mark.e2e


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str

    def json(self):
        return json.loads(self.stdout)


def winml(*args, env: dict | None = None, cwd=None) -> Result:
    """Run `winml ARGS` in this process through cli.main (exit code from its SystemExit)."""
    from winml_perf.cli import main

    out, err = io.StringIO(), io.StringIO()
    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    try:
        os.environ.update(env or {})
        if cwd is not None:
            os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main([str(a) for a in args])
                code = 0
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
    return Result(code, out.getvalue(), err.getvalue())


@pytest.fixture(scope="module")
def store_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("results") / "winml-perf.db"
    with open_store(path) as store:
        store.write_json_records(golden_cells())
    return path


def test_results_list_show_and_filters(store_path):
    r = winml("results", "list", "--store", store_path)
    assert r.returncode == 0, r.stderr
    assert "5 record(s)" in r.stderr and r.stdout.count("tiny-qwen2") == 5
    rows = winml("results", "list", "--store", store_path, "--format", "json", "--route", "config").json()
    assert [x["run_id"] for x in rows] == [GOLDEN_RUN_A, GOLDEN_RUN_B]
    rows = winml(
        "results", "list", "--store", store_path, "--format", "json", "--since", "2025-01-02", "--status", "failed"
    ).json()
    assert [(x["route"], x["status"]) for x in rows] == [("ep=webgpu", "failed")]
    csv = winml("results", "list", "--store", store_path, "--format", "csv", "--limit", "2").stdout
    assert len(csv.strip().splitlines()) == 3 and csv.startswith("id,record_uid,run_id")
    assert winml("results", "list", "--store", store_path, "--format", "markdown").stdout.startswith("| id")
    shown = winml("results", "show", "3", "--store", store_path)
    assert shown.returncode == 0 and "route ep=webgpu" in shown.stdout and "decode_tokens_per_s" in shown.stdout
    record = winml("results", "show", "3", "--store", store_path, "--format", "json").json()
    assert record == golden_cells()[2]
    missing = winml("results", "show", "99", "--store", store_path)
    assert missing.returncode == 2 and "no record '99'" in missing.stderr


def test_store_from_the_environment_and_bad_flags(store_path, tmp_path):
    r = winml("results", "list", "--format", "json", env={"WINML_PERF_STORE": str(store_path)}, cwd=tmp_path)
    assert r.returncode == 0 and len(r.json()) == 5
    r = winml("results", "list", cwd=tmp_path, env={"WINML_PERF_STORE": ""})
    assert r.returncode == 2 and "no results store" in r.stderr
    assert not (tmp_path / "results").exists()  # reading never creates a store
    assert winml("results", "list", "--store", store_path, "--format", "xml").returncode == 2
    assert winml("results", "list", "--store", store_path, "--since", "someday").returncode == 2


def test_exports(store_path, tmp_path):
    bmf = winml("results", "export", "--format", "bmf", "--store", store_path)
    assert bmf.returncode == 0 and "tiny-qwen2 ep=webgpu p16 n8" in bmf.json()
    for direction in ("bigger", "smaller"):  # one file per direction, nothing beside it
        out = tmp_path / direction / "gab.json"
        r = winml("results", "export", "--format", f"gab-{direction}", "--store", store_path, "-o", out)
        assert r.returncode == 0, r.stderr
        assert [p.name for p in out.parent.iterdir()] == ["gab.json"]
    bigger = json.loads((tmp_path / "bigger" / "gab.json").read_text())
    smaller = json.loads((tmp_path / "smaller" / "gab.json").read_text())
    assert all(e["unit"] == "tokens/s" for e in bigger) and all(e["unit"] in ("ms", "bytes") for e in smaller)
    one = winml("results", "export", "--format", "gab", "--direction", "smaller", "--store", store_path)
    assert one.json() == smaller
    assert (
        winml("results", "export", "--format", "gab-smaller", "--store", store_path).json() == smaller
    )  # stdout without -o
    for args in ((), ("-o", tmp_path / "both.json")):  # a bare gab names the two formats, and writes nothing
        r = winml("results", "export", "--format", "gab", "--store", store_path, *args)
        assert r.returncode == 2 and "gab-bigger" in r.stderr and "gab-smaller" in r.stderr
    assert not (tmp_path / "both.json").exists() and not list(tmp_path.glob("both*"))
    r = winml("results", "export", "--format", "csv", "--direction", "bigger", "--store", store_path)
    assert r.returncode == 2


def test_compare_routes_and_runs_with_the_regression_gate(store_path):
    r = winml("compare", "routes", "--store", store_path)
    assert r.returncode == 0, r.stderr
    assert "ep=webgpu decode ran 1.8" in r.stdout and "times faster than config" in r.stdout
    data = winml(
        "compare", "routes", "--store", store_path, "--format", "json", "--metric", "decode_tokens_per_s"
    ).json()
    assert {c["route"]: c["verdict"] for c in data["comparisons"]} == {"ep=cpu": "equivalent", "ep=webgpu": "faster"}

    gate = run_winml(
        "compare",
        "runs",
        "--store",
        store_path,
        "--baseline",
        f"run:{GOLDEN_RUN_A[:8]}",
        "--candidate",
        "latest",
        "--route",
        "config",
        "--fail-on-regression",
        "5%",
    )
    assert gate.returncode == 1, gate.stderr
    assert "REGRESSION" in gate.stdout and "regression(s) beyond 5%" in gate.stderr
    relaxed = winml(
        "compare",
        "runs",
        "--store",
        store_path,
        "--baseline",
        "commit:aaaa",
        "--candidate",
        "commit:bbbb",
        "--route",
        "config",
        "--fail-on-regression",
        "15%",
        "--format",
        "json",
    )
    assert relaxed.returncode == 0 and relaxed.json()["regressions"] == 0
    no_gate = winml(
        "compare",
        "runs",
        "--store",
        store_path,
        "--baseline",
        "version:0.1.0",
        "--candidate",
        "version:0.1.1",
        "--route",
        "config",
    )
    assert no_gate.returncode == 0  # without --fail-on-regression a regression is reported, not fatal


def test_compare_errors_exit_2(store_path):
    mismatch = winml(
        "compare", "runs", "--store", store_path, "--baseline", "date:2025-01-01", "--candidate", "date:2025-01-02"
    )
    assert mismatch.returncode == 2 and "--force" in mismatch.stderr
    forced = winml(
        "compare",
        "runs",
        "--store",
        store_path,
        "--baseline",
        "date:2025-01-01",
        "--candidate",
        "date:2025-01-02",
        "--force",
    )
    assert forced.returncode == 0, forced.stderr
    unknown = winml("compare", "runs", "--store", store_path, "--baseline", "run:ffffffff", "--candidate", "latest")
    assert unknown.returncode == 2 and "--baseline 'run:ffffffff' matches no records" in unknown.stderr
    # given as BASELINE CANDIDATE, a run that matches nothing is named so, not as --baseline/--candidate
    unknown = winml("compare", "runs", "--store", store_path, "run:ffffffff", "latest")
    assert unknown.returncode == 2 and "error: BASELINE 'run:ffffffff' matches no records" in unknown.stderr
    unknown = winml("compare", "runs", "--store", store_path, "latest", "run:ffffffff")
    assert unknown.returncode == 2 and "error: CANDIDATE 'run:ffffffff' matches no records" in unknown.stderr
    assert winml("compare", "routes", "--store", store_path, "--run", "ffff").returncode == 2
    assert (
        winml(
            "compare", "runs", "--store", store_path, "--baseline", "latest", "--fail-on-regression", "lots"
        ).returncode
        == 2
    )


def test_bad_store_files_exit_2_and_stay_untouched(tmp_path):
    junk = tmp_path / "junk.db"
    junk.write_bytes(os.urandom(2048))
    before = junk.read_bytes()
    for args in (("results", "list"), ("compare", "routes"), ("dashboard", "-o", str(tmp_path / "site"))):
        r = (run_winml if args[0] == "results" else winml)(*args, "--store", junk)
        assert r.returncode == 2 and "left untouched" in r.stderr, (args, r.stderr)
    assert junk.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["junk.db"]

    newer = tmp_path / "newer.db"
    with open_store(newer) as store, store.engine.begin() as conn:
        conn.execute(mig.schema_migrations.insert().values(name="0999_next", applied_utc="2030-01-01T00:00:00Z"))
    r = winml("results", "list", "--store", newer)
    assert r.returncode == 2 and "newer" in r.stderr and "upgrade winml-perf" in r.stderr

    foreign = tmp_path / "foreign.db"
    con = sqlite3.connect(foreign)
    con.execute("CREATE TABLE notes (body TEXT)")
    con.commit()
    con.close()
    before = foreign.read_bytes()
    r = winml("results", "list", "--store", foreign)
    assert r.returncode == 2 and "notes" in r.stderr
    assert foreign.read_bytes() == before


def test_dashboard_command_writes_a_self_contained_page(store_path, tmp_path):
    r = winml("dashboard", "--store", store_path, "-o", tmp_path / "site", "--title", "nightly <tiny>")
    assert r.returncode == 0, r.stderr
    site = tmp_path / "site"
    pages = [site / "index.html", *sorted((site / "pages").rglob("*.html"))]
    assert [p.relative_to(site).as_posix() for p in pages] == ["index.html", "pages/tb-linux/tiny-qwen2.html"]
    for page in pages:
        text = page.read_text()
        assert "<title>nightly &lt;tiny&gt;" in text
        assert (
            "<script src" not in text
            and "<link" not in text
            and "https://" not in text
            and "http://" not in text.replace('xmlns="http://www.w3.org/2000/svg"', "")
        )
    index = pages[0].read_text()
    assert 'data-records="5"' in index and index.count("<tr data-testbed=") == 3  # config, ep=cpu, ep=webgpu
    detail = pages[1].read_text()
    primary = detail.split(" data-primary ", 1)[1].split("</section>", 1)[0]
    assert primary.count('class="pt"') == 4 and primary.count('class="pt failed"') == 1  # 5 records, one failed


def test_a_real_sweep_lands_in_the_store_and_compares(tmp_path):
    store = tmp_path / "perf.db"
    r = run_winml(
        "perf",
        TINY_FLAT,
        "--route",
        "config",
        "--route",
        "ep=qnn",
        "--iterations",
        "6",
        "--warmup",
        "1",
        "--prompt-tokens",
        "8",
        "--max-new-tokens",
        "4",
        "--no-isolate",
        "--invocations",
        "1",
        "--quiet",
        "--store",
        store,
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    rows = winml("results", "list", "--store", store, "--format", "json").json()
    # QNN's HTP emulator here: the route's label says so wherever it is shown (issue 35)
    assert sorted(x["route"] for x in rows) == ["config", "ep=qnn (emulated)"] and {x["n_samples"] for x in rows} == {6}
    assert len({x["run_id"] for x in rows}) == 1
    data = winml("compare", "routes", "--store", store, "--format", "json").json()
    decode = next(c for c in data["comparisons"] if c["metric"] == "decode_tokens_per_s")
    assert decode["route"] == "ep=qnn (emulated)" and decode["rounds"] == 6 and decode["speedup"] > 0
    assert decode["verdict"] in ("faster", "slower", "equivalent", "inconclusive")
