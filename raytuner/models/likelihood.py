"""The LCM's negative log marginal likelihood and its gradient, vectorised in numpy.

The covariance of paper 004, section 3.1::

    Σ(x_ij, x_i'j') = Σ_q B_q[i, i'] k_q(x_ij, x_i'j') + d_i δ_ii' δ_jj'

over all samples of all tasks stacked (tasks may hold unequal numbers of
samples). With ``α = Σ⁻¹ y`` and ``A = ααᵀ − Σ⁻¹`` the gradient of the
negative log-likelihood with respect to any hyperparameter θ is
``−½ Σ_ij A_ij ∂Σ_ij/∂θ``; per latent function this needs one ``n × n``
kernel matrix, its derivative in ``r²``, and the task-block sums
``S_q = Tᵀ (A ∘ K_q) T``, so an evaluation costs one Cholesky, one inverse
from it, and ``O(Q d n²)`` elementwise work. As every matrix involved is
symmetric, the elementwise work runs on the lower triangle alone, packed
into a vector (the Cholesky reads only that triangle): half the kernel
evaluations, and sums over it count the off-diagonal twice.

Example:
    >>> import numpy as np
    >>> from raytuner.models.hyperparameters import Hyperparameters
    >>> X = np.array([[0.1], [0.5], [0.9], [0.3]])
    >>> objective = NegativeLogLikelihood(X, np.array([0, 0, 0, 1]), np.array([1.0, -1.0, 0.5, 0.2]),
    ...                                   tasks=2, latent=1, rank=1, kernel="rbf")
    >>> value, gradient = objective(Hyperparameters.initial(1, 2, 1, 1).to_vector())
    >>> bool(np.isfinite(value)), gradient.shape
    (True, (7,))
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence

import numpy as np
from scipy.linalg import LinAlgError, cho_solve, cholesky
from scipy.linalg.lapack import dpotri

from raytuner.models.hyperparameters import Hyperparameters
from raytuner.models.kernels import KERNELS, squared_distances

__all__ = ["NegativeLogLikelihood", "robust_cholesky", "JITTERS"]

log = logging.getLogger(__name__)

#: Diagonal jitters tried in turn when a Cholesky factorisation fails.
JITTERS: tuple[float, ...] = (1e-10, 1e-8, 1e-6, 1e-4, 1e-2)

#: What an evaluation returns when no jitter makes the matrix factorisable.
_FAILED = 1e25


def robust_cholesky(K: np.ndarray) -> tuple[np.ndarray, float]:
    """Lower Cholesky factor of ``K + jitter·I`` with the smallest jitter that works.

    Raises :class:`numpy.linalg.LinAlgError` when even the largest of
    :data:`JITTERS` (scaled by the mean diagonal) fails.

    Args:
        K: a symmetric positive semi-definite matrix.

    >>> L, jitter = robust_cholesky(np.ones((2, 2)))
    >>> jitter > 0
    True
    """
    scale = max(float(np.mean(np.diag(K))), 1e-12)
    for jitter in JITTERS:
        try:
            K_j = K.copy()
            K_j[np.diag_indices_from(K_j)] += jitter * scale
            return cholesky(K_j, lower=True, check_finite=True), jitter * scale
        except (LinAlgError, ValueError):
            continue
    raise LinAlgError(f"covariance not positive definite even with jitter {JITTERS[-1] * scale:g}")


class NegativeLogLikelihood:
    """``θ ↦ (−log p(y | X, θ), ∇)`` for the LCM over stacked samples.

    ``X`` ``(n, d)`` unit-cube inputs, ``task`` ``(n,)`` task indices in
    ``range(tasks)``, ``y`` ``(n,)`` standardised outputs. ``θ`` is
    :meth:`Hyperparameters.to_vector`. All work arrays (the packed lower
    triangles, the ``n × n`` factor) are allocated once: fresh allocations of
    that size cost page faults that would otherwise double the time of an
    evaluation.

    Args:
        X: ``(n, d)`` unit-cube inputs.
        task: ``(n,)`` task indices in ``range(tasks)``.
        y: ``(n,)`` standardised outputs.
        tasks: the number of tasks.
        latent: the number of latent functions.
        rank: the rank of each coregionalisation matrix.
        kernel: the kernel's name (:data:`~raytuner.models.kernels.KERNELS`).
        lengthscale_prior: ``(mean, sd)`` of a normal prior on each log length scale, whose negative
            log density (up to a constant) is added: the value is then a negative log posterior
            (default ``None``: no prior).
        noise_prior: ``(shape, rate)`` of a gamma prior on each task's noise variance, added the same
            way (default ``None``: no prior).
        categorical: the columns compared by category (:func:`~raytuner.models.kernels.squared_distances`).
    """

    def __init__(
        self,
        X: np.ndarray,
        task: np.ndarray,
        y: np.ndarray,
        *,
        tasks: int,
        latent: int,
        rank: int,
        kernel: str,
        lengthscale_prior: tuple[float, float] | None = None,
        noise_prior: tuple[float, float] | None = None,
        categorical: Sequence[int] = (),
    ) -> None:
        self.lengthscale_prior, self.noise_prior = lengthscale_prior, noise_prior
        self.X = np.asarray(X, dtype=float)
        self.task = np.asarray(task, dtype=int)
        self.y = np.asarray(y, dtype=float)
        self.tasks, self.latent, self.rank = tasks, latent, rank
        self.dimension = self.X.shape[1]
        self.kernel = KERNELS[kernel]
        n = len(self.y)
        self.evaluations = 0
        # The lower triangle (diagonal included), packed row by row: entry p is (rows[p], columns[p]).
        rows, columns = np.tril_indices(n)
        self._flat = rows * n + columns  # its positions in an n × n array
        self._sq = squared_distances(self.X, self.X, categorical)[:, rows, columns]
        self._pair = self.task[rows] * tasks + self.task[columns]  # (task, task) block of each entry
        self._diagonal = np.flatnonzero(rows == columns)
        self._rows, self._columns = rows, columns
        self._weight = np.where(rows == columns, 1.0, 2.0)  # lower-triangle sums as full ones
        size = len(rows)
        self._values = np.empty((latent, size))
        self._slopes = np.empty((latent, size))
        self._expanded = np.empty((latent, size))
        self._K = np.empty(size)
        self._A = np.empty(size)
        self._work = np.empty(size)
        self._scratch = np.empty(size)
        self._L = np.zeros((n, n))

    def hyperparameters(self, theta: np.ndarray) -> Hyperparameters:
        """The hyperparameters of vector ``theta``.

        Args:
            theta: a vector as :meth:`Hyperparameters.to_vector` makes.
        """
        return Hyperparameters.from_vector(theta, self.latent, self.tasks, self.dimension, self.rank)

    def covariance(self, theta: np.ndarray) -> np.ndarray:
        """The training covariance ``Σ(X, X)`` (noise included) at ``theta``.

        Args:
            theta: a vector as :meth:`Hyperparameters.to_vector` makes.
        """
        self._fill_covariance(self.hyperparameters(theta))
        n = len(self.y)
        flat = np.zeros(n * n)
        flat[self._flat] = self._K
        K = flat.reshape(n, n)
        return K + np.tril(K, -1).T

    def _fill_covariance(self, hp: Hyperparameters) -> None:
        B = hp.coregionalization()
        K = self._K
        K.fill(0.0)
        for q in range(self.latent):
            np.take(B[q].ravel(), self._pair, out=self._expanded[q])
            np.dot(1.0 / hp.lengthscales[q] ** 2, self._sq, out=self._work)
            self.kernel.fill(self._work, self._values[q], self._slopes[q], self._scratch)
            np.multiply(self._expanded[q], self._values[q], out=self._work)
            K += self._work
        K[self._diagonal] += hp.noise[self.task]

    def _factor(self) -> np.ndarray | None:
        """Cholesky of the filled covariance's lower triangle into ``_L`` (with jitter retries), or ``None``."""
        scale = max(float(np.mean(self._K[self._diagonal])), 1e-12)
        flat = self._L.reshape(-1)
        for jitter in JITTERS:
            flat[self._flat] = self._K
            self._L[np.diag_indices_from(self._L)] += jitter * scale
            try:
                return cholesky(self._L, lower=True, overwrite_a=True, check_finite=False)
            except (LinAlgError, ValueError):
                continue
        return None

    def __call__(self, theta: np.ndarray) -> tuple[float, np.ndarray]:
        self.evaluations += 1
        hp = self.hyperparameters(theta)
        self._fill_covariance(hp)
        L = self._factor()
        if L is None or not np.all(np.isfinite(L.diagonal())):
            return _FAILED, np.zeros_like(theta)
        alpha = cho_solve((L, True), self.y, check_finite=False)
        value = (
            0.5 * float(self.y @ alpha) + float(np.log(L.diagonal()).sum()) + 0.5 * len(self.y) * math.log(2 * math.pi)
        )
        inverse, info = dpotri(L, lower=1, overwrite_c=1)  # lower triangle of Σ⁻¹
        if info != 0 or not np.isfinite(value):
            return _FAILED, np.zeros_like(theta)
        A = self._A
        np.take(alpha, self._rows, out=A)
        A *= np.take(alpha, self._columns, out=self._scratch)
        A -= inverse.reshape(-1)[self._flat]
        A *= self._weight
        gradient = self._gradient(hp, A)
        if self.lengthscale_prior is not None:
            mean, sd = self.lengthscale_prior
            offset = (theta[: self.latent * self.dimension] - mean) / sd
            value += 0.5 * float(offset @ offset)
            gradient[: self.latent * self.dimension] += offset / sd
        if self.noise_prior is not None:  # −log Gamma(σ²; a, b) = −(a − 1) log σ² + b σ², θ = log σ²
            shape, rate = self.noise_prior
            log_noise = theta[-self.tasks :]
            noise = np.exp(log_noise)
            value += float(rate * noise.sum() - (shape - 1.0) * log_noise.sum())
            gradient[-self.tasks :] += rate * noise - (shape - 1.0)
        return value, gradient

    def _gradient(self, hp: Hyperparameters, A: np.ndarray) -> np.ndarray:
        """The gradient from ``A``: the packed lower triangle of ``ααᵀ − Σ⁻¹``, off-diagonal doubled."""
        g_length = np.empty_like(hp.lengthscales)
        g_W = np.empty_like(hp.W)
        g_kappa = np.empty_like(hp.kappa)
        work = self._work
        blocks = self.tasks * self.tasks
        for q in range(self.latent):
            np.multiply(A, self._values[q], out=work)
            half = np.bincount(self._pair, weights=work, minlength=blocks).reshape(self.tasks, self.tasks)
            S = half + half.T  # twice the task-block sums Tᵀ((ααᵀ − Σ⁻¹) ∘ K_q)T
            g_W[q] = -0.5 * S @ hp.W[q]
            g_kappa[q] = -0.25 * np.diag(S) * hp.kappa[q]
            np.multiply(A, self._expanded[q], out=work)
            work *= self._slopes[q]
            g_length[q] = self._sq @ work / hp.lengthscales[q] ** 2
        g_noise = -0.5 * np.bincount(self.task, weights=A[self._diagonal], minlength=self.tasks) * hp.noise
        return np.concatenate([g_length.ravel(), g_W.ravel(), g_kappa.ravel(), g_noise])
