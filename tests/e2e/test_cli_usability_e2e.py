"""The command line as a new user meets it: help at 80 columns, one --format vocabulary, exports
beside -o, run-id prefixes, dashboard files accepted by their consumers' formats, the closing
route summary, and compile on an EP this machine lacks."""

from __future__ import annotations

import csv
import io
import json
import re
from datetime import UTC, datetime

import jsonschema
import pytest

from tests.conftest import REPO, TINY_FLAT, run_winml
from tests.e2e.test_results_e2e import winml
from tests.results_fakes import GOLDEN_RUN_A, GOLDEN_RUN_B, golden_cells
from winml_perf.results.store import open_store

pytestmark = pytest.mark.e2e

#: Bencher Metric Format, as https://bencher.dev/docs/reference/bencher-metric-format/ defines it:
#: {benchmark_name: {measure_slug: {value, lower_value?, upper_value?}}}.
BMF_SCHEMA = {
    "$schema": "http://json-schema.org/draft-07/schema",
    "type": "object",
    "minProperties": 1,
    "patternProperties": {
        ".+": {
            "type": "object",
            "patternProperties": {
                ".+": {
                    "type": "object",
                    "properties": {
                        "value": {"type": "number"},
                        "lower_value": {"type": "number"},
                        "upper_value": {"type": "number"},
                    },
                    "required": ["value"],
                }
            },
        }
    },
}


def assert_rounded(text: str) -> None:
    """No exponent, and no fraction carrying more than 4 significant digits (15645.49 -> 15645)."""
    assert not re.search(r"\de[+-]\d", text), text
    for number in re.findall(r"\d+\.\d+", text):
        digits = number.replace(".", "").lstrip("0")
        assert len(digits) <= 4, number


def assert_gab_custom(doc) -> None:
    """github-action-benchmark's customBiggerIsBetter / customSmallerIsBetter input: a non-empty
    JSON array of {name: string, unit: string, value: number, range?: string, extra?: string}
    (its extractor rejects an empty array: "No benchmark result was found")."""
    assert isinstance(doc, list) and doc, "no benchmark result"
    for entry in doc:
        assert set(entry) <= {"name", "unit", "value", "range", "extra"}, entry
        assert isinstance(entry["name"], str) and entry["name"]
        assert isinstance(entry["unit"], str) and entry["unit"]
        assert isinstance(entry["value"], (int, float)) and not isinstance(entry["value"], bool)
        for optional in ("range", "extra"):
            assert optional not in entry or isinstance(entry[optional], str)


@pytest.fixture(scope="module")
def store_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("usability") / "winml-perf.db"
    with open_store(path) as store:
        store.write_json_records(golden_cells())
    return path


# -- help -----------------------------------------------------------------------------------------
def test_perf_help_fits_80_columns_in_panels_without_type_placeholders():
    r = run_winml("perf", "--help", env={"COLUMNS": "80", "TERMINAL_WIDTH": "80", "NO_COLOR": "1"})
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert not [line for line in lines if "…" in line]  # nothing cut
    assert not re.search(r"<(bool|str|int|float|path|list\[str\])>", r.stdout)
    for panel in ("Routing", "Workload", "Measurement", "Output", "Plain ONNX models"):
        assert f"─ {panel} " in r.stdout
    for syntax in (
        "ep=NAME;stages=A,B",
        "device=CLASS",
        "FIRST-LAST*FACTOR",
        "128-1024*2 = 128,256,512,1024",
        "Examples",
    ):
        assert syntax in r.stdout
    assert "--export-csv" in r.stdout and "--export-markdown" in r.stdout


# -- perf: formats, exports, sweeps, summary --------------------------------------------------------
def test_perf_formats_exports_merged_sweeps_and_the_closing_summary(tmp_path, bundle_copy):
    bundle = bundle_copy(TINY_FLAT)  # the forced route derives under the bundle, not under bundles/
    files = {f: tmp_path / f"run.{f}" for f in ("json", "jsonl", "csv", "md")}
    r = run_winml(
        "perf",
        bundle,
        "--route",
        "config",
        "--route",
        "ep=qnn",
        "--prompt-tokens",
        "4",
        "--prompt-tokens",
        "8",
        "--max-new-tokens",
        "3",
        "--invocations",
        "1",
        "--iterations",
        "6",
        "--no-store",
        "--format",
        "jsonl",
        "-o",
        tmp_path / "o.json",
        "--export-json",
        files["json"],
        "--export-jsonl",
        files["jsonl"],
        "--export-csv",
        files["csv"],
        "--export-markdown",
        files["md"],
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    cells = [json.loads(line) for line in r.stdout.splitlines()]  # stdout is only the JSONL
    assert sorted({(c["route"]["label"], c["shape"]["prompt_tokens"]) for c in cells}) == [
        ("config", 4),
        ("config", 8),
        ("ep=qnn", 4),
        ("ep=qnn", 8),
    ]  # both --prompt-tokens ran
    record = json.loads(files["json"].read_text())
    assert record == json.loads((tmp_path / "o.json").read_text()) and len(record["cells"]) == 4
    assert [json.loads(x)["cell_key"] for x in files["jsonl"].read_text().splitlines()] == [
        c["cell_key"] for c in cells
    ]
    table = list(csv.DictReader(io.StringIO(files["csv"].read_text())))
    assert len(table) == 4 and float(table[0]["decode_tokens_per_s"]) > 0  # metric names, as the store
    md = files["md"].read_text()
    assert md.startswith("| route") and len(md.splitlines()) == 6
    assert_rounded(md)  # rounded for people
    # the closing summary (stderr: stdout is machine-readable): per metric, each route against config
    assert "summary: routes against config" in r.stderr
    assert re.search(
        r"ep=qnn \(emulated\) decode ran \d+\.\d\d( ± \d+\.\d\d)? times (faster than|slower than|as fast as) config "
        r"\((95% CI \+\d+\.\d\d/−\d+\.\d\d; )?p4 n3, 6 rounds\)",
        r.stderr,
    ), r.stderr
    assert "  decode_tokens_per_s:" in r.stderr and "  ttft_ms:" in r.stderr


def test_perf_table_ends_with_the_summary_and_bad_exports_fail_before_measuring(tmp_path, bundle_copy):
    r = run_winml(
        "perf",
        bundle_copy(TINY_FLAT),
        "--route",
        "config",
        "--route",
        "ep=qnn",
        "--max-new-tokens",
        "2",
        "--prompt-tokens",
        "4",
        "--invocations",
        "1",
        "--iterations",
        "3",
        "--no-store",
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    tail = r.stdout[r.stdout.index("summary: routes against config") :]
    assert (
        "ep=qnn (emulated) decode: " in tail and "(p4 n2, 3 rounds)" in tail
    )  # 3 rounds: the point ratio, no interval
    assert "no interval or verdict below 5 paired rounds" in tail and "±" not in tail and "/−" not in tail
    same = tmp_path / "x.json"
    r = run_winml("perf", TINY_FLAT, "--no-store", "--export-json", same, "-o", same, cwd=tmp_path)
    assert r.returncode == 2 and "give each export its own file" in r.stderr and not same.exists()
    r = run_winml("perf", TINY_FLAT, "--no-store", "--export-csv", tmp_path, cwd=tmp_path)
    assert r.returncode == 2 and "--export-csv" in r.stderr and "is a folder" in r.stderr
    r = run_winml("perf", TINY_FLAT, "--no-store", "--format", "yaml", cwd=tmp_path)
    assert r.returncode == 2 and "jsonl" in r.stderr


# -- run ids and exports -------------------------------------------------------------------------
def test_exports_of_an_8_character_run_id_are_accepted_by_their_dashboards(store_path, tmp_path):
    short = GOLDEN_RUN_A[:8]
    listed = winml("results", "list", "--store", store_path)
    assert short in listed.stdout and GOLDEN_RUN_A not in listed.stdout  # what a user copies
    for direction in ("bigger", "smaller"):
        out = tmp_path / f"{direction}.json"
        r = winml("results", "export", "--run", short, "--format", f"gab-{direction}", "-o", out, "--store", store_path)
        assert r.returncode == 0, r.stderr
        doc = json.loads(out.read_text())
        assert_gab_custom(doc)
        assert {e["unit"] for e in doc} <= ({"tokens/s"} if direction == "bigger" else {"ms", "bytes"})
        assert all(f"run: {GOLDEN_RUN_A}" in e["extra"] for e in doc)
    bmf = winml("results", "export", "--run", short, "--format", "bmf", "--store", store_path)
    assert bmf.returncode == 0, bmf.stderr
    jsonschema.validate(bmf.json(), BMF_SCHEMA)
    assert set(bmf.json()) == {"tiny-qwen2 config p16 n8", "tiny-qwen2 ep=cpu p16 n8", "tiny-qwen2 ep=webgpu p16 n8"}


def test_unknown_or_empty_selections_are_exit_2_and_write_nothing(store_path, tmp_path):
    out = tmp_path / "gab.json"
    r = winml("results", "export", "--run", "ffff", "--format", "gab-bigger", "-o", out, "--store", store_path)
    assert r.returncode == 2 and "no run 'ffff'" in r.stderr and GOLDEN_RUN_A in r.stderr and GOLDEN_RUN_B in r.stderr
    r = winml(
        "results", "export", "--bundle", "no-such-bundle", "--format", "gab-bigger", "-o", out, "--store", store_path
    )
    assert r.returncode == 2 and "selects no records" in r.stderr
    r = winml("results", "export", "--status", "failed", "--format", "gab-bigger", "-o", out, "--store", store_path)
    assert r.returncode == 2 and "nothing to export" in r.stderr
    r = winml("results", "export", "--bundle", "no-such-bundle", "--format", "csv", "--store", store_path)
    assert r.returncode == 2 and r.stdout == ""
    assert not out.exists()
    r = winml("results", "list", "--run", "zz", "--store", store_path)
    assert r.returncode == 2 and "no run 'zz'" in r.stderr


def test_run_prefixes_work_in_show_and_compare(store_path):
    shown = winml("results", "show", GOLDEN_RUN_A[:8], "--store", store_path)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.count(f"run {GOLDEN_RUN_A}") == 3  # every record of the run
    one = winml("results", "show", GOLDEN_RUN_B[:8], "--store", store_path, "--format", "jsonl")
    assert [json.loads(x)["run_id"] for x in one.stdout.splitlines()] == [GOLDEN_RUN_B] * 2
    routes = winml("compare", "routes", "--run", GOLDEN_RUN_A[:8], "--store", store_path, "--format", "markdown")
    assert routes.returncode == 0, routes.stderr
    assert routes.stdout.startswith("| bundle") and "ep=webgpu" in routes.stdout
    r = winml("compare", "routes", "--run", "ffff", "--store", store_path)
    assert r.returncode == 2 and GOLDEN_RUN_A in r.stderr


def test_compare_runs_rounds_numbers_and_heads_every_column(store_path):
    r = winml(
        "compare",
        "runs",
        "--store",
        store_path,
        "--baseline",
        GOLDEN_RUN_A[:8],
        "--candidate",
        GOLDEN_RUN_B[:8],
        "--route",
        "config",
    )
    assert r.returncode == 0, r.stderr
    head, rule, *rows = r.stdout.splitlines()
    assert head.split()[-1] == "gate"  # the gate's verdict per row (issue 28: was "regression")
    for m in re.finditer(r"-+", rule):  # every column has a header above it
        assert head[m.start() : m.end()].strip(), (m.start(), head)
    assert rows
    assert_rounded(r.stdout.replace(GOLDEN_RUN_A, "").replace(GOLDEN_RUN_B, ""))
    for fmt in ("json", "jsonl", "csv", "markdown"):
        assert (
            winml(
                "compare",
                "runs",
                "--store",
                store_path,
                "--baseline",
                GOLDEN_RUN_A[:8],
                "--candidate",
                GOLDEN_RUN_B[:8],
                "--route",
                "config",
                "--format",
                fmt,
            ).returncode
            == 0
        )


@pytest.mark.parametrize("command", [("results", "list"), ("devices",)])
def test_listing_commands_take_the_whole_vocabulary(store_path, command):
    args = [*command, "--store", store_path] if command[0] == "results" else list(command)
    for fmt in ("table", "json", "jsonl", "csv", "markdown"):
        r = winml(*args, "--format", fmt)
        assert r.returncode == 0, (fmt, r.stderr)
        if fmt == "jsonl":
            assert all(isinstance(json.loads(x), dict) for x in r.stdout.splitlines())


def test_load_returns_utc_datetimes(store_path):
    from winml_perf import results

    df = results.load(store_path)
    first = df["created_utc"].iloc[0].to_pydatetime()
    assert first == datetime(2025, 1, 1, 2, 0, tzinfo=UTC) and first.utcoffset().total_seconds() == 0
    samples = results.load_samples(store_path)
    assert samples["created_utc"].iloc[0].tzinfo is not None
    assert results.load(store_path, bundle="none").empty


# -- compile on an EP this machine lacks ----------------------------------------------------------
def test_compile_on_an_ep_without_a_device_here_is_exit_2_before_writing(bundle_copy):
    from winml_perf.ep.devices import list_ep_devices

    if any(d.ep_name == "OpenVINOExecutionProvider" for d in list_ep_devices()):
        pytest.skip("this machine has OpenVINO")
    bundle = bundle_copy(TINY_FLAT)
    r = run_winml("bundle", "prepare", bundle, "--ep", "openvino", "--compile")
    assert r.returncode == 2 and "OpenVINOExecutionProvider is not available here" in r.stderr
    assert not (bundle / "_compiled").exists()
    r = run_winml("bundle", "prepare", bundle, "--ep", "openvino")  # preparing for another machine stays allowed
    assert r.returncode == 0, r.stderr
    assert any(p.name.startswith("openvino") for p in (bundle / "_compiled").iterdir())


# -- small truths ---------------------------------------------------------------------------------
def test_the_readme_and_the_synth_error_name_the_same_install_command():
    readme = (REPO / "README.md").read_text()
    from winml_perf.support.optional import missing_module_error  # the one message of a missing extra

    error = str(missing_module_error(ModuleNotFoundError("No module named 'torch'", name="torch")))
    command = re.search(r"pip install -e '\.\[synth\]'", error)
    assert command and command.group(0) in readme and "winml-perf[synth]" not in error
    assert ".ci/run" in readme and "scripts/ci-postgres.sh" in readme and "scripts/ci-chromium.sh" in readme


def test_nightly_ratios_are_written_as_the_tool_writes_them():
    """docs/nightly.md quotes compare routes' sentences in the form compare/routes.py prints them:
    hyperfine's '1.00 ± 0.01 times as fast as' when symmetric, else the ratio alone and the
    interval's two sides beside the shape '(95% CI +0.07/−0.05; p128 n128, 20 rounds)'."""
    nightly = (REPO / "docs/nightly.md").read_text()
    symmetric = re.findall(
        r"ran \d+\.\d\d ± \d+\.\d\d times (?:faster than|slower than|as fast as) \S+ \(p\d+ n\d+, ", nightly
    )
    asymmetric = re.findall(
        r"ran \d+\.\d\d times (?:faster|slower) than \S+ \(95% CI \+\d+\.\d\d/−\d+\.\d\d; p\d+ n\d+, ", nightly
    )
    assert symmetric and asymmetric  # both forms are shown
    assert not re.search(r"ran \d+\.\d\d \S+(?: \S+)? ×", nightly)  # the form of an older version
