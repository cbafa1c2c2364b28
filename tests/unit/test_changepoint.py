"""E-Divisive change points and the newest-run gate (results/changepoint.py)."""

from __future__ import annotations

import numpy as np
import pytest

from winml_perf.stats.series import changepoint as cp
from winml_perf.support.errors import UsageError


def _noise(seed: int, n: int, level: float = 100.0, sd: float = 2.0) -> np.ndarray:
    return np.random.default_rng(seed).normal(level, sd, n)


def _brute_q(x: np.ndarray, tau: int) -> float:
    a, b = x[:tau], x[tau:]
    n, m = len(x), len(x) - tau
    e = (
        2 * np.abs(a[:, None] - b[None, :]).mean()
        - np.abs(a[:, None] - a[None, :]).sum() / (tau * (tau - 1))
        - np.abs(b[:, None] - b[None, :]).sum() / (m * (m - 1))
    )
    return tau * m / n * e


def test_divergence_matches_the_definition_by_pairwise_sums():
    x = np.r_[_noise(1, 20), _noise(2, 17, 103.0)]
    x[5] = x[9]  # a tie
    q = cp.divergence(x, min_size=3)
    assert np.allclose(q, [_brute_q(x, t) for t in range(3, len(x) - 2)])


def test_single_shift_found_at_its_index_with_sign_and_size():
    x = np.r_[_noise(3, 60), _noise(4, 40, 90.0)]
    points = cp.detect_change_points(x, [f"run{i}" for i in range(100)], higher_is_better=True)
    assert len(points) == 1
    p = points[0]
    assert abs(p.index - 60) <= 1 and p.run_id == f"run{p.index}"
    assert p.shift == pytest.approx(-0.10, abs=0.015)
    assert p.shift_low < p.shift < p.shift_high < 0
    assert p.p_value <= cp.DEFAULT_ALPHA
    assert p.direction == cp.REGRESSION


def test_no_change_point_on_iid_noise():
    for seed in range(5):
        assert cp.detect_change_points(_noise(100 + seed, 200), higher_is_better=True) == []


def test_no_change_point_on_bimodal_iid_runs():
    rng = np.random.default_rng(7)
    x = np.where(rng.random(300) < 0.3, 65.0, 100.0) * rng.lognormal(0, 0.05, 300)
    assert cp.detect_change_points(x, higher_is_better=True) == []


def test_two_shifts_found():
    x = np.r_[_noise(5, 50), _noise(6, 50, 110.0), _noise(7, 50, 100.0)]
    points = cp.detect_change_points(x, higher_is_better=True)
    assert [p.index for p in points] == pytest.approx([50, 100], abs=1)
    assert [p.direction for p in points] == [cp.IMPROVEMENT, cp.REGRESSION]


def test_lower_is_better_turns_the_direction():
    x = np.r_[_noise(8, 40, 10.0, 0.2), _noise(9, 40, 11.0, 0.2)]  # a time that got longer
    (up,) = cp.detect_change_points(x, higher_is_better=True)
    (down,) = cp.detect_change_points(x, higher_is_better=False)
    assert up.shift == down.shift > 0
    assert (up.direction, down.direction) == (cp.IMPROVEMENT, cp.REGRESSION)


def test_same_seed_same_answer_and_min_size_respected():
    x = np.r_[_noise(10, 40), _noise(11, 20, 80.0), _noise(20, 40)]
    a = cp.detect_change_points(x, higher_is_better=True, min_size=8)
    assert a == cp.detect_change_points(x, higher_is_better=True, min_size=8) and [p.index for p in a] == [40, 60]
    # no segment shorter than 2 x min_size is split: the 20-run middle stays whole at min_size 11
    assert len(cp.detect_change_points(x, higher_is_better=True, min_size=11)) == 2


@pytest.mark.parametrize("after", [2, 3, 4])
def test_a_step_younger_than_min_size_is_located_at_its_own_run(after):
    # the test can only split 5 runs from the end; the change point is then moved to the step itself
    x = np.r_[_noise(21, 40, 100.0, 1.0), _noise(22, after, 80.0, 1.0)]
    (p,) = cp.detect_change_points(x, higher_is_better=True)
    assert p.index == 40 and p.median_after == pytest.approx(80.0, abs=2.0)
    if after >= 3:  # the gate's stricter alpha needs a third run
        v = cp.judge_newest(x, list(range(len(x))), higher_is_better=True, threshold=0.05)
        assert v.is_regression and v.change_point.index == 40 and "(run 40)" in v.reason


def test_a_step_near_the_start_is_located_at_its_own_run():
    x = np.r_[_noise(23, 3, 80.0, 1.0), _noise(24, 40, 100.0, 1.0)]
    assert [p.index for p in cp.detect_change_points(x, higher_is_better=True)] == [3]


def test_a_step_at_the_edge_stays_there_and_location_keeps_two_runs_a_side():
    x = np.r_[_noise(25, 40, 100.0, 1.0), _noise(26, 5, 80.0, 1.0)]
    assert [p.index for p in cp.detect_change_points(x, higher_is_better=True)] == [40]
    one_low = np.r_[np.full(40, 100.0), 80.0]
    assert cp._located(one_low, len(one_low) - 5, 5) <= len(one_low) - cp.MIN_LOCATED
    assert cp._located(np.r_[80.0, np.full(40, 100.0)], 5, 5) >= cp.MIN_LOCATED


@pytest.mark.parametrize(
    "values, fragment",
    [
        ([1.0, float("nan"), 2.0], "index 1"),
        ([[[1.0, 2.0]]], "1-D"),
        ([[1.0, 2.0], []], "run 1"),
        ([[1.0], [2.0, float("nan")]], "run 1"),
        ([[1.0, 2.0], [0.0, 1.0]], "positive"),
    ],
)
def test_bad_series_is_a_usage_error(values, fragment):
    with pytest.raises(UsageError, match=fragment):
        cp.detect_change_points(values, higher_is_better=True)


def test_too_few_permutations_for_alpha_is_a_usage_error():
    with pytest.raises(UsageError, match="permutations"):
        cp.detect_change_points(_noise(1, 20), higher_is_better=True, alpha=0.001, permutations=199)


def test_gate_fails_when_the_newest_runs_start_a_regression():
    x = np.r_[_noise(12, 40), _noise(13, 6, 88.0)]
    v = cp.judge_newest(x, list(range(46)), higher_is_better=True, threshold=0.05)
    assert v.status == cp.REGRESSION and v.is_regression and v.method == cp.BY_CHANGE_POINT
    assert v.change_point.index == 40 and "a regression beyond 5.0%" in v.reason


def test_an_improvement_is_named_with_its_article():
    x = np.r_[_noise(12, 40), _noise(13, 6, 112.0)]
    v = cp.judge_newest(x, list(range(46)), higher_is_better=True, threshold=0.05)
    assert v.status == cp.IMPROVEMENT and "an improvement beyond 5.0%" in v.reason


def test_gate_passes_an_old_change_point_and_a_small_one():
    old = np.r_[_noise(14, 20), _noise(15, 40, 88.0)]
    v = cp.judge_newest(old, higher_is_better=True)
    assert v.status == cp.UNCHANGED and "index 20" in v.reason
    small = np.r_[_noise(16, 60, 100.0, 0.3), _noise(17, 6, 98.0, 0.3)]
    v = cp.judge_newest(small, higher_is_better=True, threshold=0.05)
    assert v.status == cp.UNCHANGED and v.change_point is not None and "within the 5.0% threshold" in v.reason


def test_gate_for_a_lower_is_better_metric():
    x = np.r_[_noise(18, 40, 10.0, 0.2), _noise(19, 6, 11.0, 0.2)]
    assert cp.judge_newest(x, higher_is_better=False).status == cp.REGRESSION
    assert cp.judge_newest(x, higher_is_better=True).status == cp.IMPROVEMENT


def test_short_history_judges_the_candidate_interval():
    history = [100.0, 101.0, 99.0, 100.0]
    slow = cp.judge_newest(history + [90.0], higher_is_better=True, candidate_interval=(88.0, 93.0))
    assert slow.status == cp.REGRESSION and slow.method == cp.BY_INTERVAL
    overlaps = cp.judge_newest(history + [94.0], higher_is_better=True, candidate_interval=(92.0, 96.0))
    assert overlaps.status == cp.UNCHANGED
    faster_time = cp.judge_newest(history + [90.0], higher_is_better=False, candidate_interval=(88.0, 93.0))
    assert faster_time.status == cp.IMPROVEMENT
    longer_time = cp.judge_newest(history + [110.0], higher_is_better=False, candidate_interval=(107.0, 112.0))
    assert longer_time.status == cp.REGRESSION


def test_short_history_without_an_interval_or_a_baseline_is_insufficient():
    assert cp.judge_newest([100.0, 101.0, 80.0], higher_is_better=True).status == cp.INSUFFICIENT
    assert cp.judge_newest([100.0], higher_is_better=True, candidate_interval=(99.0, 101.0)).status == cp.INSUFFICIENT
    with pytest.raises(UsageError, match="interval"):
        cp.judge_newest([100.0, 90.0], higher_is_better=True, candidate_interval=(95.0, 91.0))


def _permutations_drawn(monkeypatch) -> list[int]:
    """Record the permutations each batch of the permutation test evaluates."""
    seen: list[int] = []
    inner = cp._earlier_distances

    def counting(y):
        if y.shape[0] > 1:  # the observed ordering is one row
            seen.append(y.shape[0])
        return inner(y)

    monkeypatch.setattr(cp, "_earlier_distances", counting)
    return seen


def test_batched_permutations_give_the_p_value_of_one_batch(monkeypatch):
    """The first batches are small, but the permutations drawn are those of one big batch: a
    significant segment gets the same p-value, a shift-free one stops early and stays above alpha."""
    rng = np.random.default_rng(3)
    step = np.concatenate([rng.normal(100, 1, 40), rng.normal(102, 1, 40)])
    noise = rng.normal(100, 1, 80)
    seen = _permutations_drawn(monkeypatch)
    small = [cp._best_split(x, 5, 0.02, 199, 11) for x in (step, noise)]
    batches_small, first = list(seen), cp._FIRST_BATCH
    monkeypatch.setattr(cp, "_FIRST_BATCH", 10_000)
    seen.clear()
    whole = [cp._best_split(x, 5, 0.02, 199, 11) for x in (step, noise)]
    assert small[0] == whole[0] and small[0][2] <= 0.02  # same split, statistic and p
    assert small[1][:2] == whole[1][:2] and small[1][2] > 0.02 and whole[1][2] > 0.02
    assert sum(batches_small) < sum(seen) and batches_small[0] == first < 199


@pytest.mark.parametrize("n", [10, 37, 120])
def test_both_ways_of_the_earlier_distances_agree_with_the_definition(n):
    rng = np.random.default_rng(n)
    x = np.round(rng.normal(100, 3, n), 1)  # ties too
    batch = x[np.argsort(rng.random((cp._LOOP_ROWS + 5, n)), axis=1)]
    definition = np.array([[np.abs(row[t] - row[:t]).sum() for t in range(n)] for row in batch])
    looped = cp._earlier_distances(batch)  # many rows: the prefix loop
    counted = np.concatenate([cp._earlier_distances(batch[i : i + 1]) for i in range(len(batch))])  # one row: counts
    np.testing.assert_allclose(looped, definition, rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(counted, definition, rtol=1e-12, atol=1e-9)
