"""Human numbers (issue 28): every surface a person reads writes a measured value with four
significant digits (support/human_numbers.human: an SI suffix from 10 000 on), never every
integer digit (128983) nor a fixed decimal (28691.7); CSV and JSON keep full precision."""

from __future__ import annotations

import csv
import io
import json
import re

import pytest
from typer.testing import CliRunner

from tests.results_fakes import hex_id, make_cell
from tests.unit.fakes import FAKE_ENV, fake_spec, open_fake_session
from winml_perf.cli import app
from winml_perf.measure.sweep import CellExtras, RunFacts, run_sweep
from winml_perf.model.route import Route
from winml_perf.model.spec import IterationPolicy, RouteSpec, expand_sweep
from winml_perf.publish import exporters
from winml_perf.publish.dashboard import write_dashboard
from winml_perf.publish.render import render_run, run_text
from winml_perf.results import load
from winml_perf.results.store import open_store
from winml_perf.support.human_numbers import fixed, human

#: A suffixed human number: four digits around the point, then k/M/G/T.
SUFFIXED = r"-?(\d\.\d{3}|\d\d\.\d\d|\d{3}\.\d)[kMGT]"
#: Decode steps of ~0.0303 ms: about 33 000 tokens/s, five integer digits.
FAST_STEPS = [0.0303, 0.0299, 0.0310, 0.0297, 0.0305, 0.0301]


@pytest.mark.parametrize(
    "value, text",
    [
        (128983.0, "129.0k"),
        (28691.7, "28.69k"),
        (15645.491656540647, "15.65k"),
        (9999.6, "10.00k"),  # rounded first: four digits, not '10000'
        (9999.4, "9999"),
        (1234.56, "1235"),
        (1.29e6, "1.290M"),
        (2.5e9, "2.500G"),
        (-128983.0, "-129.0k"),
        (123.456, "123.5"),
        (0.0123456, "0.01235"),
        (128983, "128983"),  # an int is a count or an id: whole
    ],
)
def test_four_significant_digits_with_an_si_suffix_from_ten_thousand(value, text):
    assert human(value) == text


def test_the_perf_table_and_its_markdown_write_129_0k_while_csv_keeps_every_digit():
    spec = fake_spec(decode_ms=0.007753)  # 1000 / 0.007753 = 128982 tokens/s
    routes = [RouteSpec("config", spec, route=Route("config", "config", "config"))]
    cells = expand_sweep(routes, [8], [4], iterations=IterationPolicy(iterations=3))
    run = run_sweep(
        cells,
        open_fake_session,
        isolate=False,
        facts=RunFacts(environment=FAKE_ENV, argv=["perf"]),
        extras=CellExtras(roofline=False),
    )
    screen = render_run(run, width=10_000)
    assert "129.0k σ" in screen and "128982" not in screen and "128983" not in screen
    assert "129.0k" in run_text(run, "markdown")
    (row,) = csv.DictReader(io.StringIO(run_text(run, "csv")))
    assert float(row["decode_tokens_per_s"]) == pytest.approx(128982.3, abs=0.5)  # raw, full precision


@pytest.fixture
def fast_store(tmp_path):
    path = tmp_path / "s.db"
    with open_store(path) as store:
        for night in range(2):
            when = f"2025-01-0{night + 1}T02:00:00Z"
            store.write_json_record(make_cell(hex_id("fast", night), step_ms=FAST_STEPS, when=when))
    return path


def test_results_list_and_the_markdown_export_write_suffixed_headlines(fast_store):
    listed = CliRunner().invoke(app, ["results", "list", "--store", str(fast_store)])
    assert listed.exit_code == 0, listed.output
    decode = re.search(rf"({SUFFIXED}) \[({SUFFIXED}), ({SUFFIXED})\]", listed.stdout)
    assert decode and decode.group(1).startswith("33."), listed.stdout
    assert not re.search(r"\b3\d{4}(\.\d+)?\b", listed.stdout)  # neither 33113 nor 33112.6
    with open_store(fast_store, create=False) as store:
        df = load(store)
    markdown = exporters.export(df, "markdown")
    assert re.search(rf"\| 33\.\d\dk \[{SUFFIXED}, {SUFFIXED}\] ", markdown), markdown
    raw = exporters.export(df, "csv")
    assert re.search(r",3\d{4}\.\d+", raw)  # the machine format keeps the digits


def test_compare_runs_table_and_sentence_write_suffixed_medians(fast_store):
    args = ["compare", "runs", "--store", str(fast_store), "--baseline", "previous", "--candidate", "latest"]
    table = CliRunner().invoke(app, [*args, "--metric", "decode_tokens_per_s"])
    assert table.exit_code == 0, table.output
    assert re.search(r"\s33\.\d\dk\s.*\s33\.\d\dk\s", table.stdout), table.stdout
    doc = json.loads(CliRunner().invoke(app, [*args, "--format", "json"]).stdout)
    (change,) = [c for c in doc["changes"] if c["metric"] == "decode_tokens_per_s"]
    assert re.search(r"decode: 33\.\d\dk -> 33\.\d\dk", change["sentence"]), change["sentence"]
    assert change["baseline_median"] > 30_000 and not float(change["baseline_median"]).is_integer()  # raw in JSON


def test_the_dashboard_overview_writes_suffixed_values(fast_store, tmp_path):
    with open_store(fast_store, create=False) as store:
        index = write_dashboard(store, tmp_path / "site").read_text()
    values = re.findall(r'<td class="num">([^<]*) <span', index)
    assert any(re.fullmatch(rf"33\.\d\dk \[{SUFFIXED}, {SUFFIXED}\]", v) for v in values), values


def test_the_progress_line_writes_the_running_median_as_the_table_will():
    from winml_perf.measure.progress import _fmt

    assert _fmt("decode_tokens_per_s", 128983.0) == "129.0k tok/s"


@pytest.mark.parametrize(
    "value, decimals, signed, text",
    [
        (5.372, 1, False, "5.4"),
        (59.94, 1, False, "59.9"),
        (1446.1, 1, False, "1446"),  # the CI that CI caught: five digits at one decimal
        (12345.6, 1, False, "12.35k"),
        (0.04, 2, False, "0.04"),
        (4.13, 1, True, "+4.1"),
        (-9.34, 1, True, "-9.3"),
        (float("nan"), 1, False, ""),
    ],
)
def test_a_percentage_keeps_its_decimals_but_never_more_than_four_digits(value, decimals, signed, text):
    assert fixed(value, decimals, signed=signed) == text


def test_a_run_whose_interval_is_wider_than_its_median_still_prints_four_digits():
    """A decode that varies 1000x between iterations: the CI95 column runs past 1000 % and σ past
    100 %; neither the screen nor the markdown may carry a fifth digit."""
    spec = fake_spec(decode_ms=1.0, scales=[0.01, 90.0, 0.02, 70.0, 0.03, 50.0, 0.5])
    routes = [RouteSpec("config", spec, route=Route("config", "config", "config"))]
    cells = expand_sweep(routes, [8], [4], iterations=IterationPolicy(iterations=7))
    run = run_sweep(
        cells,
        open_fake_session,
        isolate=False,
        facts=RunFacts(environment=FAKE_ENV, argv=["perf"]),
        extras=CellExtras(roofline=False),
    )
    ci = run.cells[0].summary.primary_ci95_half_width_pct
    assert ci is not None and ci > 1000  # the case under test
    for text in (render_run(run, width=10_000), run_text(run, "markdown")):
        text = re.sub(r"\brun[= ][0-9a-f]{8,}", "run ID", text)  # a run id may be all digits (1 in ~280)
        for number in re.findall(r"(?<![\w.])(?:\d+\.\d+|\d{5,})(?![\w.])", text):
            assert len(number.replace(".", "").lstrip("0")) <= 4, (number, text)


def test_the_ci_target_warning_writes_its_width_in_four_digits_or_says_it_has_none():
    from winml_perf.record.warnings import ci_not_reached

    (wide,) = ci_not_reached("decode_tokens_per_s", 1446.123, 1.0, "max_time", 7)
    assert "±1446 % after 7 iterations" in wide.message
    (none,) = ci_not_reached("decode_tokens_per_s", float("nan"), 1.0, "max_time", 2)
    assert "has no width yet after 2 iterations" in none.message and "nan" not in none.message
    assert none.data["ci95_half_width_pct"] is None


def test_a_speed_up_of_hundreds_prints_four_digits_in_compare_and_tune():
    """The QNN emulator's tiny bundle ran 425.94x config: ratios too keep to four digits."""
    from winml_perf.compare.routes import INVOCATIONS, RouteComparison
    from winml_perf.stats import significance as sig
    from winml_perf.tune.standings import Standing, table_text

    row = RouteComparison(
        "b", "tb", 16, 8, "ep=qnn", "config", "decode_tokens_per_s", 425.94, 199.43, 910.31, sig.FASTER, 4, 20, 20,
        2.0, pairing=INVOCATIONS, pooled_speedup=425.94,
    )  # fmt: skip
    assert "ran 425.9 times faster than config (95% CI +484.4/−226.5;" in row.speed_sentence()
    standing = Standing(1, "ep=qnn", "leader", 425.94, 199.43, 910.31, 4, "within precision tolerance", "")
    text = table_text([standing], "decode")
    assert "425.9× [199.4, 910.3]" in text and "425.940" not in text
