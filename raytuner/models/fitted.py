"""A fitted LCM: standardised training data, hyperparameters, and fast prediction.

Prediction of task ``i`` at new points uses the cross-covariance
``Σ_q B_q[i, task_j] k_q(x*, x_j)`` with every training sample of every
task, so one task's prediction borrows the others' data. Up to
``LCMOptions.exact_limit`` samples the posterior is exact; past it, FITC
whose inducing inputs are the samples the hyperparameters were fitted on
(:func:`~raytuner.models.posterior.balanced_subset`, :mod:`raytuner.models.posterior`).

Example:
    >>> import numpy as np
    >>> from raytuner.models import LCM, LCMOptions, TrainingData
    >>> X = np.linspace(0, 1, 8)[:, None]
    >>> fitted = LCM(LCMOptions(n_starts=1)).fit(TrainingData([X], [np.cos(3 * X[:, 0])]), seed=0)
    >>> mean, variance = fitted.predict_standardised(0, X[:2])
    >>> bool(np.all(variance < 0.01))
    True
    >>> fantasised = fitted.condition_on(0, np.array([[0.55]]), np.array([0.0]))
    >>> len(fantasised.z) - len(fitted.z)
    1
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from raytuner.errors import InvalidInputError
from raytuner.models.data import TrainingData
from raytuner.models.hyperparameters import Hyperparameters
from raytuner.models.kernels import KERNELS, scaled_distance, squared_distances
from raytuner.models.likelihood import NegativeLogLikelihood
from raytuner.models.options import FitReport, LCMOptions
from raytuner.models.posterior import ExactPosterior, SparsePosterior, balanced_subset

__all__ = ["FittedLCM", "Standardisation", "cross_covariance", "training_covariance"]

log = logging.getLogger(__name__)

#: What GPy's ``ExactGaussianInference`` adds to the likelihood variance on the diagonal.
_GPY_JITTER = 1e-8


@dataclass(frozen=True)
class Standardisation:
    """Per-task ``z = (g(y) − mean_i) / std_i`` with ``g`` the identity or ``log``.

    A task with fewer than two samples (or constant outputs) uses the
    statistics of all tasks pooled. Uncentred (``centre=False``, GPTune's
    zero prior mean), every mean is 0 and each ``std_i`` is the root mean
    square of the task's outputs, or 1 when that is smaller: the noise
    variance's lower bound in model units is then one GPTune's model has
    too (GPy adds 1e-8 to its noise variances in output units).

    >>> import numpy as np
    >>> data = TrainingData([np.zeros((2, 1))], [np.array([1.0, 3.0])])
    >>> Standardisation.of(data, log_transform=False).forward(0, np.array([1.0, 3.0])).tolist()
    [-1.0, 1.0]
    >>> Standardisation.of(data, log_transform=False, centre=False).forward(0, np.array([1.0, 3.0])).round(3).tolist()
    [0.447, 1.342]
    >>> Standardisation.of(TrainingData([np.zeros((1, 1))], [np.array([0.5])]), False, centre=False).stds.tolist()
    [1.0]
    """

    means: np.ndarray
    stds: np.ndarray
    log_transform: bool

    @classmethod
    def of(cls, data: TrainingData, log_transform: bool, centre: bool = True) -> Standardisation:
        """The transform fitted to ``data``.

        Args:
            data: the training data.
            log_transform: model the logarithm of the outputs (positive outputs only).
            centre: subtract each task's mean (``False``: means of 0, scales the root mean squares).
        """
        values = [cls._g(v, log_transform) for v in data.y]
        pooled = np.concatenate(values)
        if not centre:
            pooled_rms = float(np.sqrt(np.mean(pooled**2))) if len(pooled) else 0.0
            scales = [float(np.sqrt(np.mean(v**2))) if len(v) else pooled_rms for v in values]
            return cls(np.zeros(len(values)), np.maximum(np.asarray(scales), 1.0), log_transform)
        pooled_mean = float(pooled.mean())
        pooled_std = float(pooled.std()) if len(pooled) > 1 and pooled.std() > 0 else 1.0
        means, stds = [], []
        for v in values:
            ok = len(v) >= 2 and v.std() > 1e-12 * max(1.0, abs(float(v.mean())))
            means.append(float(v.mean()) if ok else pooled_mean)
            stds.append(float(v.std()) if ok else pooled_std)
        return cls(np.asarray(means), np.asarray(stds), log_transform)

    @staticmethod
    def _g(y: np.ndarray, log_transform: bool) -> np.ndarray:
        if not log_transform:
            return np.asarray(y, dtype=float)
        if np.any(np.asarray(y) <= 0):
            raise InvalidInputError(
                "log_transform",
                f"a log transform needs positive outputs; got a minimum of {float(np.min(y))!r}",
                allowed=[False],
            )
        return np.log(y)

    def forward(self, task: int, y: np.ndarray) -> np.ndarray:
        """Outputs of ``task`` in model units.

        Args:
            task: the task's index.
            y: outputs in output units.
        """
        return (self._g(y, self.log_transform) - self.means[task]) / self.stds[task]

    def forward_stacked(self, task: np.ndarray, y: np.ndarray) -> np.ndarray:
        """:meth:`forward` for stacked samples with a task index each.

        Args:
            task: ``(n,)`` task index of each sample.
            y: ``(n,)`` outputs in output units.
        """
        return (self._g(y, self.log_transform) - self.means[task]) / self.stds[task]

    def inverse(self, task: int, z: np.ndarray) -> np.ndarray:
        """Values in model units back in output units (the inverse of :meth:`forward`).

        Args:
            task: the task's index.
            z: values in model units.

        >>> t = Standardisation(np.array([0.0]), np.array([2.0]), log_transform=True)
        >>> t.inverse(0, t.forward(0, np.array([5.0]))).round(12).tolist()
        [5.0]
        """
        g = np.asarray(z, dtype=float) * self.stds[task] + self.means[task]
        return np.exp(g) if self.log_transform else g

    def bound(self, task: int, value: float) -> float:
        """An output bound in model units (under a log transform, a bound at or below 0 is minus infinity).

        Args:
            task: the task's index.
            value: the bound in output units (maybe infinite).
        """
        if self.log_transform:
            value = float(np.log(value)) if value > 0 else -np.inf
        return (value - self.means[task]) / self.stds[task]

    def backward(self, task: int, mean: np.ndarray, variance: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Model-unit moments back in output units (log-normal moments under a log transform).

        Args:
            task: the task's index.
            mean: means in model units.
            variance: variances in model units.
        """
        m = mean * self.stds[task] + self.means[task]
        v = variance * self.stds[task] ** 2
        if not self.log_transform:
            return m, v
        return np.exp(m + v / 2), np.expm1(v) * np.exp(2 * m + v)


def cross_covariance(
    hp: Hyperparameters,
    kernel: str,
    X1: np.ndarray,
    task1: np.ndarray,
    X2: np.ndarray,
    task2: np.ndarray,
    *,
    categorical: Sequence[int] = (),
) -> np.ndarray:
    """``Σ_q B_q[task1, task2] ∘ k_q(X1, X2)`` (no noise), shape ``(len(X1), len(X2))``.

    Args:
        hp: the hyperparameters.
        kernel: the kernel's name.
        X1: ``(n, d)`` unit-cube points.
        task1: ``(n,)`` their task indices.
        X2: ``(m, d)`` unit-cube points.
        task2: ``(m,)`` their task indices.
        categorical: the columns compared by category (:func:`~raytuner.models.kernels.squared_distances`).
    """
    B = hp.coregionalization()
    sq = squared_distances(X1, X2, categorical)
    out = np.zeros((len(X1), len(X2)))
    value, slope, scratch = np.empty_like(out), np.empty_like(out), np.empty_like(out)
    one_task = len(task1) > 0 and bool(np.all(task1 == task1[0]))  # a prediction: one row of B_q, broadcast
    for q in range(B.shape[0]):
        KERNELS[kernel].fill(scaled_distance(sq, hp.lengthscales[q]), value, slope, scratch)
        value *= B[q][task1[0], task2] if one_task else B[q][np.ix_(task1, task2)]
        out += value
    return out


def training_covariance(
    hp: Hyperparameters, kernel: str, X: np.ndarray, task: np.ndarray, *, categorical: Sequence[int] = ()
) -> np.ndarray:
    """``Σ(X, X)`` of samples with their tasks' noise on the diagonal.

    Args:
        hp: the LCM's hyperparameters.
        kernel: the kernel's name.
        X: the samples, one row each.
        task: each sample's task index.
        categorical: the columns of ``X`` that are categorical (default none).
    """
    K = cross_covariance(hp, kernel, X, task, X, task, categorical=categorical)
    K[np.diag_indices_from(K)] += hp.noise[task]
    return K


def lcm_likelihood(
    options: LCMOptions,
    X: np.ndarray,
    task: np.ndarray,
    z: np.ndarray,
    shape: tuple[int, int, int, int],
    *,
    priors: bool,
) -> NegativeLogLikelihood:
    """The negative log-likelihood of samples under an LCM with ``options``' kernel and categorical columns.

    Args:
        options: the LCM's options.
        X: ``(n, d)`` unit-cube points.
        task: ``(n,)`` their task indices.
        z: ``(n,)`` outputs in model units.
        shape: ``(latent, tasks, dimension, rank)`` of the hyperparameters.
        priors: add the options' lengthscale and noise priors (the fit's objective) or not (the likelihood alone).
    """
    latent, tasks, dimension, rank = shape
    return NegativeLogLikelihood(
        X,
        task,
        z,
        tasks=tasks,
        latent=latent,
        rank=rank,
        kernel=options.kernel,
        # samples per task over every task of the model, those still without samples too (the variant measured)
        lengthscale_prior=options.lengthscale_prior_for(len(z) / tasks, dimension) if priors else None,
        noise_prior=options.noise_prior if priors else None,
        categorical=options.categorical_columns,
    )


class FittedLCM:
    """An LCM conditioned on data; build with :meth:`condition` (or :meth:`LCM.fit`).

    Args:
        options: the LCM's options.
        data: the training data.
        transform: the per-task output transform.
        hyperparameters: the kernel's hyperparameters.
        X: ``(n, d)`` unit-cube inputs of the samples.
        task: ``(n,)`` task index of each sample.
        z: ``(n,)`` outputs in model units.
        report: how the fit went.
        posterior: the exact posterior of these samples when it is known already (default ``None``: computed).
    """

    def __init__(
        self,
        options: LCMOptions,
        data: TrainingData,
        transform: Standardisation,
        hyperparameters: Hyperparameters,
        X: np.ndarray,
        task: np.ndarray,
        z: np.ndarray,
        report: FitReport,
        *,
        posterior: ExactPosterior | None = None,
    ) -> None:
        self.options = options
        self.data = data
        self.transform = transform
        self.hyperparameters = hyperparameters
        self.X, self.task, self.z = X, task, z
        self.report = report
        hp, kernel, columns = hyperparameters, options.kernel, options.categorical_columns
        self._prior = hp.prior_variances()
        self._posterior: ExactPosterior | SparsePosterior
        if posterior is not None:
            self._posterior, self._inputs = posterior, (X, task)
        elif not options.sparse(len(z)):
            self._posterior = ExactPosterior(training_covariance(hp, kernel, X, task, categorical=columns), z)
            self._inputs = (X, task)
        else:
            u = balanced_subset(task, self.tasks, options.inducing)
            self._inputs = (X[u], task[u])
            self._posterior = SparsePosterior(
                cross_covariance(hp, kernel, X[u], task[u], X[u], task[u], categorical=columns),
                cross_covariance(hp, kernel, X[u], task[u], X, task, categorical=columns),
                self._prior[task],
                hp.noise[task],
                z,
            )
        self.jitter = self._posterior.jitter
        self._leave_one_out: tuple[np.ndarray, np.ndarray] | None = None
        self.log_likelihood = self._posterior.log_likelihood

    @property
    def exact(self) -> bool:
        """Whether the posterior is exact (else FITC, past ``LCMOptions.exact_limit`` samples)."""
        return isinstance(self._posterior, ExactPosterior)

    @classmethod
    def condition(
        cls,
        options: LCMOptions,
        data: TrainingData,
        transform: Standardisation,
        hyperparameters: Hyperparameters,
        report: FitReport,
    ) -> FittedLCM:
        """The model of ``data`` with the given hyperparameters (no fitting).

        Args:
            options: the LCM's options.
            data: the training data.
            transform: the per-task output transform.
            hyperparameters: the kernel's hyperparameters.
            report: how the fit went.
        """
        X, task, y = data.stacked()
        return cls(options, data, transform, hyperparameters, X, task, transform.forward_stacked(task, y), report)

    @property
    def tasks(self) -> int:
        """Number of tasks the model covers."""
        return int(self.hyperparameters.W.shape[1])

    def _check_task(self, task: int) -> None:
        if not 0 <= task < self.tasks:
            raise InvalidInputError("task", f"task index {task} out of range", allowed=list(range(self.tasks)))

    def predict_standardised(self, task: int, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Posterior mean and variance of the latent function of ``task`` at ``X``, in model units.

        Args:
            task: the task's index.
            X: ``(m, d)`` unit-cube points.
        """
        self._check_task(task)
        X = np.atleast_2d(np.asarray(X, dtype=float))
        cross = cross_covariance(
            self.hyperparameters,
            self.options.kernel,
            X,
            np.full(len(X), task),
            *self._inputs,
            categorical=self.options.categorical_columns,
        )
        return self._posterior.predict(cross, np.full(len(X), self._prior[task]))

    def leave_one_out(self) -> tuple[np.ndarray, np.ndarray]:
        """Leave-one-out predictive mean and variance of every training sample, in model units.

        Each sample is predicted from all the others with the same
        hyperparameters (``z_j − α_j / [K⁻¹]_jj`` and ``1 / [K⁻¹]_jj``): an
        out-of-sample view of the model at its own data, which a model that
        interpolates its data would otherwise hide. Computed once per model
        (the arrays are read-only): the engines ask for it at every suggestion.

        >>> import numpy as np
        >>> from raytuner.models import LCM, LCMOptions, TrainingData
        >>> X = np.linspace(0, 1, 9)[:, None]
        >>> fitted = LCM(LCMOptions(n_starts=1)).fit(TrainingData([X], [X[:, 0] ** 2]), seed=0)
        >>> mean, variance = fitted.leave_one_out()
        >>> bool(np.max(np.abs(mean - fitted.z)[1:-1]) < 0.1), bool(np.all(variance > 0))
        (True, True)
        """
        if not isinstance(self._posterior, ExactPosterior):
            raise InvalidInputError(
                "exact_limit",
                f"leave-one-out needs the exact posterior; this model of "
                f"{len(self.z)} samples is sparse past exact_limit="
                f"{self.options.exact_limit}",
            )
        if self._leave_one_out is None:  # a conditioned model never changes: computed once, read-only
            mean, variance = self._posterior.leave_one_out(self.z)
            mean.setflags(write=False)
            variance.setflags(write=False)
            self._leave_one_out = mean, variance
        return self._leave_one_out

    def predict(self, task: int, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Posterior mean and variance of ``task`` at ``X`` in output units.

        Args:
            task: the task's index.
            X: ``(m, d)`` unit-cube points.
        """
        return self.transform.backward(task, *self.predict_standardised(task, X))

    def standardise(self, task: int, y: np.ndarray) -> np.ndarray:
        """Outputs of ``task`` in model units.

        Args:
            task: the task's index.
            y: outputs in output units.
        """
        return self.transform.forward(task, np.asarray(y, dtype=float))

    def condition_on(self, task: int, X: np.ndarray, z: np.ndarray) -> FittedLCM:
        """The same model with extra (fantasy) samples of ``task`` in model units; no refit.

        Batch suggestions use it: a pending point enters with its predicted
        mean (Kriging believer) or a lie (constant liar). An exact posterior
        grows from its factorisation (:meth:`ExactPosterior.extended`) when
        the model stays exact.

        Args:
            task: the task's index.
            X: ``(m, d)`` unit-cube points.
            z: ``(m,)`` their outputs in model units.
        """
        self._check_task(task)
        X = np.atleast_2d(np.asarray(X, dtype=float))
        tasks = np.full(len(X), task)
        z_all = np.concatenate([self.z, np.asarray(z, dtype=float)])
        posterior = None
        if isinstance(self._posterior, ExactPosterior) and not self.options.sparse(len(z_all)):
            hp, kernel, columns = self.hyperparameters, self.options.kernel, self.options.categorical_columns
            posterior = self._posterior.extended(
                cross_covariance(hp, kernel, X, tasks, self.X, self.task, categorical=columns),
                training_covariance(hp, kernel, X, tasks, categorical=columns),
                z_all,
            )
        return FittedLCM(
            self.options,
            self.data,
            self.transform,
            self.hyperparameters,
            np.vstack([self.X, X]),
            np.concatenate([self.task, tasks]),
            z_all,
            self.report,
            posterior=posterior,
        )

    def correlation(self) -> np.ndarray:
        """The learned inter-task correlation matrix of ``Σ_q B_q``."""
        C = self.hyperparameters.coregionalization().sum(axis=0)
        d = np.sqrt(np.diag(C))
        return C / np.outer(d, d)

    def log_likelihood_gradient(self) -> np.ndarray:
        """Gradient of the log-likelihood in :meth:`Hyperparameters.to_vector` coordinates."""
        objective = lcm_likelihood(self.options, self.X, self.task, self.z, self.hyperparameters.shape, priors=False)
        return -objective(self.hyperparameters.to_vector())[1]

    def to_gpy(self) -> Any:
        """The same model as a GPy ``GPCoregionalizedRegression`` (for checks and GPy users)."""
        import GPy  # GPy is slow to import; only this method needs it

        if not self.exact:
            raise InvalidInputError("exact_limit", "GPy's coregionalised regression is exact; this model is sparse")
        if self.options.categorical_columns:
            raise InvalidInputError(
                "categorical",
                "GPy's kernels compare every column by position; this model "
                "compares columns by category (allowed: categorical=[])",
            )

        latent, tasks, dim, rank = self.hyperparameters.shape
        kernels = []
        for q in range(latent):
            k = {"rbf": GPy.kern.RBF, "matern32": GPy.kern.Matern32, "matern52": GPy.kern.Matern52}[
                self.options.kernel
            ](dim, ARD=True)
            k.lengthscale[:] = self.hyperparameters.lengthscales[q]
            k.variance[:] = 1.0
            k.variance.fix()
            kernels.append(k)
        kernel = GPy.util.multioutput.LCM(input_dim=dim, num_outputs=tasks, kernels_list=kernels, W_rank=rank)
        X_list = [self.X[self.task == i] for i in range(tasks)]
        Y_list = [self.z[self.task == i][:, None] for i in range(tasks)]
        model = GPy.models.GPCoregionalizedRegression(X_list, Y_list, kernel=kernel)
        for q in range(latent):
            part = (kernel.parameters[q] if latent > 1 else kernel).parameters[1]  # one ICM: no Add
            part.W[:] = self.hyperparameters.W[q]
            part.kappa[:] = self.hyperparameters.kappa[q]
        # GPy's exact inference factorises K + (noise + 1e-8)·I; ours K + (noise + jitter)·I. With the
        # noise at its 1e-8 floor that doubled the noise in GPy and moved the posterior mean by 4e-4
        # hand GPy the noise that makes the two matrices equal (floored: GPy needs > 0).
        for i, likelihood in enumerate(model.likelihood.likelihoods_list):
            likelihood.variance[:] = max(float(self.hyperparameters.noise[i]) + self.jitter - _GPY_JITTER, 1e-300)
        model.update_model(True)  # GPy's Add kernel keeps a K(X) cached before W and kappa were set
        return model
