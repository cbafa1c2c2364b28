"""`-` as an output path is standard output, one rule (support/output.py): `winml results export -o -`
writes there, as without -o; where stdout already carries the command's output in --format (`winml
perf`'s -o and --export-FORMAT, `winml serve -o`, `winml tune --report`) it is refused with exit 2,
naming the --format that puts it there; a folder output (`dashboard -o`, `tune --emit`, a bundle's -o)
refuses it. No file or folder named `-` is ever written."""

from __future__ import annotations

import pytest

from tests.conftest import TINY_FLAT
from tests.results_fakes import hex_id, make_cell
from winml_perf.results.store import open_store


@pytest.mark.parametrize(
    "command, flag, fix",
    [
        (("perf", TINY_FLAT, "--no-store"), "--export-json", "--format json puts the run on stdout as json"),
        (("perf", TINY_FLAT, "--no-store"), "--export-jsonl", "--format jsonl puts the run on stdout as jsonl"),
        (("perf", TINY_FLAT, "--no-store"), "--export-csv", "--format csv puts the run on stdout as csv"),
        (("perf", TINY_FLAT, "--no-store"), "--export-markdown", "--format markdown puts the run on stdout"),
        (("perf", TINY_FLAT, "--no-store"), "-o", "--format json puts the run on stdout as json"),
        (("serve", TINY_FLAT, "--concurrency", "1", "--no-store"), "-o", "--format json puts the run record on stdout"),
        (("tune", TINY_FLAT, "--no-store"), "--report", "--format json puts the tune report on stdout"),
    ],
)
def test_a_dash_where_stdout_carries_the_commands_output_is_refused(winml, tmp_path, command, flag, fix):
    ran = winml(*command, flag, "-", cwd=tmp_path)
    err = " ".join(ran.stderr.split())
    assert ran.returncode == 2, err
    assert err.startswith(f"error: {flag} -: standard output already carries this command's output") and fix in err
    assert ran.stdout == "" and list(tmp_path.iterdir()) == []  # no file named '-'


def test_results_export_to_dash_writes_stdout(winml, tmp_path):
    store = tmp_path / "s.db"
    with open_store(store) as s:
        s.write_json_record(make_cell(hex_id("r", 0)))
    plain = winml("results", "export", "--format", "csv", "--store", store, cwd=tmp_path)
    dash = winml("results", "export", "--format", "csv", "--store", store, "-o", "-", cwd=tmp_path)
    assert plain.returncode == dash.returncode == 0, dash.stderr
    assert dash.stdout == plain.stdout and "config" in dash.stdout
    assert "wrote" not in dash.stderr and not (tmp_path / "-").exists()


@pytest.mark.parametrize(
    "command, flag",
    [
        (("dashboard", "--store", "s.db"), "-o"),
        (("tune", TINY_FLAT, "--no-store"), "--emit"),
        (("bundle", "synth"), "-o"),
        (("bundle", "from-gguf", "model.gguf"), "-o"),
    ],
)
def test_a_dash_where_a_folder_is_written_is_refused(winml, tmp_path, command, flag):
    """`winml dashboard -o -` wrote its site into a folder named '-' (exit 0); a folder output takes
    no '-': standard output holds one stream."""
    ran = winml(*command, flag, "-", cwd=tmp_path)
    err = " ".join(ran.stderr.split())
    assert ran.returncode == 2, err
    assert err.startswith(f"error: {flag} -: this writes a folder, which standard output cannot hold"), err
    assert list(tmp_path.iterdir()) == []
