"""`winml` run as a user runs it, at the edges: signals, a held or read-only store, bundles
without a tokenizer (ours stripped, and onnxruntime-genai's own test models), bad input."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.conftest import REPO, TINY_FLAT, run_winml

pytestmark = pytest.mark.e2e

#: One cheap real measurement of the flat tiny bundle, for tests about the store and the CLI around it.
TINY_RUN = (
    "perf",
    "--invocations",
    "1",
    TINY_FLAT,
    "--iterations",
    "1",
    "--prompt-tokens",
    "8",
    "--max-new-tokens",
    "2",
)

ORT_GENAI_MODELS = REPO / "tests" / "data" / "ort-genai-test-models"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja")


def _digest(folder: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and "_compiled" not in p.parts
    }


def _stored(db: Path) -> int:
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as con:
            return con.execute("SELECT count(*) FROM records").fetchone()[0]
    except sqlite3.Error:
        return 0


def _start(args: list, **kw) -> subprocess.Popen:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "winml_perf", *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
        **kw,
    )


def _wait_for(cond, proc: subprocess.Popen, what: str, limit_s: float = 240) -> None:
    deadline = time.monotonic() + limit_s
    while not cond():
        if proc.poll() is not None:
            pytest.fail(f"winml exited ({proc.returncode}) before {what}: {proc.stderr.read()}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"no {what} within {limit_s} s")
        time.sleep(0.1)


# -- interrupts ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "sig, code, to_group",
    [(signal.SIGINT, 130, True), (signal.SIGTERM, 143, False)],
    ids=["ctrl-c-to-the-group", "sigterm-to-the-parent"],
)
def test_signal_keeps_finished_cells_kills_children_exits_128_plus_signal(bundle_copy, tmp_path, sig, code, to_group):
    bundle = bundle_copy(TINY_FLAT)
    db, out = tmp_path / "s.db", tmp_path / "run.json"
    # the first shape group is quick; the second runs long enough to be interrupted in the middle
    proc = _start(
        [
            "perf",
            bundle,
            "--route",
            "config",
            "--route",
            "ep=qnn",
            "--prompt-tokens",
            "8",
            "--max-new-tokens",
            "2,900",
            "--invocations",
            "1",
            "--iterations",
            "300",  # the second group, 300 x 900 tokens, lasts far longer than the wait for the first
            "--warmup",
            "0",
            "--store",
            db,
            "-o",
            out,
        ]
    )
    _wait_for(lambda: _stored(db) >= 2, proc, "the first group stored")
    children = psutil.Process(proc.pid).children(recursive=True)
    assert children, "several routes run in child processes"
    if to_group:
        os.killpg(proc.pid, sig)
    else:
        proc.send_signal(sig)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == code, stderr
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr and "BrokenPipeError" not in stderr
    last = stderr.strip().splitlines()[-1]
    assert last.startswith(f"interrupted by {signal.Signals(sig).name}: 2 finished cell(s)") and str(out) in last
    doc = json.loads(out.read_text())
    assert doc["status"] == "failed" and doc["sweep"]["interrupted"] == signal.Signals(sig).name
    assert sorted(c["cell_key"] for c in doc["cells"]) == ["config|p8|n2", "ep=qnn|p8|n2"]
    assert _stored(db) == 2
    gone = psutil.wait_procs(children, timeout=30)[1]
    assert not gone, f"children left running: {[p.pid for p in gone]}"
    assert _digest(bundle) == _digest(TINY_FLAT)  # the copy's sources are untouched


def test_typer_exit_codes_are_passed_on_not_turned_into_0(tmp_path):
    r = run_winml("results", "list", "--store", tmp_path / "absent.db")
    assert r.returncode == 2 and "no results store" in r.stderr


# -- the store ------------------------------------------------------------------------------------------
def test_held_store_lock_times_out_and_the_records_are_kept(tmp_path):
    db, out = tmp_path / "s.db", tmp_path / "run.json"
    assert (
        run_winml(
            *TINY_RUN,
            "--store",
            db,
        ).returncode
        == 0
    )
    fd = os.open(f"{db}.lock", os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)
    os.write(fd, str(os.getpid()).encode())
    try:
        r = run_winml(
            "perf",
            "--invocations",
            "1",
            TINY_FLAT,
            "--iterations",
            "1",
            "--prompt-tokens",
            "8",
            "--max-new-tokens",
            "2,3",
            "--store",
            db,
            "-o",
            out,
            env={"WINML_PERF_STORE_LOCK_TIMEOUT": "2"},
        )
    finally:
        os.close(fd)
    assert r.returncode == 2, r.stderr
    assert f"waiting for the results store's lock {db}.lock, held by pid {os.getpid()}" in r.stderr
    err = r.stderr.strip().splitlines()[-1]
    assert (
        f"{db}.lock" in err and "gave up waiting" in err and "not tried" in err
    )  # the second cell does not wait again
    doc = json.loads(out.read_text())
    (saved,) = (tmp_path / "s.db.unstored").iterdir()
    assert saved.name == f"{doc['run_id']}.json" and json.loads(saved.read_text()) == doc
    assert str(out) in err and str(saved) in err and len(doc["cells"]) == 2


def _make_read_only(paths: list[Path]) -> list[Path]:
    if os.geteuid() != 0:
        for p in paths:
            p.chmod(0o555 if p.is_dir() else 0o444)
        return []
    if shutil.which("chattr") is None or subprocess.run(["chattr", "+i", *map(str, paths)]).returncode != 0:
        pytest.skip("running as root and cannot make files immutable here")
    return paths


def test_read_only_store_is_listed_not_called_damaged(tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    db = folder / "s.db"
    assert (
        run_winml(
            *TINY_RUN,
            "--store",
            db,
        ).returncode
        == 0
    )
    before = sorted(os.listdir(folder))
    immutable = _make_read_only([db, folder])
    try:
        r = run_winml("results", "list", "--store", db, "--format", "json")
        w = run_winml(
            *TINY_RUN,
            "--store",
            db,
        )
    finally:
        if immutable:
            subprocess.run(["chattr", "-i", *map(str, immutable)], check=True)
        folder.chmod(0o755)
        db.chmod(0o644)
    assert r.returncode == 0, r.stderr
    assert len(json.loads(r.stdout)) == 1 and "damaged" not in r.stderr
    assert w.returncode == 2 and "read-only" in w.stderr and "damaged" not in w.stderr
    assert sorted(os.listdir(folder)) == before


def test_store_dev_null_refused_and_leaves_nothing_beside_it():
    before = set(os.listdir("/dev"))
    r = run_winml(
        *TINY_RUN,
        "--store",
        "/dev/null",
    )
    assert r.returncode == 2 and "/dev/null" in r.stderr and "not a regular file" in r.stderr
    assert not {"null-journal", "null.lock", "null-wal", "null-shm"} & (set(os.listdir("/dev")) - before)


def test_store_in_an_unwritable_place_is_exit_2(tmp_path):
    (tmp_path / "file").write_text("")
    r = run_winml(
        "perf",
        "--invocations",
        "1",
        TINY_FLAT,
        "--iterations",
        "1",
        "--prompt-tokens",
        "8",
        "--store",
        tmp_path / "file" / "s.db",
    )
    assert r.returncode == 2 and "unexpected" not in r.stderr and "s.db" in r.stderr


def test_results_show_huge_id_is_no_record(tmp_path):
    db = tmp_path / "s.db"
    assert (
        run_winml(
            *TINY_RUN,
            "--store",
            db,
        ).returncode
        == 0
    )
    r = run_winml("results", "show", "9" * 30, "--store", db)
    assert r.returncode == 2 and "no record" in r.stderr and "unexpected" not in r.stderr


# -- bundles without a tokenizer -------------------------------------------------------------------------
@pytest.fixture
def no_tokenizer(bundle_copy):
    b = bundle_copy(TINY_FLAT, "no-tokenizer")
    for name in TOKENIZER_FILES:
        (b / name).unlink()
    return b


@pytest.mark.parametrize("route", ["config", "ep=cpu"])
def test_bundle_without_tokenizer_measured_with_synthetic_tokens(no_tokenizer, route):
    before = _digest(no_tokenizer)
    r = run_winml(
        "perf",
        "--invocations",
        "1",
        no_tokenizer,
        "--route",
        route,
        "--iterations",
        "2",
        "--prompt-tokens",
        "8",
        "--max-new-tokens",
        "4",
        "--no-store",
        "--format",
        "json",
    )
    assert r.returncode == 0, r.stderr
    (cell,) = r.json()["cells"]
    assert cell["status"] == "ok" and cell["shape"]["prompt_tokens"] == 8
    assert _digest(no_tokenizer) == before


@pytest.mark.parametrize("extra", [["--prompt", "hello"], ["--prompt", "hello", "--apply-template"]])
def test_text_prompt_on_a_bundle_without_tokenizer_is_exit_2_naming_the_file(no_tokenizer, extra):
    r = run_winml("perf", "--invocations", "1", no_tokenizer, *extra, "--iterations", "1", "--no-store")
    assert r.returncode == 2 and "tokenizer_config.json" in r.stderr and "--prompt-tokens" in r.stderr


@pytest.mark.parametrize(
    "name, route",
    [("tiny-random-lfm2-fp32", "config"), ("tiny-random-lfm2-fp32", "ep=cpu"), ("tiny-qwen35-cuda", "ep=cpu")],
)
def test_onnxruntime_genai_own_test_models_are_measured(tmp_path, name, route):
    bundle = tmp_path / name
    shutil.copytree(ORT_GENAI_MODELS / name, bundle)
    before = _digest(bundle)
    r = run_winml(
        "perf",
        bundle,
        "--route",
        route,
        "--invocations",
        "1",
        "--iterations",
        "2",
        "--prompt-tokens",
        "8",
        "--max-new-tokens",
        "4",
        "--no-store",
        "--format",
        "json",
    )
    assert r.returncode == 0, r.stderr
    (cell,) = r.json()["cells"]
    assert cell["status"] == "ok" and len(cell["samples"]["iterations"]) == 2
    assert _digest(bundle) == before
    p = run_winml("perf", "--invocations", "1", bundle, "--route", route, "--prompt", "hi", "--no-store")
    assert p.returncode == 2 and "tokenizer_config.json" in p.stderr


# -- -o --------------------------------------------------------------------------------------------------
def test_output_to_proc_refused_before_measuring(tmp_path):
    r = run_winml(
        "perf", "--invocations", "1", TINY_FLAT, "--iterations", "1", "--no-store", "-o", "/proc/winml-perf.json"
    )
    assert r.returncode == 2 and "pseudo filesystem" in r.stderr and "stored" not in r.stderr and not r.stdout


def test_output_symlink_and_fifo_keep_what_they_are(tmp_path):
    target, link, fifo = tmp_path / "real.json", tmp_path / "link.json", tmp_path / "fifo"
    link.symlink_to(target)
    os.mkfifo(fifo)
    r = run_winml(
        *TINY_RUN,
        "--no-store",
        "-o",
        link,
    )
    assert r.returncode == 0, r.stderr
    assert link.is_symlink() and json.loads(target.read_text())["kind"] == "run"
    reader = subprocess.Popen(["cat", str(fifo)], stdout=subprocess.PIPE, text=True)
    r = run_winml(
        *TINY_RUN,
        "--no-store",
        "-o",
        fifo,
    )
    assert r.returncode == 0, r.stderr
    assert json.loads(reader.communicate(timeout=60)[0])["kind"] == "run"
    assert fifo.is_fifo()


def test_results_export_to_proc_refused(tmp_path):
    db = tmp_path / "s.db"
    assert (
        run_winml(
            *TINY_RUN,
            "--store",
            db,
        ).returncode
        == 0
    )
    r = run_winml("results", "export", "--format", "csv", "--store", db, "-o", "/proc/x.csv")
    assert r.returncode == 2 and "pseudo filesystem" in r.stderr


# -- bad input never escapes as "unexpected" ---------------------------------------------------------------
@pytest.mark.parametrize(
    "content, why",
    [
        (b"\xff\xfe{\x00}\x00", "not UTF-8"),
        (b'{"model":' + b"[" * 50000 + b"]" * 50000 + b"}", "nested too deeply"),
        (None, "appears twice"),
    ],
)
@pytest.mark.parametrize("command", [["perf"], ["bundle", "show"]])
def test_bad_genai_config_is_exit_2_naming_the_file(bundle_copy, content, why, command):
    b = bundle_copy(TINY_FLAT)
    cfg = b / "genai_config.json"
    if content is None:
        text = cfg.read_text().replace(
            '"provider_options": []', '"provider_options": [{"cuda": {}}], "provider_options": []'
        )
        cfg.write_text(text)
    else:
        cfg.write_bytes(content)
    r = run_winml(
        *command, b, *(["--no-store", "--iterations", "1", "--invocations", "1"] if command == ["perf"] else [])
    )
    assert r.returncode == 2, r.stderr
    assert why in r.stderr and str(cfg) in r.stderr and "unexpected" not in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize(
    "args, flag",
    [
        (["--prompt-tokens", "1000000000"], "--prompt-tokens"),
        (["--prompt-tokens", "1000", "--max-new-tokens", "100"], "context of 1024"),
        (["--seed", "-1"], "--seed"),
        (["--prompt", ""], "--prompt is empty"),
        (["--apply-template"], "--apply-template needs --prompt"),
        (["--route", "ep=cpu", "--route", "ep=CPU"], "same route"),
        (["--cell-timeout", "inf"], "--cell-timeout"),
    ],
)
def test_flag_values_refused_before_measuring(args, flag):
    r = run_winml("perf", "--invocations", "1", TINY_FLAT, "--iterations", "1", "--no-store", *args)
    assert r.returncode == 2 and flag in r.stderr and not r.stdout and "unexpected" not in r.stderr


def test_shape_too_big_is_exit_2(tmp_path):
    from tests import models

    model = models.dynamic_batch(tmp_path / "dyn.onnx")
    # within a dimension's range (int32), too big for this machine's memory
    r = run_winml("perf", "--invocations", "1", model, "--shape", "batch=2000000000", "--no-store", "--iterations", "1")
    assert r.returncode == 2 and "--shape" in r.stderr and "memory" in r.stderr and "unexpected" not in r.stderr
    # beyond a dimension's range: refused by the flag bounds before any memory is counted
    r = run_winml(
        "perf", "--invocations", "1", model, "--shape", "batch=100000000000", "--no-store", "--iterations", "1"
    )
    assert r.returncode == 2 and "--shape" in r.stderr and "out of range" in r.stderr and "unexpected" not in r.stderr
