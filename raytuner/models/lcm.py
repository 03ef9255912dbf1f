"""The Linear Coregionalization Model (LCM) over several tasks, and its fit.

``Q`` latent functions, each a unit-variance ARD kernel (RBF or Matérn),
are mixed per task by ``B_q = W_q W_qᵀ + diag(κ_q)``, with a noise variance
per task (paper 004, section 3.1). Outputs are standardised per task
(optionally after a log transform, for run times), and hyperparameters are
fitted by L-BFGS-B from several starts that run in parallel through an
:class:`~raytuner.executors.Executor`; one start is always the previous
fit's optimum (``warm_start``). With one task this is an ordinary GP.

Example:
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X = rng.random((12, 1))
    >>> data = TrainingData([X, X], [np.sin(6 * X[:, 0]), 3 * np.sin(6 * X[:, 0]) + 1])
    >>> fitted = LCM(LCMOptions(latent=1, n_starts=2)).fit(data, seed=0)
    >>> bool(fitted.correlation()[0, 1] > 0.9)
    True
    >>> mean, variance = fitted.predict(1, np.array([[0.5]]))
    >>> bool(abs(mean[0] - (3 * np.sin(3.0) + 1)) < 0.1)
    True
"""

from __future__ import annotations

import logging
import math
import os
import time
from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize
from threadpoolctl import threadpool_limits

from raytuner.executors import Executor, default_executor
from raytuner.models.data import TrainingData
from raytuner.models.fitted import FittedLCM, Standardisation
from raytuner.models.hyperparameters import Hyperparameters
from raytuner.models.likelihood import NegativeLogLikelihood
from raytuner.models.options import FitReport, LCMOptions

__all__ = ["LCM"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Start:
    """One L-BFGS start, shipped to an executor (plain arrays: cheap to pickle)."""

    X: np.ndarray
    task: np.ndarray
    y: np.ndarray
    shape: tuple[int, int, int]      # tasks, latent, rank
    kernel: str
    theta: np.ndarray
    max_iterations: int
    free: np.ndarray | None = None   # mask of optimised entries (None: all)
    pid: int = 0                     # the fitting process, which has limited BLAS threads already


@dataclass(frozen=True)
class _StartResult:
    theta: np.ndarray
    value: float
    iterations: int
    evaluations: int


def _objective(start: _Start) -> NegativeLogLikelihood:
    tasks, latent, rank = start.shape
    return NegativeLogLikelihood(start.X, start.task, start.y, tasks=tasks, latent=latent, rank=rank,
                                 kernel=start.kernel)


def run_start(start: _Start) -> _StartResult:
    """Optimise one start with L-BFGS-B (single-threaded BLAS: small matrices, parallel starts)."""
    if start.pid != os.getpid():      # another process (a Ray worker): limit BLAS here
        with threadpool_limits(1, user_api="blas"):
            return _optimise(start)
    return _optimise(start)


def _optimise(start: _Start) -> _StartResult:
    """L-BFGS-B over the free entries of one start."""
    objective = _objective(start)
    dim = objective.dimension
    tasks, latent, rank = start.shape
    bounds = Hyperparameters.vector_bounds(latent, tasks, dim, rank)
    free = np.ones(len(start.theta), bool) if start.free is None else start.free
    full = start.theta.copy()

    def fun(sub: np.ndarray) -> tuple[float, np.ndarray]:
        full[free] = sub
        value, gradient = objective(full)
        return value, gradient[free]

    result = minimize(fun, start.theta[free], jac=True, method="L-BFGS-B",
                      bounds=[b for b, f in zip(bounds, free) if f],
                      options={"maxiter": start.max_iterations})
    theta = start.theta.copy()
    theta[free] = result.x
    return _StartResult(theta, float(result.fun), int(result.nit), objective.evaluations)


class LCM:
    """Builds and fits :class:`~raytuner.models.fitted.FittedLCM` models with fixed options.

    Args:
        options: the model's options (default :class:`~raytuner.models.LCMOptions`).
    """

    name = "raytuner.LCM"

    def __init__(self, options: LCMOptions | None = None) -> None:
        self.options = options or LCMOptions()

    def standardisation(self, data: TrainingData) -> Standardisation:
        """The per-task output transform for ``data``.

        Args:
            data: the training data.
        """
        return Standardisation.of(data, log_transform=self.options.log_transform)

    def fit(self, data: TrainingData, *, seed: int | np.random.Generator | None = None,
            executor: Executor | None = None, warm_start: Hyperparameters | None = None,
            fixed: np.ndarray | None = None) -> FittedLCM:
        """Fit the hyperparameters to ``data`` and return the conditioned model.

        ``warm_start`` (the previous optimum) is always one of the starts.
        ``fixed`` is an optional boolean mask over
        :meth:`Hyperparameters.to_vector` of entries kept at their
        ``warm_start`` values (TLA2 learns only a new task's weights this
        way). A start that fails or times out is dropped; if all do, the
        warm start (or the default) is used unoptimised, with a warning —
        a fit never raises for numerical reasons.

        Args:
            data: the training data.
            seed: a seed or generator for the random starts (default: fresh entropy).
            executor: runs the multi-start fits (default :func:`~raytuner.executors.default_executor`).
            warm_start: the previous optimum, always one of the starts (default none).
            fixed: a boolean mask over :meth:`Hyperparameters.to_vector` of entries kept at their
                ``warm_start`` values.
        """
        began = time.perf_counter()
        data = data.finite()
        transform = self.standardisation(data)
        X, task, y = data.stacked()
        z = transform.forward_stacked(task, y)
        latent = self.options.latent_for(data.tasks)
        shape = (latent, data.tasks, data.dimension, self.options.rank)
        rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
        warm = self._compatible(warm_start, shape)
        free = None if fixed is None or warm is None else ~np.asarray(fixed, bool)
        iterations = self.options.max_iterations if warm is None else self.options.warm_iterations
        # One BLAS thread for the whole fit: parallelism comes from the starts, and a limit
        # changed while another start runs would make results depend on timing.
        with threadpool_limits(1, user_api="blas"):
            thetas = self._starts(X, task, z, shape, warm, rng, free)
            jobs = [_Start(X, task, z, (data.tasks, latent, self.options.rank), self.options.kernel, theta,
                           iterations, free, os.getpid()) for theta in thetas]
            results = (executor or default_executor()).map(run_start, jobs, timeout=self.options.timeout)
        report = FitReport(starts=[{"value": r.value, "iterations": r.iterations} if r else {"failed": True}
                                   for r in results])
        finite = [r for r in results if r is not None and math.isfinite(r.value) and r.value < 1e20]
        if finite:
            best = min(finite, key=lambda r: r.value)
            theta = best.theta
            report.iterations = sum(r.iterations for r in finite)
            report.evaluations = sum(r.evaluations for r in finite)
        else:
            log.warning("every LCM start failed; using the %s hyperparameters unoptimised",
                        "warm-start" if warm is not None else "default")
            theta = thetas[0]
        report.seconds = time.perf_counter() - began
        hp = Hyperparameters.from_vector(theta, *shape)
        return FittedLCM.condition(self.options, data, transform, hp, report)

    def _compatible(self, warm: Hyperparameters | None, shape: tuple[int, int, int, int]
                    ) -> Hyperparameters | None:
        if warm is None:
            return None
        if warm.shape != shape:
            log.info("warm start of shape %s does not fit %s; ignored", warm.shape, shape)
            return None
        return warm.clipped()

    def _starts(self, X: np.ndarray, task: np.ndarray, z: np.ndarray, shape: tuple[int, int, int, int],
                warm: Hyperparameters | None, rng: np.random.Generator, free: np.ndarray | None
                ) -> list[np.ndarray]:
        """The warm (or default) start, then the best screened random starts."""
        first = warm if warm is not None else Hyperparameters.initial(*shape)
        starts = [first.to_vector()]
        wanted = (self.options.n_starts if warm is None else self.options.warm_starts) - 1
        if wanted <= 0:
            return starts
        candidates = [Hyperparameters.initial(*shape, rng=rng).to_vector()
                      for _ in range(wanted * self.options.screen)]
        if free is not None:   # only the free entries are drawn at random
            candidates = [np.where(free, c, starts[0]) for c in candidates]
        latent, tasks, _, rank = shape
        objective = NegativeLogLikelihood(X, task, z, tasks=tasks, latent=latent, rank=rank,
                                          kernel=self.options.kernel)
        scores = [objective(c)[0] for c in candidates]
        order = np.argsort(scores, kind="stable")[:wanted]
        return starts + [candidates[i] for i in order]

