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


def _by_mask(ids, rows, metrics):
    """The form _metric_columns had before it wrote one table: a mask per metric and series."""
    sizes = [len(x) for x in ids]
    out = [{name: (np.full(n, np.nan), np.full(n, np.nan), np.full(n, np.nan)) for name in metrics} for n in sizes]
    if not rows:
        return out
    page_ids = np.asarray([i for x in ids for i in x], dtype=np.int64)
    rid, name, median, low, high = zip(*rows)
    order = np.argsort(page_ids, kind="stable")
    position = order[np.searchsorted(page_ids[order], np.asarray(rid, dtype=np.int64))]
    starts = np.cumsum([0, *sizes])
    owner = np.searchsorted(starts, position, side="right") - 1
    names = np.asarray(name, dtype=np.int64)
    numbers = [np.array(c, dtype=float) for c in (median, low, high)]
    for k_metric, metric in enumerate(metrics):
        mask = names == k_metric
        for k, values in enumerate(out):
            sel = np.flatnonzero(mask & (owner == k))
            for column, source in zip(values[metric], numbers):
                column[position[sel] - starts[k]] = source[sel]
    return out


@pytest.mark.parametrize("seed", range(40))
def test_the_columns_equal_the_per_series_masks_bit_for_bit(seed):
    """Random pages: ragged and empty series, ids out of time order, some metrics missing, on even
    seeds some bounds missing too (None; odd seeds: none, the rows read through one iterator),
    values with ties and signed zeros, rows in any order."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(0, 30, rng.integers(1, 6)).tolist()
    pool = rng.permutation(10 * (sum(sizes) + 1))[: sum(sizes)] + 1
    ids = [pool[a:b].tolist() for a, b in zip(np.cumsum([0, *sizes]), np.cumsum(sizes))]
    rows = []
    for rid in pool.tolist():
        for k in range(len(METRICS)):
            if rng.random() < 0.7:
                value = [float(v) for v in rng.choice([0.0, -0.0, 1.5, 2.0, 1e300, 3.25], 3)]
                bounds = (v if seed % 2 or rng.random() < 0.8 else None for v in value[1:])
                rows.append((rid, k, value[0], *bounds))
    rng.shuffle(rows)
    rows = [tuple(r) for r in rows]
    new, old = _metric_columns(ids, rows, METRICS), _by_mask(ids, rows, METRICS)
    assert len(new) == len(old)
    for a, b in zip(new, old):
        assert list(a) == list(b)
        for name in METRICS:
            for x, y in zip(a[name], b[name]):
                assert x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes()


def test_ids_beyond_the_floats_exact_integers_land_on_their_records():
    big = 2**53
    ids = [[big + 1, big + 2], [big + 3]]  # big + 1 and big + 3 have no float64 of their own
    rows = [(big + 3, DECODE, 3.0, None, None), (big + 1, DECODE, 1.0, 0.5, 1.5), (big + 2, TTFT, 2.0, None, None)]
    first, second = _metric_columns(ids, rows, METRICS)
    np.testing.assert_array_equal(first["decode_tps"][0], [1.0, np.nan])
    np.testing.assert_array_equal(first["ttft_ms"][0], [np.nan, 2.0])
    np.testing.assert_array_equal(second["decode_tps"][0], [3.0])
