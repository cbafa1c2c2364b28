"""The change-point cache's input digest (results/change_point_cache.Search.digest): alike only for
the same input, value for value."""

from __future__ import annotations

import numpy as np

from winml_perf.results.change_point_cache import Search


def _search(values, ids=(1, 2), runs=("a", "b"), options=(("higher_is_better", True),)) -> Search:
    return Search("k", "decode_tps", tuple(ids), tuple(runs), tuple(values), tuple(options))


def test_same_input_same_digest_and_every_part_counts():
    base = _search([(1.0, 2.0), (3.0,)]).digest("fp")
    assert _search([(1.0, 2.0), (3.0,)]).digest("fp") == base
    changed = [
        _search([(1.0,), (2.0, 3.0)]),  # the same values, split between records otherwise
        _search([(1.0, 2.0), (np.nextafter(3.0, 4.0),)]),  # one value one ulp away
        _search([(2.0, 1.0), (3.0,)]),  # order within a record
        _search([(1.0, 2.0), (3.0,)], ids=(1, 3)),
        _search([(1.0, 2.0), (3.0,)], runs=("a", "c")),
        _search([(1.0, 2.0), (3.0,)], options=(("higher_is_better", False),)),
    ]
    digests = [s.digest("fp") for s in changed] + [_search([(1.0, 2.0), (3.0,)]).digest("other")]
    assert base not in digests and len(set(digests)) == len(digests)


def test_medians_and_one_invocation_lists_digest_apart():
    assert _search([1.0, 3.0]).digest("fp") != _search([(1.0,), (3.0,)]).digest("fp")
    assert _search([1.0, 3.0]).digest("fp") == _search([np.float64(1.0), 3]).digest("fp")


def _digest_run_by_run(search: Search, fingerprint: str) -> str:
    """The digest of invocation lists as it was computed before: an array per record, joined."""
    import hashlib
    import json

    head = json.dumps(
        [fingerprint, search.metric, list(search.options), list(search.record_ids), [str(r) for r in search.run_ids]],
        separators=(",", ":"),
    )
    h = hashlib.sha256(head.encode())
    runs = [np.atleast_1d(np.asarray(v, dtype="<f8")) for v in search.values]
    h.update(b"invocations\0" + np.array([len(r) for r in runs], dtype="<i8").tobytes())
    h.update(np.concatenate(runs).tobytes())
    return h.hexdigest()


def test_runs_of_one_length_digest_as_run_by_run():
    """Runs of one length are read as one array: the digests kept in stores stay current."""
    rng = np.random.default_rng(5)
    for values in (
        [tuple(rng.normal(100, 5, 10)) for _ in range(120)],  # one length
        [(1.0,), (2.0,)],  # one invocation each
        [(1.0, 2.0), (3.0,)],  # ragged
        [(1.0, 2.0), 3.0],  # a record without invocations among lists
        [tuple(rng.normal(100, 5, 3)), tuple(rng.normal(100, 5, 4))],
    ):
        ids = tuple(range(len(values)))
        search = _search(values, ids=ids, runs=tuple(f"r{i}" for i in ids))
        assert search.digest("fp") == _digest_run_by_run(search, "fp")
