"""The LCM's posterior given its hyperparameters: exact, or FITC past a size.

Both posteriors take a covariance function of the LCM (``Σ_q B_q ∘ k_q``,
:func:`raytuner.models.fitted.cross_covariance`) through the matrices they are
handed, so they know nothing of kernels or tasks:

- :class:`ExactPosterior` factorises the ``n × n`` training covariance once
  (with jitter retries) and keeps the inverse of its Cholesky factor, so the
  variances of thousands of candidates cost one matrix product. The variance
  is ``prior − ‖L⁻¹ k*‖²``: with the noise at its floor the covariance's
  condition number reaches 1e11, and the form ``prior − k*ᵀ K⁻¹ k*``
  through an explicit ``K⁻¹`` lost two orders of magnitude near the data.
- :class:`SparsePosterior` is the FITC approximation (Snelson and
  Ghahramani 2006) with ``M`` inducing inputs taken from the training samples
  of every task, so the task structure of the LCM is kept exactly (an
  inducing input is a point *and* a task). It costs ``O(n M²)`` to build and
  ``O(M²)`` per prediction instead of ``O(n³)`` and ``O(n²)``.

:func:`balanced_subset` picks the samples that a large fit uses for its
hyperparameters and as inducing inputs: as many per task as the limit
allows, the same for the same data.

Example:
    >>> import numpy as np
    >>> X = np.linspace(0, 1, 40)[:, None]
    >>> K = np.exp(-0.5 * (X - X.T) ** 2 / 0.2 ** 2)
    >>> z = np.sin(4 * X[:, 0])
    >>> exact = ExactPosterior(K + 1e-6 * np.eye(40), z)
    >>> keep = np.arange(0, 40, 4)
    >>> sparse = SparsePosterior(K[np.ix_(keep, keep)], K[keep], np.ones(40), np.full(40, 1e-6), z)
    >>> x = np.array([[0.33]])
    >>> k = np.exp(-0.5 * (x - X.T) ** 2 / 0.2 ** 2)
    >>> m_exact, _ = exact.predict(k, np.ones(1))
    >>> m_sparse, _ = sparse.predict(k[:, keep], np.ones(1))
    >>> bool(abs(m_exact[0] - m_sparse[0]) < 1e-3)
    True
"""

from __future__ import annotations

import math

import numpy as np
from scipy.linalg import LinAlgError, cho_solve, cholesky, solve_triangular

from raytuner.models.likelihood import robust_cholesky

__all__ = ["ExactPosterior", "SparsePosterior", "balanced_subset"]


def balanced_subset(task: np.ndarray, tasks: int, limit: int) -> np.ndarray:
    """Sorted indices of at most ``limit`` samples, spread as evenly over the tasks as their counts allow.

    Each task keeps all its samples when it has fewer than its share, and
    the share it leaves goes to the others. Within a task the samples are a
    random draw seeded by the task's count, so the same data give the same
    subset (a model rebuilt from a store is the model that was fitted).

    Args:
        task: ``(n,)`` task index of each sample.
        tasks: the number of tasks.
        limit: the most samples to keep.

    >>> balanced_subset(np.array([0, 0, 0, 0, 1, 2, 2, 2]), 3, 5).tolist()
    [2, 3, 4, 5, 6]
    """
    task = np.asarray(task, dtype=int)
    if len(task) <= limit:
        return np.arange(len(task))
    counts = np.bincount(task, minlength=tasks)
    quota = np.zeros(tasks, dtype=int)
    left = limit
    while left > 0:
        open_ = np.flatnonzero(quota < counts)
        if len(open_) == 0:
            break
        share = max(1, left // len(open_))
        for j in open_:
            take = min(share, counts[j] - quota[j], left)
            quota[j] += take
            left -= take
            if left == 0:
                break
    chosen = []
    for i in range(tasks):
        members = np.flatnonzero(task == i)
        rng = np.random.default_rng([len(members), i])
        chosen.append(rng.choice(members, size=quota[i], replace=False))
    return np.sort(np.concatenate(chosen))


class ExactPosterior:
    """The exact GP posterior of standardised outputs ``z`` under the training covariance ``K``.

    Args:
        K: ``(n, n)`` training covariance, noise included.
        z: ``(n,)`` outputs in model units.
    """

    method = "exact"

    def __init__(self, K: np.ndarray, z: np.ndarray) -> None:
        L, jitter = robust_cholesky(K)
        self._keep(L, solve_triangular(L, np.eye(len(z)), lower=True, check_finite=False), jitter, z)

    def _keep(self, L: np.ndarray, L_inverse: np.ndarray, jitter: float, z: np.ndarray) -> None:
        self.L, self.L_inverse, self.jitter = L, L_inverse, jitter
        self.alpha = cho_solve((L, True), z, check_finite=False)
        self.log_likelihood = float(
            -0.5 * z @ self.alpha - np.log(np.diag(L)).sum() - 0.5 * len(z) * math.log(2 * math.pi)
        )

    def extended(self, cross: np.ndarray, block: np.ndarray, z: np.ndarray) -> ExactPosterior | None:
        """The posterior with ``k`` more training samples, from this factorisation in ``O(n² k)``, or ``None``.

        The Cholesky factor grows by a block row, ``S = K_new,old L⁻ᵀ`` and
        the factor of the Schur complement ``K_new,new − S Sᵀ``, and its
        inverse likewise: the posterior of the whole covariance without
        factorising it again (fantasies of pending points are added this
        way). The new samples' diagonal gets this posterior's jitter, as the
        old ones have it. ``None`` when the Schur complement is not positive
        definite: then factorise the whole covariance.

        Args:
            cross: ``(k, n)`` covariance of the new samples with the old ones.
            block: ``(k, k)`` covariance of the new samples, noise included.
            z: ``(n + k,)`` all outputs in model units, the old samples' first.

        >>> X = np.linspace(0, 1, 6)[:, None]
        >>> K = np.exp(-0.5 * (X - X.T) ** 2 / 0.3 ** 2) + 1e-6 * np.eye(6)
        >>> z = np.cos(3 * X[:, 0])
        >>> grown = ExactPosterior(K[:4, :4], z[:4]).extended(K[4:, :4], K[4:, 4:], z)
        >>> bool(np.allclose(grown.alpha, ExactPosterior(K, z).alpha))
        True
        """
        n, k = len(self.L), len(block)
        S = cross @ self.L_inverse.T
        schur = block - S @ S.T
        schur[np.diag_indices_from(schur)] += self.jitter
        try:
            corner = cholesky(schur, lower=True, check_finite=True)
        except (LinAlgError, ValueError):
            return None
        corner_inverse = solve_triangular(corner, np.eye(k), lower=True, check_finite=False)
        L = np.zeros((n + k, n + k))
        L[:n, :n], L[n:, :n], L[n:, n:] = self.L, S, corner
        L_inverse = np.zeros((n + k, n + k))
        L_inverse[:n, :n], L_inverse[n:, n:] = self.L_inverse, corner_inverse
        L_inverse[n:, :n] = -corner_inverse @ (S @ self.L_inverse)
        grown = ExactPosterior.__new__(ExactPosterior)
        grown._keep(L, L_inverse, self.jitter, z)
        return grown

    def predict(self, cross: np.ndarray, prior: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Posterior mean and variance from the cross-covariance with the training samples.

        Args:
            cross: ``(m, n)`` covariance of the test points with the training samples.
            prior: ``(m,)`` prior variance of each test point.
        """
        mean = cross @ self.alpha
        whitened = cross @ self.L_inverse.T  # rows L⁻¹ k*: a sum of squares, not K⁻¹
        variance = prior - np.einsum("ij,ij->i", whitened, whitened)
        return mean, np.maximum(variance, 1e-12 * prior)

    def leave_one_out(self, z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Leave-one-out mean and variance of every training sample (``z_j − α_j / [K⁻¹]_jj``, ``1 / [K⁻¹]_jj``).

        Args:
            z: the training outputs in model units.
        """
        diagonal = np.einsum("ij,ij->j", self.L_inverse, self.L_inverse)  # diag(K⁻¹) = column sums of L⁻¹²
        return z - self.alpha / diagonal, 1.0 / diagonal


class SparsePosterior:
    """The FITC posterior with inducing inputs ``u`` (a subset of the training samples).

    With ``V = L_u⁻¹ K_uf`` and ``Λ = diag(K_ff − VᵀV) + noise``, the
    approximate covariance is ``VᵀV + Λ``; with ``A = I + V Λ⁻¹ Vᵀ`` the
    mean at a test point is ``w*ᵀ A⁻¹ V Λ⁻¹ z`` and the variance
    ``k** − ‖w*‖² + ‖L_A⁻¹ w*‖²`` where ``w* = L_u⁻¹ k_u*``.

    Args:
        K_uu: ``(M, M)`` covariance of the inducing inputs (no noise).
        K_uf: ``(M, n)`` their covariance with the training samples.
        prior: ``(n,)`` prior variance of each training sample (no noise).
        noise: ``(n,)`` noise variance of each training sample.
        z: ``(n,)`` outputs in model units.
    """

    method = "fitc"

    def __init__(self, K_uu: np.ndarray, K_uf: np.ndarray, prior: np.ndarray, noise: np.ndarray, z: np.ndarray) -> None:
        self.L_u, self.jitter = robust_cholesky(K_uu)
        V = solve_triangular(self.L_u, K_uf, lower=True, check_finite=False)
        lam = np.maximum(prior - np.einsum("ij,ij->j", V, V), 0.0) + noise
        scaled = V / np.sqrt(lam)
        A = scaled @ scaled.T
        A[np.diag_indices_from(A)] += 1.0
        self.L_A, _ = robust_cholesky(A)
        c = solve_triangular(self.L_A, V @ (z / lam), lower=True, check_finite=False)
        self.beta = solve_triangular(self.L_A.T, c, lower=False, check_finite=False)
        self.u_inverse = solve_triangular(self.L_u, np.eye(len(K_uu)), lower=True, check_finite=False)
        self.A_inverse_u = solve_triangular(self.L_A, self.u_inverse, lower=True, check_finite=False)
        # log N(z | 0, VᵀV + Λ) by Woodbury and the determinant lemma
        quadratic = float(z @ (z / lam)) - float(c @ c)
        self.log_likelihood = float(
            -0.5 * quadratic
            - np.log(np.diag(self.L_A)).sum()
            - 0.5 * np.log(lam).sum()
            - 0.5 * len(z) * math.log(2 * math.pi)
        )
        self.inducing = len(K_uu)

    def predict(self, cross: np.ndarray, prior: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Posterior mean and variance from the cross-covariance with the inducing inputs.

        Args:
            cross: ``(m, M)`` covariance of the test points with the inducing inputs.
            prior: ``(m,)`` prior variance of each test point.
        """
        w = cross @ self.u_inverse.T  # rows L_u⁻¹ k_u*
        mean = w @ self.beta
        a = cross @ self.A_inverse_u.T  # rows L_A⁻¹ L_u⁻¹ k_u*
        variance = prior - np.einsum("ij,ij->i", w, w) + np.einsum("ij,ij->i", a, a)
        return mean, np.maximum(variance, 1e-12 * prior)
