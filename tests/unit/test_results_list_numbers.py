"""`winml results list` (and the markdown export, which shares its rows) writes headline numbers
with the one human formatter (publish/formats.human): four significant digits (an SI suffix from
10 000 on), never a fixed count of decimals that hides a small time."""

from __future__ import annotations

from tests.results_fakes import hex_id, make_cell
from winml_perf.publish.exporters.markdown import MARKDOWN_HEADERS, summary_rows
from winml_perf.publish.formats import human
from winml_perf.results import load
from winml_perf.results.store import open_store


def test_headline_numbers_are_the_human_formatters(tmp_path):
    fast = [0.0303, 0.0299, 0.0310, 0.0297, 0.0305, 0.0301]  # ~33 000 tokens/s
    with open_store(tmp_path / "s.db") as store:
        store.write_json_record(make_cell(hex_id("fast"), step_ms=fast, prompt_ms=0.0123))
        df = load(store)
    (row,) = summary_rows(df)
    cells = dict(zip(MARKDOWN_HEADERS, row))
    decode = cells[MARKDOWN_HEADERS[8]]
    median, interval = decode.split(" ", 1)
    assert median.startswith("33.") and median.endswith("k") and len(median) == 6  # 33.11k, not 33112.6
    assert interval.startswith("[") and interval.count("k") == 2
    assert cells["TTFT ms"] == human(df["ttft_ms"].iloc[0]) and cells["TTFT ms"] != f"{df['ttft_ms'].iloc[0]:.2f}"
