"""The comparison metrics of :mod:`raytuner.analysis.metrics`."""

from __future__ import annotations

import numpy as np
import pytest

from raytuner.analysis import best_so_far, r_bar, relative_performance, win_rate
from raytuner.errors import InvalidInputError


def test_relative_performance_divides_by_the_best_of_each_cell() -> None:
    best = {
        "a": np.array([[1.0, 3.0], [2.0, 2.0]]),
        "b": np.array([[2.0, 1.5], [2.0, 4.0]]),
        "c": np.array([[4.0, 6.0], [1.0, 8.0]]),
    }
    r = relative_performance(best)
    assert set(r) == {"a", "b", "c"}
    np.testing.assert_allclose(r["a"], [[1.0, 2.0], [2.0, 1.0]])
    np.testing.assert_allclose(r["b"], [[2.0, 1.0], [2.0, 2.0]])
    np.testing.assert_allclose(r["c"], [[4.0, 4.0], [1.0, 4.0]])
    stacked = np.stack(list(r.values()))
    assert np.all(stacked >= 1.0) and np.all(stacked.min(axis=0) == 1.0)


def test_relative_performance_rejects_bad_input() -> None:
    with pytest.raises(InvalidInputError, match="same"):
        relative_performance({"a": np.ones(3), "b": np.ones(4)})
    with pytest.raises(InvalidInputError, match="positive minimised objectives"):
        relative_performance({"a": np.array([1.0, 0.0]), "b": np.ones(2)})
    with pytest.raises(InvalidInputError, match="positive minimised objectives"):
        relative_performance({"a": np.array([1.0, np.nan]), "b": np.ones(2)})
    with pytest.raises(InvalidInputError):
        relative_performance({})


def test_r_bar_is_mean_plus_median_over_two() -> None:
    assert r_bar(np.array([1.0, 1.0, 1.0])) == 1.0
    assert r_bar(np.array([[1.0, 2.0], [3.0, 10.0]])) == pytest.approx((4.0 + 2.5) / 2)
    with pytest.raises(InvalidInputError):
        r_bar(np.array([]))


def test_win_rate_counts_ties_half() -> None:
    a = np.array([1.0, 2.0, 3.0, 4.0])
    assert win_rate(a, a) == 0.5
    assert win_rate(a, a + 1) == 1.0
    assert win_rate(a + 1, a) == 0.0
    assert win_rate(a, np.array([2.0, 2.0, 2.0, 2.0])) == pytest.approx((1 + 0.5) / 4)
    assert win_rate(a, np.array([0.0, 9.0, 3.0, 9.0])) + win_rate(np.array([0.0, 9.0, 3.0, 9.0]), a) == 1.0
    with pytest.raises(InvalidInputError):
        win_rate(a, a[:2])


def test_best_so_far_skips_failed_evaluations() -> None:
    values = np.array([[np.nan, 5.0, 6.0, np.nan, 2.0], [3.0, np.nan, 1.0, 4.0, np.nan]])
    got = best_so_far(values)
    np.testing.assert_array_equal(got, [[np.nan, 5.0, 5.0, 5.0, 2.0], [3.0, 3.0, 1.0, 1.0, 1.0]])
    assert np.isnan(values[0, 0])  # the input is left alone
    assert best_so_far(np.array([])).shape == (0,)
