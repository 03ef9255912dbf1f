"""A Gaussian process over a fixed candidate set, updated one observation at a time.

Discrete BO predicts every unvisited candidate at every step. With fixed
kernel hyperparameters (the paper fixes the Matérn length scale, Table I)
the model never refits: adding the n-th observation extends the Cholesky
factor by one row, and the whole-candidate-set terms ``V = L^-1 K(X, C)``
by one row, in ``O(n N)`` for ``N`` candidates. The posterior of all
``N`` candidates then costs ``O(n N)`` too, so 18,000 candidates take a
few milliseconds instead of a fresh ``O(n^2 N)`` solve per suggestion.

The targets are standardised (mean 0, standard deviation 1) before they
meet the unit-variance kernel, as scikit-learn's ``normalize_y=True`` does.

Example:
    >>> import numpy as np
    >>> gp = CandidateGP(np.linspace(0, 1, 5)[:, None], kernel="matern52", lengthscale=0.5)
    >>> for i, y in [(0, 1.0), (4, 3.0)]:
    ...     gp.add(i, y)
    >>> mean, std = gp.posterior()
    >>> np.round(mean[[0, 4]], 6).tolist(), bool(std[2] > std[0])
    ([1.0, 3.0], True)
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from scipy.linalg import solve_triangular

__all__ = ["CandidateGP", "matern", "KERNELS"]

Kernel = Literal["matern32", "matern52"]
#: The covariance functions by name.
KERNELS: tuple[str, ...] = ("matern32", "matern52")

#: Noise variance added to the diagonal (in standardised units): observations are averages of repeated runs.
NOISE = 1e-8
_MIN_PIVOT = 1e-10


def matern(distance: np.ndarray, kernel: str, lengthscale: float) -> np.ndarray:
    """Matérn covariance (unit variance) of points ``distance`` apart.

    Args:
        distance: Scaled distances.
        kernel: ``"matern32"`` or ``"matern52"``.
        lengthscale: The length scale.

    >>> matern(np.array([0.0, 1.0]), "matern32", 1.0).round(6).tolist()
    [1.0, 0.483358]
    """
    r = np.asarray(distance, dtype=float) / lengthscale
    if kernel == "matern32":
        s = np.sqrt(3.0) * r
        return (1.0 + s) * np.exp(-s)
    if kernel == "matern52":
        s = np.sqrt(5.0) * r
        return (1.0 + s + s * s / 3.0) * np.exp(-s)
    raise ValueError(f"unknown kernel {kernel!r}; one of {KERNELS}")


class CandidateGP:
    """A fixed-hyperparameter GP whose training points are candidates (rows of ``units``).

    :meth:`add` folds in one observation of candidate ``i``; :meth:`posterior`
    returns the mean and standard deviation at every candidate, in the units
    of the observations.

    Args:
        units: The candidates on the unit cube, one row each.
        kernel: ``"matern32"`` or ``"matern52"``.
        lengthscale: The fixed length scale.
        noise: The observation noise variance (relative to the prior).
    """

    def __init__(
        self, units: np.ndarray, kernel: str = "matern32", lengthscale: float = 1.5, noise: float = NOISE
    ) -> None:
        if kernel not in KERNELS:
            raise ValueError(f"unknown kernel {kernel!r}; one of {KERNELS}")
        self.units = np.asarray(units, dtype=float)
        self.kernel = kernel
        self.lengthscale = float(lengthscale)
        self.noise = float(noise)
        n_cand = len(self.units)
        self.indices: list[int] = []
        self.values: list[float] = []
        self._L = np.zeros((8, 8))
        self._V = np.zeros((8, n_cand))
        self._explained = np.zeros(n_cand)  # column sums of V**2: prior variance explained

    def __len__(self) -> int:
        return len(self.indices)

    def covariance(self, i: int) -> np.ndarray:
        """Prior covariance between candidate ``i`` and every candidate.

        Args:
            i: A candidate's index.
        """
        diff = self.units - self.units[i]
        return matern(np.sqrt(np.einsum("ij,ij->i", diff, diff)), self.kernel, self.lengthscale)

    def add(self, index: int, value: float) -> None:
        """Fold in the observation ``value`` of candidate ``index``.

        Args:
            index: The candidate's index.
            value: Its observed value.
        """
        n = len(self.indices)
        if n == len(self._L):
            grow = 2 * n
            L = np.zeros((grow, grow))
            L[:n, :n] = self._L
            V = np.zeros((grow, self._V.shape[1]))
            V[:n] = self._V
            self._L, self._V = L, V
        k = self.covariance(index)
        offdiag = self._V[:n, index].copy()  # L^-1 k(X, x_new): the new row of L
        pivot2 = 1.0 + self.noise - float(offdiag @ offdiag)
        pivot = float(np.sqrt(max(pivot2, _MIN_PIVOT)))
        row = (k - offdiag @ self._V[:n]) / pivot
        self._L[n, :n] = offdiag
        self._L[n, n] = pivot
        self._V[n] = row
        self._explained += row * row
        self.indices.append(int(index))
        self.values.append(float(value))

    def standardisation(self) -> tuple[float, float]:
        """The mean and standard deviation the targets are standardised with."""
        y = np.asarray(self.values)
        if len(y) == 0:
            return 0.0, 1.0
        scale = float(np.std(y))
        return float(np.mean(y)), (scale if scale > 1e-12 else 1.0)

    def posterior(self) -> tuple[np.ndarray, np.ndarray]:
        """Mean and standard deviation at every candidate (the prior where nothing is observed)."""
        offset, scale = self.standardisation()
        n = len(self.indices)
        if n == 0:
            return np.full(len(self.units), offset), np.full(len(self.units), scale)
        z = (np.asarray(self.values) - offset) / scale
        w = solve_triangular(self._L[:n, :n], z, lower=True, check_finite=False)
        mean = offset + scale * (w @ self._V[:n])
        var = np.maximum(1.0 - self._explained, 0.0)
        return mean, scale * np.sqrt(var)

    def posterior_of(self, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Mean and standard deviation at every candidate of other outputs observed at the same points.

        The length scale is fixed, so one factorisation serves every output
        measured at the points added so far; each column is standardised on its own.

        Args:
            values: ``(len(self), m)`` one column per output, rows in the order the points were added.

        >>> gp = CandidateGP(np.array([[0.0], [0.5], [1.0]]))
        >>> gp.add(0, 1.0); gp.add(2, 3.0)
        >>> mean, std = gp.posterior_of(np.array([[1.0, 10.0], [3.0, 30.0]]))
        >>> mean.shape, bool(np.allclose(mean[0], gp.posterior()[0]))
        ((2, 3), True)
        """
        n = len(self.indices)
        Y = np.asarray(values, dtype=float).reshape(n, -1)
        offset = Y.mean(axis=0)
        scale = np.where(Y.std(axis=0) > 1e-12, Y.std(axis=0), 1.0)
        W = solve_triangular(self._L[:n, :n], (Y - offset) / scale, lower=True, check_finite=False)
        mean = offset[:, None] + scale[:, None] * (W.T @ self._V[:n])
        sd = np.sqrt(np.maximum(1.0 - self._explained, 0.0))
        return mean, scale[:, None] * sd[None, :]
