"""results/series._metric_columns: metric rows placed by record id into columns aligned with the
records (ids in time order, not id order), NaN where a record has no row or a bound is NULL."""

from __future__ import annotations

import numpy as np
import pytest

from winml_perf.results.series import _metric_columns


def test_rows_land_on_their_records_whatever_the_order():
    ids = [30, 10, 20]  # time order differs from id order (an imported record)
    rows = [
        (20, "decode_tps", 2.0, 1.5, 2.5),
        (30, "decode_tps", 3.0, None, None),
        (10, "ttft_ms", 9.0, 8.0, 10.0),
        (30, "ttft_ms", 7.0, 6.0, 8.0),
    ]
    cols = _metric_columns(ids, rows, ["decode_tps", "ttft_ms", "e2e_ms"])
    med, low, high = cols["decode_tps"]
    np.testing.assert_array_equal(med, [3.0, np.nan, 2.0])
    np.testing.assert_array_equal(low, [np.nan, np.nan, 1.5])
    np.testing.assert_array_equal(high, [np.nan, np.nan, 2.5])
    np.testing.assert_array_equal(cols["ttft_ms"][0], [7.0, 9.0, np.nan])
    assert np.isnan(cols["e2e_ms"][0]).all() and len(cols["e2e_ms"][0]) == 3


def test_no_rows_and_rows_of_unknown_records():
    assert np.isnan(_metric_columns([1, 2], [], ["decode_tps"])["decode_tps"][0]).all()
    with pytest.raises(RuntimeError, match="did not return"):
        _metric_columns([1, 2], [(5, "decode_tps", 1.0, None, None)], ["decode_tps"])
    with pytest.raises(RuntimeError):
        _metric_columns([], [(5, "decode_tps", 1.0, None, None)], ["decode_tps"])
