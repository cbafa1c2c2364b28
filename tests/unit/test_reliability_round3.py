"""Issue 36, each class at its root: one redaction, one safe-write layer, one cache reader, one energy
plausibility rule, one terminal sanitiser and one markdown escaper, the EP's value sets, bounds."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest

from winml_perf.power.accounting import NOT_MEASURED, PhaseReading, cell_energy
from winml_perf.power.meters import RaplMeter
from winml_perf.support import safe_write, secrets
from winml_perf.support.cache_file import read_cache
from winml_perf.support.document_text import markdown_cell, markdown_table
from winml_perf.support.errors import UsageError
from winml_perf.support.json_input import parse_json_text
from winml_perf.support.stdio import GuardedText
from winml_perf.support.terminal_text import clean

SECRET = "Zq7-pa55"


# -- 1. one redaction for every credential-bearing form ------------------------------------------
@pytest.mark.parametrize(
    "location",
    [
        f"postgresql://u:{SECRET}/x@h/db",  # a '/' in the password
        f"postgresql://u:a b{SECRET}@h/db",  # a space
        f"postgresql://u:{SECRET}@@h/db",  # a raw '@'
        f"postgresql://u@h/db?password={SECRET}",
        f"postgresql://u@h/db?sslmode=require&sslpassword={SECRET}",
        f"postgresql://u@h/db?sslkey=/home/u/{SECRET}.key",
        f"postgresql://u@h/db?passfile=/home/u/{SECRET}",
        f"host=h user=u password={SECRET} dbname=d",
        f"host=h password = '{SECRET} with space' dbname=d",
        f"--store=postgresql://u:{SECRET}/x@h/db",
    ],
)
def test_every_credential_form_is_hidden_as_an_argument_and_in_text(location):
    assert SECRET not in secrets.mask_arg(location)
    secrets.remember(location)
    assert SECRET not in secrets.mask(f"cannot open results store {location}: refused")
    assert SECRET not in secrets.mask(json.dumps({"argv": ["--store", location]}))


def test_a_remembered_password_is_hidden_in_any_sentence_and_encoding():
    secrets.remember(f"postgresql://u:{SECRET} x@h/db")
    from urllib.parse import quote

    for text in (f"pw {SECRET} x here", quote(f"{SECRET} x", safe=""), json.dumps(f"{SECRET} x")):
        assert SECRET not in secrets.mask(text), text


def test_masking_keeps_json_valid_and_plain_text_alone():
    doc = json.dumps({"argv": ["--store", "postgresql://u:p@h/db", "-o", "me@x"], "n": 1})
    assert json.loads(secrets.mask(doc))["argv"][-1] == "me@x"
    for text in ("results/winml-perf.db", "postgresql://u@h:5432/db", "max_new_tokens=4", "a=b"):
        assert secrets.mask(text) == text


def test_a_dsn_given_as_store_is_refused_without_echoing_the_password(tmp_path):
    from winml_perf.results.location import resolve_location
    from winml_perf.support.errors import StoreError

    with pytest.raises(StoreError) as err:
        resolve_location(f"host=h password={SECRET} dbname=d")
    assert SECRET not in str(err.value) and "connection string" in str(err.value)


def test_a_store_display_hides_query_credentials():
    from winml_perf.results.location import resolve_location

    loc = resolve_location(f"postgresql://u@h/db?sslpassword={SECRET}&password={SECRET}")
    assert SECRET not in loc.display and "sslpassword=***" in loc.display


# -- 4. one terminal sanitiser, one escaper per document format ----------------------------------
def test_the_guarded_stream_masks_and_cleans_every_write(capsys):
    import sys

    secrets.remember(f"postgresql://u:{SECRET}@h/db")
    guard = GuardedText(sys.stdout)
    guard.write(f"\x1b]0;title\x07\x1b[2J{SECRET}\x9b\u202e\ud800 ok\n")
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out and "\x9b" not in out and SECRET not in out
    assert "\\u001b]0;title\\u0007" in out and "\\ud800" in out and out.endswith("ok\n")
    with pytest.raises(AttributeError):
        guard.buffer  # noqa: B018  (click must not write bytes past the guard)


def test_clean_keeps_newlines_and_tabs_and_escapes_the_rest():
    assert clean("a\tb\nc") == "a\tb\nc"
    assert clean("a\rb\x00") == "a\\u000db\\u0000"


def test_a_name_with_c1_or_bidi_characters_keeps_json_output_valid(capsys):
    import sys

    doc = {"bundle": "a\x9b[2Jb\u202e\x7f"}
    GuardedText(sys.stdout).write(json.dumps(doc, ensure_ascii=False))
    out = capsys.readouterr().out
    assert "\x9b" not in out and json.loads(out) == doc


def test_a_markdown_cell_cannot_add_columns_rows_or_html():
    name = 'x|y\nz <img src=x onerror="alert(1)">'
    cell = markdown_cell(name)
    assert "\n" not in cell and "<img" not in cell and "\\|" in cell
    table = markdown_table(["bundle", "n"], [[name, 1]])
    lines = table.splitlines()
    assert len(lines) == 3  # header, rule, one row
    unescaped_pipes = [line.replace("\\|", "").count("|") for line in lines]
    assert len(set(unescaped_pipes)) == 1  # every line has the same columns


# -- 2. one safe-write layer -----------------------------------------------------------------------
def test_a_link_below_the_chosen_folder_is_refused_naming_it(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    site = tmp_path / "site"
    site.mkdir()
    (site / "pages").symlink_to(outside)
    with pytest.raises(UsageError, match="pages is a symbolic link") as err:
        safe_write.write_text(site / "pages" / "a.html", "x", root=site)
    assert err.value.exit_code == 2 and not list(outside.iterdir())
    (site / "index.html").symlink_to(outside / "victim")
    with pytest.raises(UsageError, match="index.html is a symbolic link"):
        safe_write.write_text(site / "index.html", "x", root=site)
    assert not (outside / "victim").exists()


def test_temporary_names_are_unique_per_call_and_nothing_is_left(tmp_path):
    target = tmp_path / "a.html"
    assert safe_write.temp_name(target) != safe_write.temp_name(target)
    assert str(os.getpid()) in safe_write.temp_name(target).name
    safe_write.write_text(target, "whole", root=tmp_path)
    assert target.read_text() == "whole" and [p.name for p in tmp_path.iterdir()] == ["a.html"]


def test_emit_follows_a_linked_sub_folder_and_verifies_the_bundle(tmp_path):
    from winml_perf.tune.emit import emit_bundle

    source, elsewhere = tmp_path / "bundle", tmp_path / "elsewhere"
    source.mkdir()
    elsewhere.mkdir()
    (elsewhere / "model.onnx").write_bytes(b"m" * 100)
    (source / "weights").symlink_to(elsewhere)
    (source / "genai_config.json").write_text(json.dumps({"model": {"decoder": {"filename": "weights/model.onnx"}}}))
    written = emit_bundle(source, tmp_path / "out", {"route": "config"})
    assert "weights/model.onnx" in written and (tmp_path / "out" / "weights" / "model.onnx").read_bytes() == b"m" * 100
    assert not (tmp_path / "out" / "weights").is_symlink()


def test_an_emitted_bundle_missing_a_named_model_is_refused_and_removed(tmp_path):
    from winml_perf.tune.emit import emit_bundle

    source = tmp_path / "bundle"
    source.mkdir()
    (source / "genai_config.json").write_text(json.dumps({"model": {"decoder": {"filename": "absent.onnx"}}}))
    with pytest.raises(UsageError, match="incomplete.*absent.onnx"):
        emit_bundle(source, tmp_path / "out", {})
    assert not (tmp_path / "out").exists()


# -- 3. damaged caches, impossible readings, malformed imports -----------------------------------
@pytest.mark.parametrize(
    "text",
    [
        '{"machine": "m", "bandwidth_bytes_per_s": Infinity}',
        "[1, 2]",
        '{"machine": "m", "bandwidth_bytes_per_s": "fast"}',
        '{"machine": "m", "bandwidth_bytes_per_s": -5}',
        "{not json",
    ],
)
def test_a_damaged_cache_is_none_with_a_warning(tmp_path, capsys, text):
    from winml_perf.support.cache_file import positive_number

    path = tmp_path / "bandwidth.json"
    path.write_text(text)
    assert read_cache(path, lambda d: positive_number(d.get("bandwidth_bytes_per_s"))) is None
    assert f"cache file {path} is damaged" in capsys.readouterr().err


@pytest.mark.parametrize(
    "text",
    [
        '{"machine": "M", "figures": {"262144": {"bandwidth_bytes_per_s": Infinity}}}',
        '{"machine": "M", "figures": [1]}',
        '{"machine": "M", "figures": {"262144": "x"}}',
        "[]",
    ],
)
def test_a_damaged_working_set_cache_is_measured_again_and_rewritten(tmp_path, monkeypatch, capsys, text):
    from winml_perf.record import device_bandwidth as db

    monkeypatch.setenv("WINML_PERF_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(db, "machine_key", lambda: "M")
    (tmp_path / db.WORKING_SET_CACHE_FILE).write_text(text)
    assert db._cached_working_set(262144) is None
    db._store_working_set(262144, {"bandwidth_bytes_per_s": 1e10})
    assert db._cached_working_set(262144) == {"bandwidth_bytes_per_s": 1e10}
    assert "is damaged" in capsys.readouterr().err


def test_a_damaged_host_bandwidth_cache_is_measured_again(tmp_path, monkeypatch):
    from winml_perf.record import roofline

    monkeypatch.setenv("WINML_PERF_CACHE_DIR", str(tmp_path))
    (tmp_path / roofline.CACHE_FILE).write_text('{"machine": "x", "bandwidth_bytes_per_s": Infinity}')
    got = roofline.cached_bandwidth(measure=lambda: {"bandwidth_bytes_per_s": 2e10})
    assert got["cache"] == "miss" and got["bandwidth_bytes_per_s"] == 2e10
    assert json.loads((tmp_path / roofline.CACHE_FILE).read_text())["bandwidth_bytes_per_s"] == 2e10


METER = {"covers": "CPU package 0", "update_period_s": 0.001, "resolution_j": 1e-6}


def _readings(joules: float) -> list[PhaseReading]:
    return [PhaseReading("prefill", joules, 0.05, 8, i) for i in range(3)] + [
        PhaseReading("decode", joules, 0.05, 3, i) for i in range(3)
    ]


@pytest.mark.parametrize(
    ("readings", "idle", "why"),
    [
        (_readings(0.0), {"idle_w": 0.0, "window_s": 0.5}, "frozen"),
        (_readings(-0.2), {"idle_w": -4.3, "window_s": 0.5}, "backwards"),
        (_readings(-0.2), {"idle_w": 3.0, "window_s": 0.5}, "backwards"),
        (_readings(0.5), {"idle_w": 0.0, "window_s": 0.5}, "frozen"),
    ],
)
def test_an_impossible_energy_reading_is_not_measured_with_the_reason(readings, idle, why):
    section = cell_energy(METER, readings, idle)
    assert section["status"] == NOT_MEASURED and why in section["reason"]
    assert section.get("prefill_j_per_token") is None


def test_a_possible_energy_reading_is_measured():
    section = cell_energy(METER, _readings(0.5), {"idle_w": 3.0, "window_s": 0.5})
    assert section["status"] == "measured" and section["prefill_j_per_token"] > 0


def test_a_rapl_counter_running_backwards_is_not_a_wrap(tmp_path):
    zone = tmp_path / "intel-rapl:0"
    zone.mkdir()
    (zone / "name").write_text("package-0")
    (zone / "max_energy_range_uj").write_text(str(2**32))
    meter = RaplMeter(zone)
    (zone / "energy_uj").write_text("5000000")
    first = meter.read()
    (zone / "energy_uj").write_text("4000000")  # 1 J backwards: not a wrap
    assert meter.read() < first
    (zone / "energy_uj").write_text(str(2**32 - 10))
    high = meter.read()
    (zone / "energy_uj").write_text("10")  # a real wrap: the counter fell by most of its range
    assert meter.read() > high


def test_a_lone_surrogate_in_a_json_input_is_exit_2_naming_the_key():
    with pytest.raises(UsageError, match="'bundle' holds a lone UTF-16 surrogate"):
        parse_json_text('{"kind": "cell", "bundle": "a\\ud800b"}', "r.json", UsageError)
    with pytest.raises(UsageError, match="'argv'"):
        parse_json_text('{"argv": ["x", "\\udfff"]}', "r.json", UsageError)
    assert parse_json_text('{"a": "\\ud83d\\ude00"}', "r.json") == {"a": "\U0001f600"}  # a whole pair is text


@pytest.mark.parametrize(
    ("doc", "says"),
    [
        ({"format": 1, "options": {}, "files": ["a"]}, "'files' is not a JSON dict"),
        ({"format": 1, "options": {}, "files": {}, "jobs": [{"ep": 3}]}, "jobs[0] has no string 'ep'"),
        ({"format": 1, "options": {"asked": [1]}, "files": {}}, "options.asked"),
        ({"format": 1, "settings": {"provider_options": {}}, "files": {}}, "settings.ep"),
        ({"format": 1, "options": {}, "files": {"../../etc/passwd": "x"}}, "points outside the export folder"),
        ({"format": 1, "options": {}, "files": {"/etc/passwd": "x"}}, "points outside the export folder"),
        ({"format": 1, "options": {}, "files": {"gone.bin": "x"}}, "is not in"),
    ],
)
def test_a_malformed_export_is_exit_2_naming_the_key(tmp_path, doc, says):
    from winml_perf.bundle.epcontext.export import read_export

    (tmp_path / "export.json").write_text(json.dumps(doc))
    with pytest.raises(UsageError, match=says.replace("[", r"\[").replace("]", r"\]")) as err:
        read_export(tmp_path)
    assert err.value.exit_code == 2


# -- 5. values the EP takes, bounded sizes and durations -----------------------------------------
@pytest.mark.parametrize(
    "option",
    [
        {"soc_model": "abc"},
        {"backend_type": "nosuch"},
        {"htp_performance_mode": "bogus"},
        {"htp_arch": "99"},
        {"enable_htp_fp16_precision": "yes"},
        {"htp_performance_mode": "burst|<x"},
    ],
)
def test_a_qnn_value_outside_the_eps_facts_is_exit_2(option):
    from winml_perf.ep.effective import effective_options

    with pytest.raises(UsageError) as err:
        effective_options("QNNExecutionProvider", "npu", option, version=lambda ep: "2.7.0", names=lambda ep: ())
    key = next(iter(option))
    assert key in str(err.value) and err.value.exit_code == 2


def test_known_qnn_values_pass():
    from winml_perf.ep.effective import effective_options

    asked = {"soc_model": "60", "backend_type": "htp", "htp_performance_mode": "burst", "htp_arch": "73"}
    done = effective_options("QNNExecutionProvider", "npu", asked, version=lambda ep: "2.7.0", names=lambda ep: ())
    assert done.keys_checked_against == "onnxruntime-qnn 2.7.0"


@pytest.mark.parametrize("text", ["99999999999999999999m", "9" * 400, "604801s"])
def test_a_duration_past_a_week_is_exit_2(text):
    from winml_perf.commands.duration_flag import parse_duration

    with pytest.raises(UsageError, match="--duration .* out of range"):
        parse_duration(text)


@pytest.mark.parametrize("text", ["9" * 400 + "s", "99999999m", "9" * 400 + "tok"])
def test_a_budget_of_400_digits_is_exit_2_not_inf(text):
    from winml_perf.tune.goal import parse_budget

    with pytest.raises(UsageError, match="--budget.*out of range"):
        parse_budget(text)
    assert math.isfinite(parse_budget("5m").seconds or 0)


def test_a_written_cache_is_valid_json_without_infinity(tmp_path):
    from winml_perf.support.cache_file import write_cache

    write_cache(tmp_path / "c.json", {"bandwidth_bytes_per_s": float("inf")})  # refused: only a warning
    assert not (tmp_path / "c.json").exists()
    write_cache(tmp_path / "c.json", {"bandwidth_bytes_per_s": 1.0})
    assert json.loads(Path(tmp_path / "c.json").read_text()) == {"bandwidth_bytes_per_s": 1.0}


def test_a_damaged_gpu_bandwidth_cache_is_measured_again(tmp_path, monkeypatch, capsys):
    """A door beside the host probes: gpu_bandwidth.json with Infinity."""
    from winml_perf.record import device_bandwidth as db

    monkeypatch.setenv("WINML_PERF_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(db, "machine_key", lambda: "M")
    (tmp_path / db.GPU_CACHE_FILE).write_text('{"machine": "M", "bandwidth_bytes_per_s": Infinity}')
    peak = {"peak_bytes_per_s": 1e12, "name": "gpu", "memory_clock_mhz": 1, "bus_width_bits": 8}
    got = db.nvidia_bandwidth(peak=lambda: peak, copy=lambda: None)
    assert got["cache"] == "miss" and got["bandwidth_bytes_per_s"] == 1e12
    assert "is damaged" in capsys.readouterr().err
    assert db.nvidia_bandwidth(peak=lambda: None, copy=lambda: None)["cache"] == "hit"


def test_a_model_export_naming_an_output_outside_its_folder_is_exit_2(tmp_path):
    from winml_perf.bundle.epcontext.export import read_export

    doc = {"format": 1, "kind": "onnx", "settings": {"ep": "QNNExecutionProvider"}, "files": {}, "output": "../../x"}
    (tmp_path / "export.json").write_text(json.dumps(doc))
    with pytest.raises(UsageError, match="points outside the export folder"):
        read_export(tmp_path)


def test_a_sustained_batch_whose_counter_ran_backwards_has_no_energy():
    from types import SimpleNamespace

    from winml_perf.measure.energy.cell import timeline_point

    reply = SimpleNamespace(samples=[], wall_s=1.0, energy_marks=[[(0.0, 10.0), (0.5, 9.0), (1.0, 8.0)]])
    point = timeline_point(0.0, reply, None)
    assert point["energy_j"] is None and "backwards" in point["energy_not_measured"]
