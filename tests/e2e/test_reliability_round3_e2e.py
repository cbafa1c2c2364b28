"""Issue 36 through the real CLI: the held-out doors of each class, and more found beside them.

Each class has one mechanism (support/secrets.py + stdio.GuardedText, support/safe_write.py,
support/cache_file.py + power/accounting.impossible_reading, support/terminal_text.py +
support/document_text.py, the EP table's value sets + model/flag_bounds.py); these tests go in
through the doors a user or a careless script uses.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import BUNDLES, LEAN_JSON, TINY_FLAT, run_winml

pytestmark = pytest.mark.e2e

SECRET = "Pw9-never-shown"
LEAN = ("--prompt-tokens", "8", "--max-new-tokens", "4", "--warmup", "0", "--iterations", "1", "--invocations", "1")


def _files(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file() and not p.is_symlink()]


def _no_secret(results, folder: Path) -> None:
    for done in results:
        assert SECRET not in done.stdout + done.stderr, (done.stdout + done.stderr)[-2000:]
    for path in _files(folder):
        assert SECRET.encode() not in path.read_bytes(), path


def _copy_bundle(dest: Path) -> Path:
    shutil.copytree(TINY_FLAT, dest, ignore=shutil.ignore_patterns("_compiled"))
    return dest


# -- 1. secrets -----------------------------------------------------------------------------------
def test_a_query_password_in_the_store_url_is_in_no_output_record_report_or_page(tmp_path):
    """Failed before: perf's "stored N record(s) in ...", results list, the tune --report file and
    tune's stderr showed ?password=."""
    store = f"sqlite:///{tmp_path}/s.db?password={SECRET}"
    done = [
        run_winml(
            "perf",
            TINY_FLAT,
            *LEAN,
            "--store",
            store,
            "--format",
            "json",
            "-o",
            tmp_path / "run.json",
            "--export-markdown",
            tmp_path / "run.md",
            cwd=tmp_path,
        )  # fmt: skip
    ]
    assert done[0].returncode == 0, done[0].stderr[-2000:]
    assert "stored 1 record(s) in" in done[0].stderr
    env = {"WINML_PERF_STORE": store}
    done += [
        run_winml("results", "list", cwd=tmp_path, env=env),
        run_winml("results", "list", "--format", "json", cwd=tmp_path, env=env),
        run_winml("results", "export", "--format", "csv", "-o", tmp_path / "x.csv", cwd=tmp_path, env=env),
        run_winml("dashboard", "-o", tmp_path / "site", cwd=tmp_path, env=env),
        run_winml(
            "tune",
            TINY_FLAT,
            "--eps",
            "cpu",
            "--max-rounds",
            "2",
            "--budget",
            "60s",
            *LEAN[:6],
            "--no-equivalence",
            "--report",
            tmp_path / "report.json",
            cwd=tmp_path,
            env=env,
        ),  # fmt: skip
    ]
    assert all(d.returncode == 0 for d in done), [d.stderr[-500:] for d in done]
    assert (tmp_path / "report.json").is_file() and (tmp_path / "site" / "index.html").is_file()
    _no_secret(done, tmp_path)


@pytest.mark.parametrize(
    "store",
    [
        f"postgresql://u:a/b c{SECRET}@127.0.0.1:1/db",  # '/' and a space in the password
        f"postgresql://u:{SECRET}@@127.0.0.1:1/db",  # a raw '@'
        f"postgresql://u@127.0.0.1:1/db?sslpassword={SECRET}&sslkey=/k/{SECRET}",
        f"host=127.0.0.1 port=1 password={SECRET} dbname=d",  # a libpq string
    ],
)
def test_no_form_of_a_store_password_reaches_an_error_a_traceback_or_a_record(tmp_path, store):
    """Failed before: a '/' or a space in the password, or a query credential, was printed verbatim."""
    done = [
        run_winml("perf", TINY_FLAT, *LEAN, "--store", store, "-o", tmp_path / "run.json", cwd=tmp_path),
        run_winml("results", "list", "--store", store, cwd=tmp_path, env={"WINML_PERF_VERBOSE": "1"}),
        run_winml("results", "list", cwd=tmp_path, env={"WINML_PERF_STORE": store, "WINML_PERF_VERBOSE": "1"}),
        run_winml("dashboard", "--store", store, "-o", tmp_path / "site", cwd=tmp_path),
    ]
    assert all(d.returncode == 2 for d in done), [(d.returncode, d.stderr[-300:]) for d in done]
    assert "Traceback" in done[1].stderr  # the verbose traceback is there, masked
    _no_secret(done, tmp_path)


# -- 2. no write follows a link; concurrent writers each finish whole -----------------------------
def _planted(tmp_path: Path) -> Path:
    outside = tmp_path / "outside"
    outside.mkdir()
    return outside


def test_dashboard_refuses_a_linked_pages_folder_and_a_linked_page_naming_the_link(tmp_path):
    """Failed before: `dashboard -o site` wrote through a symlinked site/pages."""
    run_winml("perf", TINY_FLAT, *LEAN, "--store", tmp_path / "s.db", cwd=tmp_path)
    outside = _planted(tmp_path)
    site = tmp_path / "site"
    site.mkdir()
    (site / "pages").symlink_to(outside)
    done = run_winml("dashboard", "--store", tmp_path / "s.db", "-o", site)
    assert done.returncode == 2 and "pages is a symbolic link" in done.stderr, done.stderr[-1000:]
    assert not list(outside.iterdir())
    (site / "pages").unlink()
    (site / "index.html").symlink_to(outside / "bashrc")
    done = run_winml("dashboard", "--store", tmp_path / "s.db", "-o", site)
    assert done.returncode == 2 and "index.html is a symbolic link" in done.stderr
    assert not (outside / "bashrc").exists()


def test_dashboard_sustained_refuses_a_planted_link(tmp_path):
    """A door found beside the example: `dashboard --sustained` writes DIR/sustained.html."""
    outside = _planted(tmp_path)
    site = tmp_path / "site"
    site.mkdir()
    (site / "sustained.html").symlink_to(outside / "victim")
    record = tmp_path / "run.json"
    sustained = ("--prompt-tokens", "8", "--max-new-tokens", "4", "--warmup", "0")  # LEAN less --iterations
    done = run_winml("perf", TINY_FLAT, *sustained, "--duration", "1s", "--no-store", "-o", record)
    assert done.returncode == 0, done.stderr[-1000:]
    done = run_winml("dashboard", "--sustained", record, "-o", site)
    assert done.returncode == 2 and "sustained.html is a symbolic link" in done.stderr, done.stderr[-800:]
    assert not (outside / "victim").exists()


def _at_once(n: int, *args, cwd=None) -> None:
    """``winml ARGS`` in ``n`` processes started together; every one must exit 0."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    cmd = [sys.executable, "-m", "winml_perf", *map(str, args)]
    procs = [
        subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=cwd)
        for _ in range(n)
    ]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0] * n, [o[1][-500:] for o in outs]


def test_three_concurrent_dashboards_into_one_folder_all_finish_whole(tmp_path):
    """Failed before: the temporary names were .NAME.html.tmp in every process: two of three exited 2."""
    store = tmp_path / "s.db"
    assert run_winml("perf", TINY_FLAT, *LEAN, "--store", store).returncode == 0
    site = tmp_path / "site"
    _at_once(3, "dashboard", "--store", store, "-o", site)
    pages = [p for p in site.rglob("*") if p.is_file()]
    assert not [p for p in pages if p.name.endswith(".tmp")]
    for page in pages:
        assert page.read_text().rstrip().endswith("</html>"), page


def test_two_runs_writing_one_output_file_at_once_leave_one_whole_record(tmp_path):
    """Class 7, another door: two `winml perf -o` into the same file at once. Each write is a unique
    temporary file and a rename, so both finish and the file is one whole, valid run record."""
    from winml_perf.record.validation import validate_record

    out = tmp_path / "run.json"
    _at_once(2, "perf", TINY_FLAT, *LEAN, "--no-store", "-q", "-o", out, cwd=tmp_path)
    run = json.loads(out.read_text())
    validate_record(run)
    assert len(run["cells"]) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.json"]  # no temporary file left beside it


def test_two_exports_into_one_file_at_once_leave_one_whole_export(tmp_path):
    """Class 7, a third door: two `winml results export -o` into the same file at once; both finish
    and the file is one whole export (every record's row, no half-written line)."""
    store = tmp_path / "s.db"
    assert run_winml("perf", TINY_FLAT, *LEAN, "--store", store).returncode == 0
    expected = run_winml("results", "export", "--store", store, "--format", "csv").stdout
    out = tmp_path / "out" / "export.csv"
    out.parent.mkdir()
    _at_once(2, "results", "export", "--store", store, "--format", "csv", "-o", out)
    assert out.read_text() == expected and [p.name for p in out.parent.iterdir()] == ["export.csv"]


def test_tune_emit_copies_a_linked_sub_folder_and_the_bundle_runs(tmp_path):
    """Failed before: --emit skipped a symlinked sub-folder and emitted a bundle that could not run."""
    bundle = _copy_bundle(tmp_path / "b")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (bundle / name).rename(elsewhere / name)
        (bundle / name).symlink_to(Path("tok") / name)
    (bundle / "tok").symlink_to(elsewhere)
    best = tmp_path / "best"
    done = run_winml(
        "tune", bundle, "--eps", "cpu", "--max-rounds", "2", "--budget", "60s", *LEAN[:6],
        "--no-equivalence", "--no-store", "--emit", best,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert (best / "tok" / "tokenizer.json").is_file() and not (best / "tok").is_symlink()
    assert run_winml("perf", best, *LEAN, "--no-store").returncode == 0


@pytest.mark.qnn
def test_export_prepared_refuses_links_planted_in_its_destination(tmp_path):
    """Failed before: 4 files outside DEST overwritten through planted links, exit 0."""
    import importlib.util

    if importlib.util.find_spec("onnxruntime_qnn") is None:
        pytest.skip("needs onnxruntime-qnn")
    bundle = _copy_bundle(tmp_path / "a")
    prepared = run_winml(
        "bundle", "prepare", bundle, "--ep", "qnn", "--compile", "--ep-option", "soc_model=60", "--device-free"
    )
    assert prepared.returncode == 0, prepared.stderr[-2000:]
    derived = prepared.stdout.strip().splitlines()[-1]
    outside = _planted(tmp_path)
    dest = tmp_path / "carried"
    dest.mkdir()
    (dest / "export.json").symlink_to(outside / "victim.json")
    done = run_winml("bundle", "export-prepared", derived, dest)
    assert done.returncode == 2 and "export.json is a symbolic link" in done.stderr, done.stderr[-1000:]
    assert not list(outside.iterdir()) and [p.name for p in dest.iterdir()] == ["export.json"]
    (dest / "export.json").unlink()
    done = run_winml("bundle", "export-prepared", derived, dest)
    assert done.returncode == 0, done.stderr[-1000:]
    doc = json.loads((dest / "export.json").read_text())
    assert all((dest / name).is_file() for name in doc["files"])
    # malformed exports are exit 2 naming the key, never "unexpected"
    for broken in (
        {**doc, "files": list(doc["files"])},
        {**doc, "jobs": [{"ep": None}]},
        {**doc, "files": {"../x": "0"}},
    ):
        (dest / "export.json").write_text(json.dumps(broken))
        done = run_winml("bundle", "import-prepared", _copy_bundle(tmp_path / f"b{id(broken)}"), dest)
        assert done.returncode == 2 and "unexpected" not in done.stderr and "export.json" in done.stderr, done.stderr


# -- 3. damaged caches and imports ---------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("bandwidth.json", '{"machine": "MACHINE", "bandwidth_bytes_per_s": Infinity}'),
        ("bandwidth.json", "[1, 2, 3]"),
        (
            "working_set_bandwidth.json",
            '{"machine": "MACHINE", "figures": {"262144": {"bandwidth_bytes_per_s": Infinity}}}',
        ),
        ("working_set_bandwidth.json", '{"machine": "MACHINE", "figures": [1]}'),
    ],
)
def test_a_damaged_bandwidth_cache_is_rebuilt_with_a_warning_and_the_run_stored(tmp_path, name, text):
    """Failed before: exit 1 (ZeroDivisionError / AttributeError) after measuring, nothing stored,
    on every run until someone deleted the file."""
    from winml_perf.record.roofline import machine_key

    cache = Path(os.environ["WINML_PERF_CACHE_DIR"])
    (cache / name).write_text(text.replace("MACHINE", machine_key()))
    env = {"WINML_PERF_BANDWIDTH_ARRAY_MIB": "16"}
    done = run_winml("perf", TINY_FLAT, *LEAN, "--store", tmp_path / "s.db", "--format", "json", env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"cache file {cache / name} is damaged" in done.stderr
    json.loads((cache / name).read_text())  # rewritten as JSON the next run trusts
    again = run_winml("perf", TINY_FLAT, *LEAN, "--store", tmp_path / "s.db", env=env)
    assert again.returncode == 0 and "is damaged" not in again.stderr


def test_an_imported_record_with_a_lone_surrogate_is_exit_2(tmp_path):
    """Failed before: exit 1 UnicodeEncodeError."""
    done = run_winml("perf", TINY_FLAT, *LEAN, "--no-store", "-o", tmp_path / "run.json")
    assert done.returncode == 0
    text = (tmp_path / "run.json").read_text().replace('"bundle": "', '"bundle": "\\ud800', 1)
    (tmp_path / "bad.json").write_text(text)
    done = run_winml("results", "import", tmp_path / "bad.json", "--store", tmp_path / "s.db")
    assert done.returncode == 2 and "lone UTF-16 surrogate" in done.stderr, done.stderr[-1000:]
    done = run_winml("dashboard", "--sustained", tmp_path / "bad.json", "-o", tmp_path / "site")
    assert done.returncode == 2 and "unexpected" not in done.stderr


# -- 4. terminal and document injection ----------------------------------------------------------
def test_escape_codes_in_a_bundle_folder_name_never_reach_the_terminal(tmp_path):
    """Failed before: window-title, clear-screen and bell codes reached the terminal raw."""
    bundle = _copy_bundle(tmp_path / "b\x1b]0;owned\x07\x1b[2J\x07")
    store = tmp_path / "s.db"
    done = [
        run_winml("bundle", "show", bundle),
        run_winml("perf", bundle, *LEAN, "--store", store),
        run_winml("results", "list", "--store", store),
        run_winml("results", "list", "--store", store, "--format", "csv"),
        run_winml("perf", bundle, "--prompt-tokens", "999999", "--no-store"),  # an error naming the bundle
    ]
    assert [d.returncode for d in done] == [0, 0, 0, 0, 2], [d.stderr[-300:] for d in done]
    for d in done:
        assert "\x1b" not in d.stdout + d.stderr and "\x07" not in d.stdout + d.stderr
    assert "\\u001b]0;owned" in done[2].stdout
    # the same guard keeps --format json on stdout JSON, a C1 control and a bidi override included
    odd = _copy_bundle(tmp_path / "c\x9b[2J\u202ed")
    as_json = run_winml("perf", odd, *LEAN, "--no-store", "--format", "json")
    assert as_json.returncode == 0 and "\x9b" not in as_json.stdout
    assert as_json.json()["cells"][0]["bundle"].endswith("c\x9b[2J\u202ed")


def test_a_pipe_newline_or_html_in_a_bundle_name_stays_in_its_markdown_cell(tmp_path):
    """Failed before: '|' and a newline added columns and rows, and raw <img onerror> landed in the export."""
    bundle = _copy_bundle(tmp_path / "x|y\nz<img src=q onerror=alert(1)>")
    store = tmp_path / "s.db"
    done = run_winml("perf", bundle, *LEAN, "--store", store, "--export-markdown", tmp_path / "run.md")
    assert done.returncode == 0, done.stderr[-1000:]
    listed = run_winml("results", "list", "--store", store, "--format", "markdown")
    exported = run_winml("results", "export", "--store", store, "--format", "markdown", "-o", tmp_path / "x.md")
    assert exported.returncode == 0
    for text in (listed.stdout, (tmp_path / "run.md").read_text(), (tmp_path / "x.md").read_text()):
        rows = [line for line in text.splitlines() if line.startswith("|")]
        assert len(rows) == 3, text  # header, rule, the one cell
        assert len({line.replace("\\|", "").count("|") for line in rows}) == 1, text
        assert "<img" not in text


# -- 5, 6, 8. checked values, bounds, references, paths --------------------------------------------
@pytest.mark.parametrize(
    "option", ["soc_model=abc", "backend_type=nosuch", "htp_performance_mode=bogus", "htp_performance_mode=a|<b"]
)
def test_a_qnn_option_value_the_ep_does_not_take_is_exit_2(option):
    """Failed before: exit 0 and a record claiming the value (or exit 1 for '|<')."""
    done = run_winml("perf", TINY_FLAT, "--ep", "qnn", "--ep-option", option, *LEAN, "--no-store")
    assert done.returncode == 2 and option.split("=")[0] in done.stderr, done.stderr[-500:]


@pytest.mark.parametrize(
    "args",
    [
        ("perf", TINY_FLAT, "--duration", "99999999999999999999m", "--no-store"),
        ("perf", TINY_FLAT, "--duration", "9" * 400, "--no-store"),
        ("tune", TINY_FLAT, "--budget", "9" * 400 + "s"),
        ("tune", TINY_FLAT, "--budget", "9" * 400 + "tok"),
        ("perf", TINY_FLAT, "--prompt-tokens", "1-250+1", "--max-new-tokens", "1-250+1,300-500+1", "--no-store"),
    ],
)
def test_unbounded_work_is_exit_2_before_it_starts(args):
    done = run_winml(*args, timeout=120)
    assert done.returncode == 2 and "inf" not in done.stderr.split(":")[-1], done.stderr[-500:]
    assert "unexpected" not in done.stderr


def test_a_large_sweep_names_its_flag():
    done = run_winml("perf", TINY_FLAT, "--prompt-tokens", "1-100+1", "--max-new-tokens", "1-11+1", "--no-store")
    assert done.returncode == 2 and "1,100 cells" in done.stderr and "--large-sweep" in done.stderr


def test_a_reference_bundle_of_another_vocabulary_is_refused_naming_both(tmp_path):
    """Failed before: exit 0, "config not judged: ... Gather ... idx=726"."""
    other = _copy_bundle(tmp_path / "other")
    config = json.loads((other / "genai_config.json").read_text())
    config["model"]["vocab_size"] = 726
    (other / "genai_config.json").write_text(json.dumps(config))
    done = run_winml("perf", TINY_FLAT, "--reference-bundle", other, *LEAN, "--no-store")
    assert done.returncode == 2 and "726" in done.stderr and str(other) in done.stderr and "512" in done.stderr
    same_vocab = _copy_bundle(tmp_path / "tok")
    tok = json.loads((same_vocab / "tokenizer.json").read_text())
    tok["added_tokens"] = (tok.get("added_tokens") or []) + [{"id": 511, "content": "<x>", "special": True}]
    (same_vocab / "tokenizer.json").write_text(json.dumps(tok))
    done = run_winml("perf", TINY_FLAT, "--reference-bundle", same_vocab, *LEAN, "--no-store")
    assert done.returncode == 2 and "tokenizer" in done.stderr


def test_a_reference_that_is_no_bundle_or_cannot_be_judged_exits_2_naming_the_flag(tmp_path):
    """Class 6, two more doors: a --reference-bundle that is no bundle (a missing path, a model file,
    a folder of bundles), and a reference the run cannot judge against (a plain ONNX model, or
    --reference beside --reference-bundle): exit 2 naming the flag, before any route is derived."""
    from tests import models

    bundle = _copy_bundle(tmp_path / "b")
    for ref in (tmp_path / "missing", BUNDLES / "tiny-qwen2" / "model.onnx", BUNDLES):
        done = run_winml("perf", bundle, "--reference-bundle", ref, *LEAN, "--no-store")
        assert done.returncode == 2, done.stderr[-500:]
        assert "--reference-bundle" in done.stderr and "genai_config.json" in done.stderr
        assert "unexpected" not in done.stderr
    plain = models.mlp(tmp_path / "m.onnx")
    done = run_winml("perf", plain, "--ep", "cpu", "--reference-bundle", bundle, "--iterations", "2", "--no-store")
    assert done.returncode == 2 and "--reference-bundle" in done.stderr, done.stderr[-500:]
    both = ("--reference-bundle", TINY_FLAT, "--reference", "config", "--route", "config", "--route", "ep=cpu")
    done = run_winml("perf", bundle, *both, *LEAN, "--no-store")
    assert done.returncode == 2 and "--reference cannot be combined" in done.stderr, done.stderr[-500:]
    assert not [p for p in (bundle / "_compiled").glob("*") if p.name != ".lock"]


def test_results_list_by_absolute_path_finds_a_record_stored_by_relative_path(tmp_path):
    work = tmp_path / "work"
    _copy_bundle(work / "bundles" / "b")
    store = tmp_path / "s.db"
    assert run_winml("perf", "bundles/b", *LEAN, "--store", store, cwd=work).returncode == 0
    for cwd, given in ((tmp_path, work / "bundles" / "b"), (work, "bundles/b"), (work / "bundles", "b")):
        done = run_winml("results", "list", "--store", store, "--bundle", given, "--format", "json", cwd=cwd)
        assert done.returncode == 0 and len(done.json()) == 1, (cwd, given, done.stderr[-300:])


def test_a_context_overflow_names_context_length():
    done = run_winml("perf", TINY_FLAT, "--prompt-tokens", "100000", "--no-store")
    assert done.returncode == 2 and "model.context_length" in done.stderr


def test_a_lean_run_still_works():
    done = run_winml("perf", BUNDLES / "tiny-qwen2", *LEAN_JSON, "--no-store")
    assert done.returncode == 0 and done.json()["cells"]


@pytest.mark.postgres
@pytest.mark.parametrize("password", [f"a/b{SECRET}", f"a b{SECRET}", f"?password={SECRET}", f"?sslpassword={SECRET}"])
def test_a_password_in_any_form_is_in_no_output_record_report_or_traceback(pg_url, tmp_path, password):
    """Failed before: a password with '/' or a space was written verbatim into --format json and the -o
    record; a ?password= query into perf's "stored N record(s) in ...", results list, the tune --report
    file and tune's stderr. The server trusts local connections, so any password connects."""
    import sqlalchemy as sa

    parsed = sa.make_url(pg_url)
    if password.startswith("?"):
        store = f"{pg_url}&{password[1:]}"
    else:
        store = pg_url.replace(f"://{parsed.username}@", f"://{parsed.username}:{password}@", 1)
    assert SECRET in store
    env = {"WINML_PERF_STORE": store}
    done = [
        run_winml("perf", TINY_FLAT, *LEAN, "--store", store, "--format", "json", "-o", tmp_path / "run.json"),
        run_winml("results", "list", "--store", store),
        run_winml("results", "list", "--format", "json", cwd=tmp_path, env=env),
        run_winml(
            "tune",
            TINY_FLAT,
            "--eps",
            "cpu",
            "--max-rounds",
            "2",
            "--budget",
            "60s",
            *LEAN[:6],
            "--no-equivalence",
            "--report",
            tmp_path / "report.json",
            cwd=tmp_path,
            env=env,
        ),  # fmt: skip
    ]
    assert [d.returncode for d in done] == [0, 0, 0, 0], [d.stderr[-500:] for d in done]
    assert "stored 1 record(s) in postgresql" in done[0].stderr and (tmp_path / "report.json").is_file()
    done.append(run_winml("results", "show", "nosuch", cwd=tmp_path, env={**env, "WINML_PERF_VERBOSE": "1"}))
    assert done[-1].returncode == 2
    _no_secret(done, tmp_path)


def test_a_sweep_of_hundreds_of_cells_writes_every_cell_and_leaves_no_spool(tmp_path):
    """Issue 36: the finished cells live on disk during the run (record/cell_spool.py), not in
    memory; -o and --format json still hold every cell, in order, as one valid run record, the
    same text both ways, and the spool's folder is gone after the run. A plain subprocess, so
    TMPDIR is this test's folder."""
    from winml_perf.record.validation import validate_record

    temp = tmp_path / "tmp"
    temp.mkdir()
    out = tmp_path / "run.json"
    argv = ["perf", TINY_FLAT, "--prompt-tokens", "1-100+1", "--max-new-tokens", "1-3+1", "--invocations", "1"]
    argv += ["--iterations", "1", "--warmup", "0", "--no-store", "-q", "--format", "json", "-o", out]
    done = subprocess.run(
        [sys.executable, "-m", "winml_perf", *map(str, argv)],
        capture_output=True,
        text=True,
        env={**os.environ, "TMPDIR": str(temp)},
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    text = out.read_text()
    assert done.stdout == text  # --format json and -o: the same run record
    doc = json.loads(text)
    validate_record(doc)
    cells = doc["cells"]
    assert len(cells) == 300 == doc["sweep"]["cell_count"]
    assert [c["cell_index"] for c in cells] == list(range(300))
    assert [(c["shape"]["prompt_tokens"], c["shape"]["max_new_tokens"]) for c in cells] == [
        (p, n) for p in range(1, 101) for n in range(1, 4)
    ]
    assert all(c["status"] == "ok" and len(c["samples"]["iterations"]) == 1 for c in cells)
    assert not list(temp.glob("winml-perf-cells-*"))  # the spool's folder was removed at exit
