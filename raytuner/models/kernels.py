"""Stationary kernels on the unit cube, as functions of the scaled squared distance.

Each kernel is ``k(r²)`` with ``r² = Σ_d (x_d − x'_d)² / ℓ_d²`` and unit
variance (the LCM's coregionalization matrices carry the scale). A kernel
also gives ``dk/d(r²)``, which is all the likelihood gradient needs: the
derivative with respect to ``log ℓ_d`` is ``dk/d(r²) · (−2 Δ_d² / ℓ_d²)``.
The definitions match GPy's ``RBF``, ``Matern32`` and ``Matern52``. In a
categorical column, ``Δ_d²`` is 0 between equal values and 1 between
different ones (:func:`squared_distances`).

Example:
    >>> import numpy as np
    >>> k = KERNELS["rbf"]
    >>> float(k.value(np.array(0.0))), round(float(k.value(np.array(2.0))), 6)
    (1.0, 0.367879)
    >>> sorted(KERNELS)
    ['matern32', 'matern52', 'rbf']
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["Kernel", "KERNELS", "squared_distances", "scaled_distance"]

_SQRT3 = np.sqrt(3.0)
_SQRT5 = np.sqrt(5.0)


@dataclass(frozen=True)
class Kernel:
    """A unit-variance stationary kernel ``k(r²)``.

    ``fill(r2, value, slope, scratch)`` writes ``k`` and ``dk/d(r²)`` into
    preallocated arrays with a single exponential (the dominant cost of a
    likelihood evaluation); ``r2`` may be overwritten.
    """

    name: str
    fill: Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray], None]

    def value_and_slope(self, r2: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``k(r²)`` and ``dk/d(r²)`` as new arrays.

        Args:
            r2: scaled squared distances (:func:`scaled_distance`).
        """
        value, slope, scratch = np.empty_like(r2), np.empty_like(r2), np.empty_like(r2)
        self.fill(r2.copy(), value, slope, scratch)
        return value, slope

    def value(self, r2: np.ndarray) -> np.ndarray:
        """``k(r²)``.

        Args:
            r2: scaled squared distances (:func:`scaled_distance`).
        """
        return self.value_and_slope(r2)[0]


def _rbf(r2: np.ndarray, value: np.ndarray, slope: np.ndarray, scratch: np.ndarray) -> None:
    np.multiply(r2, -0.5, out=value)
    np.exp(value, out=value)
    np.multiply(value, -0.5, out=slope)


def _matern32(r2: np.ndarray, value: np.ndarray, slope: np.ndarray, scratch: np.ndarray) -> None:
    np.sqrt(r2, out=scratch)
    scratch *= _SQRT3  # r
    np.negative(scratch, out=slope)
    np.exp(slope, out=slope)  # e^-r
    np.add(scratch, 1.0, out=value)
    value *= slope  # (1 + r) e^-r
    slope *= -1.5


def _matern52(r2: np.ndarray, value: np.ndarray, slope: np.ndarray, scratch: np.ndarray) -> None:
    np.sqrt(r2, out=scratch)
    scratch *= _SQRT5  # r
    np.negative(scratch, out=slope)
    np.exp(slope, out=slope)  # e^-r
    np.multiply(scratch, scratch, out=value)
    value /= 3.0
    value += scratch
    value += 1.0
    value *= slope  # (1 + r + r²/3) e^-r
    scratch += 1.0
    scratch *= slope
    np.multiply(scratch, -5.0 / 6.0, out=slope)


#: The kernels by name (the ``kernel`` option of :class:`~raytuner.models.LCMOptions`).
KERNELS: dict[str, Kernel] = {
    name: Kernel(name, fn) for name, fn in (("rbf", _rbf), ("matern32", _matern32), ("matern52", _matern52))
}


def squared_distances(a: np.ndarray, b: np.ndarray, categorical: Sequence[int] = ()) -> np.ndarray:
    """Per-dimension squared differences, shape ``(d, len(a), len(b))``.

    A ``categorical`` column compares its values by category, not by
    position: 0 where they are equal, 1 where they differ (the overlap, or
    Hamming, distance). On the unit cube a categorical parameter's values are
    the centres of equal bins; by position, an RBF would take the first
    category for a close relative of the second and a stranger to the last,
    an order the categories do not have. By category every two differ
    alike, and the column's length scale says how much any change matters.

    Args:
        a: ``(n, d)`` points.
        b: ``(m, d)`` points.
        categorical: the columns compared by category.

    >>> squared_distances(np.array([[0.0], [1.0]]), np.array([[0.5]]))[0, :, 0].tolist()
    [0.25, 0.25]
    >>> squared_distances(np.array([[0.1], [0.9]]), np.array([[0.1]]), categorical=[0])[0, :, 0].tolist()
    [0.0, 1.0]
    """
    diff = a.T[:, :, None] - b.T[:, None, :]
    out = diff * diff
    if len(categorical):
        columns = list(categorical)
        out[columns] = out[columns] > 0.0
    return out


def scaled_distance(sq: np.ndarray, lengthscales: np.ndarray) -> np.ndarray:
    """``r² = Σ_d Δ_d² / ℓ_d²`` from :func:`squared_distances` output.

    Args:
        sq: per-dimension squared differences, shape ``(d, n, m)``.
        lengthscales: one length scale per dimension.
    """
    return np.tensordot(1.0 / (lengthscales * lengthscales), sq, axes=1)
