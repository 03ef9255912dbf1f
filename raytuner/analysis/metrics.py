"""Metrics that compare tuners over many (seed, task) cells.

Following the GPTuneBand paper (section 5): the *absolute performance* of a
tuner is the best objective value it found on each task; its *relative
performance* R-tilde divides that by the best value any tuner found on the
same task (so 1 is best), and R-bar = (mean + median) / 2 of R-tilde sums
it up in one number, the closer to 1 the better. Objectives are minimised
and must be positive for the ratios to mean anything.

Example:
    >>> import numpy as np
    >>> best = {"mla": np.array([1.0, 1.0, 2.0]), "random": np.array([2.0, 1.0, 1.0])}
    >>> r = relative_performance(best)
    >>> r["random"].tolist()
    [2.0, 1.0, 1.0]
    >>> round(r_bar(r["random"]), 4), win_rate(best["mla"], best["random"])
    (1.1667, 0.5)
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from raytuner.errors import InvalidInputError

__all__ = ["relative_performance", "r_bar", "win_rate", "win_rate_se", "best_so_far", "evaluations_to_reach"]


def relative_performance(best: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """R-tilde of each tuner: its best value over the best of all tuners, cell by cell.

    ``best[tuner]`` holds the best (minimised, positive) objective value the
    tuner found in each cell, for example an array of shape (seeds, tasks);
    every tuner must cover the same cells. The result has the same keys and
    shapes; each entry is at least 1, and exactly 1 for the tuners that did best.

    Args:
        best: per tuner, its best (minimised, positive) value in each cell; same shapes.

    >>> r = relative_performance({"a": [[1.0, 4.0]], "b": [[2.0, 2.0]]})
    >>> r["a"].tolist(), r["b"].tolist()
    ([[1.0, 2.0]], [[2.0, 1.0]])
    >>> relative_performance({"a": [1.0, -1.0], "b": [1.0, 1.0]})
    Traceback (most recent call last):
    ...
    raytuner.errors.InvalidInputError: best[a]: R-tilde needs positive minimised objectives, got -1.0
    """
    if not best:
        raise InvalidInputError("best", "no tuners to compare")
    arrays = {name: np.asarray(values, dtype=float) for name, values in best.items()}
    shape = next(iter(arrays.values())).shape
    for name, values in arrays.items():
        if values.shape != shape:
            raise InvalidInputError(
                f"best[{name}]",
                f"shape {values.shape} differs from the first tuner's {shape}; "
                "every tuner must cover the same (seed, task) cells",
            )
        bad = values[~(np.isfinite(values) & (values > 0))]
        if bad.size:
            raise InvalidInputError(f"best[{name}]", f"R-tilde needs positive minimised objectives, got {bad[0]}")
    reference = np.min(np.stack(list(arrays.values())), axis=0)
    return {name: values / reference for name, values in arrays.items()}


def r_bar(r_tilde: np.ndarray) -> float:
    """R-bar = (mean + median) / 2 of R-tilde over all its cells; the closer to 1, the better.

    Args:
        r_tilde: R-tilde values, any shape (:func:`relative_performance`).

    >>> r_bar(np.array([1.0, 1.0, 4.0]))
    1.5
    """
    values = np.asarray(r_tilde, dtype=float).ravel()
    if values.size == 0:
        raise InvalidInputError("r_tilde", "R-bar of no values")
    return float((np.mean(values) + np.median(values)) / 2.0)


def win_rate(a: np.ndarray, b: np.ndarray) -> float:
    """The fraction of cells where ``a`` is strictly below ``b`` (minimisation); a tie counts half.

    Args:
        a: the values of the first tuner, one per cell.
        b: the values of the second, same shape.

    >>> win_rate(np.array([1.0, 2.0, 3.0, 4.0]), np.array([2.0, 2.0, 1.0, 5.0]))
    0.625
    """
    a_values, b_values = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a_values.shape != b_values.shape:
        raise InvalidInputError("b", f"shape {b_values.shape} differs from a's {a_values.shape}")
    if a_values.size == 0:
        raise InvalidInputError("a", "win rate of no cells")
    wins = np.count_nonzero(a_values < b_values) + 0.5 * np.count_nonzero(a_values == b_values)
    return float(wins / a_values.size)


def win_rate_se(a: np.ndarray, b: np.ndarray) -> float | None:
    """The standard error of :func:`win_rate` over seeds: the rows of ``a`` and ``b`` are seeds.

    The cells of one seed share its draws, so the error comes from the spread
    of the per-seed win rates (their sample standard deviation over the
    square root of the number of seeds); ``None`` with fewer than two seeds.

    Args:
        a: the values of the first tuner, shaped (seeds, cells per seed).
        b: the values of the second, same shape.

    >>> win_rate_se(np.array([[1.0, 1.0], [2.0, 2.0]]), np.array([[2.0, 2.0], [1.0, 1.0]]))
    0.5
    >>> win_rate_se(np.array([[1.0, 2.0]]), np.array([[2.0, 1.0]])) is None
    True
    >>> win_rate_se(np.ones((3, 2)), np.ones((2, 2)))
    Traceback (most recent call last):
    ...
    raytuner.errors.InvalidInputError: b: shape (2, 2) differs from a's (3, 2)
    """
    a_values, b_values = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a_values.shape != b_values.shape:
        raise InvalidInputError("b", f"shape {b_values.shape} differs from a's {a_values.shape}")
    if a_values.ndim != 2 or a_values.shape[0] < 2:
        return None
    per_seed = [win_rate(x, y) for x, y in zip(a_values, b_values)]
    return float(np.std(per_seed, ddof=1) / np.sqrt(len(per_seed)))


def best_so_far(values: np.ndarray) -> np.ndarray:
    """The running minimum along the last axis; NaN entries (failed evaluations) are skipped.

    Entries before the first non-NaN value stay NaN.

    Args:
        values: objective values, evaluations along the last axis (NaN: failed).

    >>> best_so_far(np.array([np.nan, 3.0, np.nan, 1.0, 2.0])).tolist()
    [nan, 3.0, 3.0, 1.0, 1.0]
    >>> best_so_far(np.array([[2.0, 1.0], [1.0, 5.0]])).tolist()
    [[2.0, 1.0], [1.0, 1.0]]
    """
    array = np.asarray(values, dtype=float)
    if array.ndim == 0:
        return array.copy()
    return np.fmin.accumulate(array, axis=-1)


def evaluations_to_reach(values: np.ndarray, best: np.ndarray, share: float = 0.99) -> np.ndarray:
    """Per task, how many of its evaluations it took to come within ``share`` of its best known value.

    Values are minimised and positive, as everywhere here (an accuracy: pass
    ``1 / accuracy``): a value counts once ``best / value >= share``. A task
    that never gets there counts its evaluations plus one, so a tuner that
    misses is never counted as fast.

    Args:
        values: objective values shaped (tasks, evaluations), in the order evaluated (NaN: failed).
        best: the best known value of each task (tasks,).
        share: how close to the best counts as reached (default 0.99).

    >>> evaluations_to_reach(np.array([[2.0, 1.005, 1.0], [3.0, 2.0, 2.5]]), np.array([1.0, 1.0])).tolist()
    [2, 4]
    """
    v = np.asarray(values, dtype=float)
    target = np.asarray(best, dtype=float) / share
    if v.ndim != 2 or target.shape != (v.shape[0],):
        raise InvalidInputError("best", "one best value per task (values shaped (tasks, evaluations))")
    reached = np.nan_to_num(v, nan=np.inf) <= target[:, None]
    return np.where(reached.any(axis=1), reached.argmax(axis=1) + 1, v.shape[1] + 1)
