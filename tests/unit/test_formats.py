"""The shared --format vocabulary, human numbers, sweep values, grouped warnings and the sample
sizes below which no statistical claim is made."""

from __future__ import annotations

import ast
import json
import math
from pathlib import Path

import pytest

from winml_perf.commands.sweep_values import sweep_values
from winml_perf.model.record import CellRecord
from winml_perf.model.record_context import Environment, Prompt
from winml_perf.model.record_measures import Memory
from winml_perf.model.record_sections import Headline, Policy, RecordSamples, Shape
from winml_perf.model.result import CellFailure, LoadPhases
from winml_perf.model.route import Route
from winml_perf.model.spec import IterationPolicy, WarmupPolicy
from winml_perf.publish import formats
from winml_perf.publish.formats import Offer, check_format, human, json_text, offered, result_text, table_text
from winml_perf.publish.render import warning_lines
from winml_perf.record import warnings as W
from winml_perf.record.build import record_warning
from winml_perf.stats import sample_stats as stats
from winml_perf.support.errors import EXIT_USAGE, UsageError

FORMATS = offered(Offer.ROWS)  # a result set's formats


@pytest.mark.parametrize(
    "value, text",
    [
        (15645.491656540647, "15.65k"),
        (16270.0, "16.27k"),
        (1.627e4, "16.27k"),
        (0.0123456, "0.01235"),
        (1.5, "1.500"),  # four significant digits, as 1.500k keeps them (issue 38: TTFT 0.57 read 0.5700)
        (0.57, "0.5700"),
        (123.456, "123.5"),
        (0.0, "0"),
        (-2.5, "-2.500"),
        (-1950.0, "-1950"),  # the sustained page's slope, once -1.95e+03
        (7, "7"),
        (None, ""),
        (math.nan, ""),
        (2.0e-7, "0.0000002000"),
    ],
)
def test_human_numbers_have_meaningful_digits_and_no_exponent(value, text):
    assert human(value) == text
    assert "e" not in human(value).lower()


def test_every_format_of_the_vocabulary_renders_and_others_are_exit_2():
    headers, rows = ["route", "decode tok/s"], [["config", 15645.491656540647], ["ep=cpu", 0.012345678]]
    docs = [{"route": "config", "decode": 15645.491656540647}, {"route": "ep=cpu", "decode": 0.012345678}]
    out = {fmt: result_text(fmt, docs, docs, headers, rows) for fmt in FORMATS}
    assert "config        15.65k\n" in out["table"] and "15645.49" not in out["table"] and "0.01235" in out["table"]
    assert out["markdown"].splitlines()[0].startswith("| route") and "| 15.65k " in out["markdown"]
    assert out["csv"].splitlines() == ["route,decode tok/s", "config,15645.491656540647", "ep=cpu,0.012345678"]  # raw
    assert json.loads(out["json"]) == docs  # raw
    assert [json.loads(line) for line in out["jsonl"].splitlines()] == docs
    with pytest.raises(UsageError, match="table, json, jsonl, csv, markdown") as err:
        check_format(Offer.ROWS, "xml")
    assert err.value.exit_code == EXIT_USAGE


def test_a_table_gives_every_column_a_header():
    text = table_text(["a", "b", "flag"], [[1, 2, ""], [3, 4, "REGRESSION"]], "table")
    head, rule = text.splitlines()[:2]
    assert len(head.split()) == 3 and len(rule.split()) == 3
    assert json_text({"a": 1}, "jsonl") == '{"a":1}\n'


def test_sweep_values_merge_repeats_and_read_ranges():
    assert sweep_values(["16", "64"], "--prompt-tokens") == (16, 64)  # llama-bench: repeated flags merge
    assert sweep_values(["16,64", "16"], "--prompt-tokens") == (16, 64)
    assert sweep_values(["128-1024*2"], "--prompt-tokens") == (128, 256, 512, 1024)
    assert sweep_values(["16-64+16", "8"], "--max-new-tokens") == (16, 32, 48, 64, 8)
    assert sweep_values(["10-25+10"], "--prompt-tokens") == (10, 20)  # up to LAST, never past it
    for bad in ("0", "-3", "x", "64-16+8", "16-64*1", "16-64+0", ",", "1-100000+1"):
        with pytest.raises(UsageError) as err:
            sweep_values([bad], "--prompt-tokens")
        assert err.value.exit_code == EXIT_USAGE and "--prompt-tokens" in str(err.value)


def test_no_outlier_claim_below_its_sample_size_and_no_ci_claim_without_a_ci():
    spike = [10.0, 10.1, 9.9, 10.0, 10.05, 10.02, 50.0]
    assert stats.outlier_indices(spike[-3:][:2] + [50.0])  # the statistic alone would flag n = 3 ...
    assert W.check_outliers("e2e_ms", [10.0, 10.1, 50.0]) == []  # ... the warning does not
    assert W.check_slow_first([50.0, 10.0, 10.1]) == []
    assert stats.min_ci_samples() == 6 and stats.median_ci_ranks(5) is None
    five = W.check_outliers("e2e_ms", [10.0, 10.1, 9.9, 10.0, 50.0])
    assert five and "its CI" not in five[0].remedy and "6 or more iterations" in five[0].remedy
    seven = W.check_outliers("e2e_ms", spike)
    assert seven and "the median and its CI are robust" in seven[0].remedy
    assert W.check_slow_first([50.0, 10.0, 10.1, 9.9, 10.0])


def _cell(key: str, *warns: W.BenchWarning, failure: CellFailure | None = None) -> CellRecord:
    """A cell record carrying only what warning_lines reads: its key, status, warnings and failure."""
    return CellRecord(
        run_id="r",
        cell_id=key,
        cell_key=key,
        cell_index=0,
        status="failed" if failure else "ok",
        runtime="winml-genai",
        bundle="b",
        route=Route("config"),
        shape=Shape(16, 8),
        prompt=Prompt(),
        policy=Policy(WarmupPolicy().to_dict(), IterationPolicy().to_dict()),
        load=LoadPhases(),
        samples=RecordSamples(),
        metrics={},
        summary=Headline(),
        memory=Memory(),
        environment=Environment(),
        warnings=tuple(record_warning(w) for w in warns),
        failure=failure,
    )


def test_warnings_are_grouped_by_kind_with_one_remedy_each():
    noisy = [10.0, 14.0, 9.0, 13.0, 8.0, 12.0]
    cells = [_cell(f"config|p{p}|n8", *W.check_cv("decode_tokens_per_s", noisy)) for p in (16, 32, 64, 128)]
    cells.append(_cell("ep=x|p16|n8", failure=CellFailure("Boom", "no")))
    lines = warning_lines(cells)
    remedy = W.check_cv("decode_tokens_per_s", noisy)[0].remedy
    assert sum(remedy in line for line in lines) == 1  # the remedy once
    assert lines[0].startswith("warning high_cv (4 cells)")
    assert all(f"config|p{p}|n8" in "\n".join(lines) for p in (16, 32, 64, 128))
    assert len(lines) == 3  # heading, one line naming the four cells (same detail), the failure
    assert lines[-1].startswith("FAILED [ep=x|p16|n8]")


class _Runs:
    display = "fake.db"

    def __init__(self, runs):
        self.runs = runs

    def run_ids(self, **_):
        return list(self.runs)


def test_run_ids_resolve_from_any_unique_prefix_and_name_candidates_otherwise():
    from winml_perf.results.selectors import resolve_run_id
    from winml_perf.support.errors import StoreError

    store = _Runs(["ab12cd34ef", "ab12ff00aa", "9f00"])
    assert resolve_run_id(store, "ab12c") == "ab12cd34ef" and resolve_run_id(store, "9f00") == "9f00"
    with pytest.raises(UsageError, match="matches 2 runs: ab12cd34ef, ab12ff00aa") as err:
        resolve_run_id(store, "ab12")
    assert err.value.exit_code == EXIT_USAGE
    with pytest.raises(StoreError, match="no run 'zz'.*runs: ab12cd34ef, ab12ff00aa, 9f00") as err:
        resolve_run_id(store, "zz")
    assert err.value.exit_code == EXIT_USAGE


def _own_vocabularies(source: str) -> list[str]:
    """Format vocabularies a module spells itself: literals of two or more format words, and functions
    that check a format (named so: *check_format*)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            words = [e.value for e in node.elts if isinstance(e, ast.Constant) and e.value in FORMATS]
            if len(words) >= 2:
                found.append(f"{node.lineno}: {words}")
        elif isinstance(node, ast.FunctionDef) and "check_format" in node.name:
            found.append(f"{node.lineno}: def {node.name}")
    return found


def test_formats_have_one_home():
    """publish/formats.py holds the vocabulary and its check; no other module keeps a copy."""
    package = Path(formats.__file__).resolve().parents[1]
    found = {
        rel: spelled
        for path in package.rglob("*.py")
        if (rel := path.relative_to(package).as_posix()) != "publish/formats.py"
        and (spelled := _own_vocabularies(path.read_text(encoding="utf-8")))
    }
    assert found == {}
    assert _own_vocabularies('def _check_format(f):\n    if f not in ("table", "json"): raise X\n') == [
        "1: def _check_format",
        "2: ['table', 'json']",
    ]


def test_one_result_in_every_format():
    doc, items = {"rows": 2}, [{"a": 1.5}, {"a": 2}]
    out = {fmt: result_text(fmt, doc, items, ["a"], [["1.5 s"]], csv_rows=[[1.5]]) for fmt in FORMATS}
    assert json.loads(out["json"]) == doc and [json.loads(x) for x in out["jsonl"].splitlines()] == items
    assert out["csv"].splitlines() == ["a", "1.5"] and "1.5 s" in out["markdown"] and "1.5 s" in out["table"]
    with pytest.raises(UsageError, match="--format 'xml' is not one of"):
        result_text("xml", doc, items, ["a"], [])
