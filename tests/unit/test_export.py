"""Exports of hand-made records: golden CSV, JSON, markdown, Bencher BMF and github-action-benchmark
files, plus the rules each format follows."""

from __future__ import annotations

import io
import json

import pandas as pd
import pytest

from tests.results_fakes import GOLDEN_RUN_A, GOLDEN_RUN_B, assert_golden, golden_cells, make_cell
from winml_perf.model.metrics import bigger_is_better
from winml_perf.model.metrics import unit as metric_unit
from winml_perf.publish.exporters import export
from winml_perf.publish.exporters._rows import latest_per_series
from winml_perf.publish.exporters.gab import gab_entries
from winml_perf.results import load
from winml_perf.results.store import open_store
from winml_perf.support.errors import UsageError


@pytest.fixture
def golden_df(tmp_path):
    with open_store(tmp_path / "golden.db") as store:
        store.write_json_records(golden_cells())
        yield load(store)


@pytest.mark.parametrize(
    "fmt, name",
    [
        ("csv", "export.csv"),
        ("json", "export.json"),
        ("markdown", "export.md"),
        ("bmf", "export.bmf.json"),
    ],
)
def test_exports_match_golden_files(golden_df, fmt, name):
    assert_golden(name, export(golden_df, fmt))


@pytest.mark.parametrize("direction", ["bigger", "smaller"])
def test_gab_exports_match_golden_files(golden_df, direction):
    assert_golden(f"export.gab.{direction}.json", export(golden_df, "gab", direction=direction))


def test_csv_and_json_hold_every_record_and_round_trip(golden_df):
    df = pd.read_csv(io.StringIO(export(golden_df, "csv")))
    assert len(df) == 5 and list(df["route"]) == ["config", "ep=cpu", "ep=webgpu", "config", "ep=webgpu"]
    assert df["decode_tokens_per_s"].iloc[0] == pytest.approx(golden_df["decode_tokens_per_s"].iloc[0])
    rows = json.loads(export(golden_df, "json"))
    assert [r["run_id"] for r in rows] == [GOLDEN_RUN_A] * 3 + [GOLDEN_RUN_B] * 2
    assert rows[4]["status"] == "failed" and rows[4]["decode_tokens_per_s"] is None  # NaN -> null


def test_bmf_takes_the_latest_ok_record_per_series_with_ci_bounds(golden_df):
    bmf = json.loads(export(golden_df, "bmf"))
    assert sorted(bmf) == ["tiny-qwen2 config p16 n8", "tiny-qwen2 ep=cpu p16 n8", "tiny-qwen2 ep=webgpu p16 n8"]
    config = bmf["tiny-qwen2 config p16 n8"]["decode_tokens_per_s"]
    latest = golden_df[(golden_df["route"] == "config")].iloc[-1]  # run B, not run A
    assert config["value"] == pytest.approx(latest["decode_tokens_per_s"])
    assert config["lower_value"] <= config["value"] <= config["upper_value"]
    assert (
        "peak_rss_bytes" in bmf["tiny-qwen2 config p16 n8"]
        and "lower_value" not in bmf["tiny-qwen2 config p16 n8"]["peak_rss_bytes"]
    )
    # the failed ep=webgpu cell of run B does not replace run A's good one
    assert bmf["tiny-qwen2 ep=webgpu p16 n8"]["decode_tokens_per_s"]["value"] > 800


def test_gab_splits_metrics_by_direction_from_their_names(golden_df):
    bigger, smaller = gab_entries(golden_df, "bigger"), gab_entries(golden_df, "smaller")
    assert bigger and smaller
    assert all(e["name"].endswith(("_per_s",)) for e in bigger)
    assert all(e["name"].endswith(("_ms", "_bytes")) for e in smaller)
    decode = next(e for e in bigger if e["name"] == "tiny-qwen2 ep=webgpu p16 n8 decode_tokens_per_s")
    assert decode["unit"] == "tokens/s" and decode["range"].startswith("± ") and "testbed: tb-linux" in decode["extra"]
    with pytest.raises(UsageError, match="--direction"):
        export(golden_df, "gab")


def test_gab_names_no_commit_for_a_record_made_outside_git(golden_df):
    golden_df["git_commit"] = None
    extras = [e["extra"] for e in gab_entries(golden_df, "bigger")]
    assert extras and not any("commit" in x for x in extras)


def test_directions_and_units_from_metric_names():
    assert (
        bigger_is_better("decode_tokens_per_s")
        and bigger_is_better("inferences_per_s")
        and bigger_is_better("roofline_fraction")
    )
    assert not bigger_is_better("ttft_ms") and not bigger_is_better("peak_rss_bytes") and not bigger_is_better("itl_ms")
    assert (
        metric_unit("prompt_tokens_per_s") == "tokens/s"
        and metric_unit("e2e_ms") == "ms"
        and metric_unit("peak_rss_bytes") == "bytes"
    )


def test_dashboard_formats_refuse_a_mix_of_testbeds(tmp_path):
    with open_store(tmp_path / "s.db") as store:
        store.write_json_record(make_cell("c" * 32, testbed="tb-a"))
        store.write_json_record(make_cell("d" * 32, testbed="tb-b"))
        df = load(store)
    with pytest.raises(UsageError, match="--testbed"):
        export(df, "bmf")
    assert len(latest_per_series(df[df["testbed_id"] == "tb-a"])) == 1


def test_unknown_format_and_an_empty_store(tmp_path):
    with open_store(tmp_path / "e.db") as store:
        df = load(store)
    assert len(df) == 0 and "decode_tokens_per_s" not in df.columns
    assert export(df, "json") == "[]\n" and json.loads(export(df, "bmf")) == {}
    with pytest.raises(UsageError, match="--format 'xml'"):
        export(df, "xml")


def test_the_exporters_are_discovered_from_their_modules():
    import pkgutil

    from winml_perf.publish import exporters
    from winml_perf.publish.formats import Offer, offered

    modules = {m.name for m in pkgutil.iter_modules(exporters.__path__) if not m.name.startswith("_")}
    assert {"bmf", "csv", "gab", "json", "jsonl", "markdown"} <= modules
    assert {e.write.__module__.rsplit(".", 1)[1] for e in exporters.exporters().values()} == modules  # each registers
    listed = ["json", "jsonl", "csv", "markdown", "bmf", "gab-bigger", "gab-smaller", "gab"]  # the registry's order
    assert [name for name in exporters.exporters() if name in listed] == listed
    assert {"csv", "json", "jsonl", "markdown"} <= set(offered(Offer.RUN_FILE))
    with pytest.raises(ValueError, match="two exporters"):
        exporters.register(exporters.Exporter("csv", lambda df, **_: ""))


def test_perf_export_flags_are_the_run_exporters():
    import typer

    from winml_perf.cli import app
    from winml_perf.publish.formats import Offer, offered

    perf = typer.main.get_command(app).commands["perf"]  # type: ignore[attr-defined]
    flags = {f for p in perf.params for f in p.opts}
    assert {f.removeprefix("--export-") for f in flags if f.startswith("--export-")} == set(offered(Offer.RUN_FILE))
