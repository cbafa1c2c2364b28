"""CSV output keeps no live formula (OWASP CSV injection): a text cell starting with = + - @, a tab or
a CR is prefixed with ', in both CSV writers; numbers stay numbers."""

from __future__ import annotations

import csv
import io

import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.results_fakes import make_cell
from winml_perf.publish.exporters.csv import to_csv
from winml_perf.publish.formats import table_text
from winml_perf.results.store import open_store

DANGEROUS = st.builds(lambda start, rest: start + rest, st.sampled_from("=+-@\t\r"), st.text(max_size=20))


def _cells(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text, newline="")))


def _live(cell: str) -> bool:
    return cell[:1] in ("=", "+", "-", "@", "\t", "\r")


@settings(max_examples=100, deadline=None)
@given(DANGEROUS, st.floats(min_value=-1e6, max_value=-1e-3))
def test_the_table_writer_neutralises_text_and_keeps_numbers(text, number):
    header, row = _cells(table_text(["bundle", text], [[text, number]], "csv"))
    shown = "'" + text.replace("\r\n", "\n").replace("\r", "\n")
    assert header[1] == shown and row[0] == shown
    assert float(row[1]) == number  # a negative number is not text: left numeric


@settings(max_examples=100, deadline=None)
@given(DANGEROUS, st.floats(min_value=-1e6, max_value=-1e-3))
def test_the_csv_exporter_neutralises_text_and_keeps_numbers(text, number):
    df = pd.DataFrame({"bundle": [text], "testbed_id": ['=HYPERLINK("http://x")'], "ttft_ms": [number]})
    header, row = _cells(to_csv(df))
    shown = "'" + text.replace("\r\n", "\n").replace("\r", "\n")
    assert row[0] == shown and row[1].startswith("'=") and float(row[2]) == number


def test_results_export_and_list_keep_no_live_formula(winml, tmp_path):
    store = tmp_path / "s.db"
    with open_store(store) as s:
        s.write_json_record(make_cell("c" * 32, bundle="bundles/=1+2", testbed='=HYPERLINK("http://evil/","x")'))
    outputs = [winml("results", "list", "--store", store, "--format", "csv").stdout]
    done = winml("results", "export", "--store", store, "--format", "csv", "-o", tmp_path / "x.csv")
    assert done.returncode == 0, done.stderr
    outputs.append((tmp_path / "x.csv").read_text())
    for text in outputs:
        cells = [c for row in _cells(text) for c in row]
        assert "'=1+2" in cells and not [c for c in cells if _live(c) and not _is_number(c)]


def _is_number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True
