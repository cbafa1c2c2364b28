"""results/series._metric_columns: metric rows (record id, the metric's position in the names asked
for, median, low, high) placed by record id into columns aligned with each series' records (ids in
time order, not id order; a page's series read together), NaN where a record has no row or a bound
is NULL."""

from __future__ import annotations

import numpy as np
import pytest

from winml_perf.results.series import _metric_columns

METRICS = ["decode_tps", "ttft_ms", "e2e_ms"]
DECODE, TTFT = 0, 1


def test_rows_land_on_their_records_whatever_the_order():
    ids = [30, 10, 20]  # time order differs from id order (an imported record)
    rows = [
        (20, DECODE, 2.0, 1.5, 2.5),
        (30, DECODE, 3.0, None, None),
        (10, TTFT, 9.0, 8.0, 10.0),
        (30, TTFT, 7.0, 6.0, 8.0),
    ]
    (cols,) = _metric_columns([ids], rows, METRICS)
    med, low, high = cols["decode_tps"]
    np.testing.assert_array_equal(med, [3.0, np.nan, 2.0])
    np.testing.assert_array_equal(low, [np.nan, np.nan, 1.5])
    np.testing.assert_array_equal(high, [np.nan, np.nan, 2.5])
    np.testing.assert_array_equal(cols["ttft_ms"][0], [7.0, 9.0, np.nan])
    assert np.isnan(cols["e2e_ms"][0]).all() and len(cols["e2e_ms"][0]) == 3


def test_rows_of_a_page_land_in_their_own_series():
    ids = [[30, 10], [25, 5, 40], []]  # three series, ids interleaved, one without records
    rows = [
        (40, TTFT, 4.0, 3.0, 5.0),
        (10, DECODE, 1.0, 0.5, 1.5),
        (5, DECODE, 0.5, None, 0.7),
        (30, DECODE, 3.0, 2.0, 4.0),
    ]
    first, second, third = _metric_columns(ids, rows, METRICS)
    np.testing.assert_array_equal(first["decode_tps"][0], [3.0, 1.0])
    np.testing.assert_array_equal(first["decode_tps"][1], [2.0, 0.5])
    np.testing.assert_array_equal(second["decode_tps"][0], [np.nan, 0.5, np.nan])
    np.testing.assert_array_equal(second["decode_tps"][2], [np.nan, 0.7, np.nan])
    np.testing.assert_array_equal(second["ttft_ms"][0], [np.nan, np.nan, 4.0])
    assert np.isnan(first["ttft_ms"][0]).all() and all(len(c[0]) == 0 for c in third.values())


def test_no_rows_and_rows_of_unknown_records():
    assert np.isnan(_metric_columns([[1, 2]], [], ["decode_tps"])[0]["decode_tps"][0]).all()
    with pytest.raises(RuntimeError, match="did not return"):
        _metric_columns([[1, 2]], [(5, 0, 1.0, None, None)], ["decode_tps"])
    with pytest.raises(RuntimeError):
        _metric_columns([[]], [(5, 0, 1.0, None, None)], ["decode_tps"])
